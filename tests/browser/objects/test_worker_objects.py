"""Worker-side objects in a real browser: the value behind a reference on its key page, a delete whose object
cannot be deleted (a warning toast naming it, the row gone), and the Orphans page listing what it left."""

import json

import pytest
from playwright.sync_api import expect

from statestore_admin.airflow.models import TaskStateStore
from tests.conftest import BOTH_DATABASES
from tests.objects_helpers import file_storage, object_exists, read_only, ref_value, write_object

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
RUN_ID = "scheduled__2026-11-29T00:00:00+00:00"
MANIFEST = {"files": [{"path": "s3://landing/part-00001.parquet", "rows": 10_000}], "note": "<b>not bold</b>"}


@pytest.fixture
def deployment(tmp_path, monkeypatch, settings, dag_run_factory, task_instance_factory, task_key_factory):
    store = file_storage(tmp_path, monkeypatch)
    settings.WORKER_BACKEND_READ = True
    run = dag_run_factory(dag_id="s3_ingest", run_id=RUN_ID, state="running")
    task_instance_factory(run, task_id="download")
    ref = write_object(store, store.task_ref("s3_ingest", RUN_ID, "download", -1, "manifest"), MANIFEST)
    row = task_key_factory(run, task_id="download", key="manifest", value=ref_value(ref), expires_at=None)
    return {"store": store, "ref": ref, "row": row, "run": run}


@pytest.fixture
def signed_in(page, live_server, operator, deployment):
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", operator.username)
    page.fill("#id_password", operator.raw_password)
    page.click("form.login button[type=submit]")  # not the header's language menu
    expect(page.locator("h1")).to_have_text("Task & asset state")
    return page


def test_the_key_page_shows_the_objects_value_and_a_failed_delete_leaves_an_orphan(
    signed_in, live_server, deployment, screenshot
):
    page, ref = signed_in, deployment["ref"]
    page.goto(f"{live_server.url}/keys/task/{deployment['row'].pk}/")
    expect(page.get_by_test_id("reference")).to_have_text(ref)
    expect(page.get_by_test_id("reference-kind")).to_have_text("object")
    expect(page.get_by_test_id("resolved-heading")).to_have_text("Value read from the object")
    resolved = page.locator("#resolved-value")
    assert json.loads(resolved.input_value()) == MANIFEST
    expect(page.locator(".value-view").first).to_contain_text("<b>not bold</b>")  # text, never markup
    assert page.locator(".value-view b").count() == 0
    screenshot("key-object")

    with read_only(deployment["store"].path(ref).rsplit("/", 1)[0]):
        page.get_by_role("button", name="Delete", exact=True).click()
        dialog = page.locator("dialog#modal")
        expect(dialog).to_contain_text("then its object")
        dialog.get_by_role("button", name="Delete 1 key").click()
        toast = page.locator("#toasts .toast").last
        expect(toast).to_contain_text("1 worker-side object could not be deleted and is now orphaned")
        expect(toast).to_contain_text(ref)
        expect(toast).to_have_class("toast toast-warning")
    assert not TaskStateStore.objects.exists() and object_exists(deployment["store"], ref)

    page.goto(f"{live_server.url}/orphans/")
    expect(page.locator("main")).to_contain_text(ref)
    modified = page.get_by_test_id("orphans-sample").locator("time")
    expect(modified).to_have_count(1)
    expect(modified).to_contain_text("just now")  # in the reader's time zone, the UTC time on hover
    screenshot("orphans")
