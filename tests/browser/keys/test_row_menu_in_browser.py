"""A key row's actions menu in a real browser, on the run page of a loop whose 500 iterations all hold keys
(Airflow 3.4's schema, AIRFLOW_FIXTURE_SERIES=3.4; skipped on 3.3): a row carries no buttons until its menu opens,
which fetches them once (htmx); expiring and deleting a key through it go through their confirmation as before,
and the page stays under 100 KB. A key deleted after the page was shown says so when its menu opens."""

import re

import pytest
from django.db import connections
from playwright.sync_api import expect

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.airflow.versions import schema_of
from tests.browser.conftest import row_action
from tests.conftest import BOTH_DATABASES
from tests.factories import make_dag_run, make_long_loop

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
ITERATIONS = 500


@pytest.fixture
def deployment():
    if not schema_of(connections["airflow"]).regions:
        pytest.skip("Airflow 3.3's schema has no dynamic regions: run with AIRFLOW_FIXTURE_SERIES=3.4")
    run = make_dag_run(dag_id="long_loop", run_id="manual__500")
    make_long_loop(run, "refine", ITERATIONS, keyed=range(ITERATIONS))
    yield run
    with connections["airflow"].cursor() as cursor:  # the 3.4 tables committed_airflow_tables does not empty
        for table in ("xcom_v2", "dynamic_region"):
            cursor.execute(f"DELETE FROM {table}")


def row_at(page, iteration: int):
    """The row of refine.step's key in ``iteration``."""
    path = re.compile(f"^loop refine · iteration {iteration}$")
    return page.locator("#keys-panel tr", has=page.locator("td.region .region-path", has_text=path))


def test_a_rows_menu_is_fetched_when_opened_and_expires_and_deletes_through_its_confirmation(
    signed_in, live_server, deployment
):
    page = signed_in
    fetched = []
    page.on("request", lambda request: "/actions/" in request.url and fetched.append(request.url))
    response = page.goto(f"{live_server.url}/runs/{deployment.pk}/")
    assert len(response.body()) < 100_000
    expect(page.locator("#keys-panel td.key")).to_have_count(50)
    row = row_at(page, 1)
    expect(row).to_have_count(1)
    expect(row.locator("button")).to_have_count(0)  # nothing but the menu's address until it opens
    assert fetched == []
    key = TaskStateStore.objects.get(task_id="refine.step", map_index=1)

    row_action(row, "Expire now: offset").click()
    dialog = page.locator("dialog#modal")
    expect(dialog).to_contain_text("1 key expires now")
    dialog.get_by_role("button", name="Expire 1 key").click()
    expect(page.locator("#toasts .toast-text").last).to_have_text("Expired 1 key.")
    assert [url.split(live_server.url)[1] for url in fetched] == [f"/keys/task/{key.pk}/actions/"]
    key.refresh_from_db()
    assert key.expires_at is not None
    # The panel refreshes after the action: the next row is the refreshed one's (a menu opened on the row it
    # replaces is detached under the click).
    expect(row_at(page, 1).locator("td.expiry .badge-expired")).to_be_visible()

    row = row_at(page, 2)
    doomed = TaskStateStore.objects.get(task_id="refine.step", map_index=2)
    row_action(row, "Delete offset").click()
    expect(dialog.get_by_role("button", name="Delete 1 key")).to_be_visible()
    dialog.get_by_role("button", name="Delete 1 key").click()
    expect(page.locator("#toasts .toast-text").last).to_have_text("Deleted 1 key.")
    expect(row_at(page, 2)).to_have_count(0)  # the panel refreshed without it
    assert not TaskStateStore.objects.filter(pk=doomed.pk).exists()
    assert TaskStateStore.objects.count() == 2 * ITERATIONS - 1


def test_the_menu_of_a_key_deleted_meanwhile_says_so_and_keeps_the_link_to_its_page(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment.pk}/")
    row = row_at(page, 3)
    TaskStateStore.objects.filter(task_id="refine.step", map_index=3).delete()
    row.locator("summary").click()
    error = page.locator("#toasts .toast-error")
    expect(error).to_have_text(re.compile("it may have been deleted"))
    expect(row.get_by_role("link", name="Open the key's page")).to_be_visible()  # no buttons, and nothing broken
    expect(row.locator("button")).to_have_count(0)
