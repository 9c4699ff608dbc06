"""Editing a worker-side reference (issue 23 item 9), in a real browser on the demo's data with its local object
storage (``file://``, as ``make run`` configures it in var/demo/state/): the editor says that saving replaces the
reference with an inline value and orphans the object, and "Also delete the worker-side object" deletes it
after the row. No console error."""

import json

import pytest
from playwright.sync_api import expect

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.demo.data import load_demo_data
from tests.conftest import BOTH_DATABASES
from tests.objects_helpers import file_storage, object_exists

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]


@pytest.fixture
def deployment(tmp_path, monkeypatch):
    store = file_storage(tmp_path, monkeypatch)
    load_demo_data()
    rows = TaskStateStore.objects.filter(dag_id="s3_ingest", task_id="download", key="manifest").order_by("pk")
    row = next(r for r in rows if r.worker_ref and store.contains(r.worker_ref))
    assert object_exists(store, row.worker_ref)
    return {"store": store, "row": row, "ref": row.worker_ref}


def test_editing_a_reference_warns_and_can_delete_its_object(
    signed_in, live_server, deployment, console_errors, screenshot
):
    page, ref = signed_in, deployment["ref"]
    page.goto(f"{live_server.url}/keys/task/{deployment['row'].pk}/")
    page.locator(".toolbar").get_by_role("button", name="Edit value").click()
    dialog = page.locator("dialog#modal")
    warning = dialog.get_by_test_id("ref-edit-warning")
    expect(warning).to_contain_text("Saving replaces the reference with the inline value you write here")
    expect(warning).to_contain_text("left behind as an orphan")
    expect(warning).to_contain_text(ref)
    screenshot("edit-worker-ref")
    dialog.locator("textarea").fill('{"files": []}')
    dialog.get_by_label("Also delete the worker-side object, once the new value is saved").check()
    dialog.get_by_role("button", name="Save value").click()
    expect(page.locator("#toasts .toast-text").last).to_have_text(
        "Saved the value of 'manifest'. Its worker-side object was deleted."
    )
    assert json.loads(TaskStateStore.objects.get(pk=deployment["row"].pk).value) == {"files": []}
    assert not object_exists(deployment["store"], ref)


def test_saving_without_the_box_keeps_the_object(signed_in, live_server, deployment, console_errors):
    page = signed_in
    page.goto(f"{live_server.url}/keys/task/{deployment['row'].pk}/")
    page.locator(".toolbar").get_by_role("button", name="Edit value").click()
    dialog = page.locator("dialog#modal")
    dialog.locator("textarea").fill('{"files": []}')
    dialog.get_by_role("button", name="Save value").click()
    expect(page.locator("#toasts .toast-text").last).to_have_text("Saved the value of 'manifest'.")
    assert object_exists(deployment["store"], deployment["ref"])  # an orphan now, as the editor said
