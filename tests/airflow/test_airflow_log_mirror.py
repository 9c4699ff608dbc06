"""AUDIT_TO_AIRFLOW_LOG: every audited change also appends one row to Airflow's ``log`` table (docs/airflow.md),
in Airflow's transaction: nothing for a change that fails, nothing with the setting off, never a value."""

import json

import pytest

from statestore_admin.airflow.models import Log, TaskStateStore
from statestore_admin.records.models import AuditEvent
from tests.api.test_api import bearer, put
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
RUN_ID = "scheduled__2026-11-29T00:00:00+00:00"
TASKS = f"/api/v2/dags/etl/dagRuns/{RUN_ID.replace('+', '%2B')}/taskInstances"
HX = {"HTTP_HX_REQUEST": "true"}
SECRET = "s3cr3t-value-never-in-the-log"


@pytest.fixture
def mirror(settings):
    settings.AUDIT_TO_AIRFLOW_LOG = True


@pytest.fixture
def run(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id=RUN_ID)
    task_instance_factory(run, task_id="t")
    task_instance_factory(run, task_id="mapped", map_index=2)
    task_key_factory(run, task_id="t", key="job", value={"id": SECRET})
    task_key_factory(run, task_id="mapped", map_index=2, key="cursor", value=SECRET)
    return run


@pytest.fixture
def api(client, operator):
    client.defaults.update(bearer(operator))
    return client


@pytest.fixture
def browser(client, operator):
    client.force_login(operator)
    return client


def only_log_row() -> Log:
    rows = list(Log.objects.all())
    assert len(rows) == 1, [(r.event, r.extra) for r in rows]
    return rows[0]


def fields(row: Log) -> tuple:
    return row.event, row.dag_id, row.run_id, row.task_id, row.map_index


def assert_summary(row: Log, *, via: str, store: str, keys: int) -> dict:
    assert SECRET not in row.extra and '"value"' not in row.extra
    extra = json.loads(row.extra)
    event = AuditEvent.objects.get(pk=extra["audit_event_id"])
    assert event.status == AuditEvent.Status.DONE and f"statestore.{event.action}" == row.event
    assert {k: extra[k] for k in ("via", "store", "keys")} == {"via": via, "store": store, "keys": keys}
    assert row.dttm is not None and row.owner == row.owner_display_name == "operator"
    return extra


def test_api_put_writes_one_log_row(mirror, api, run):
    assert put(api, f"{TASKS}/t/state-store/new%2Fkey", {"value": {"nested": SECRET}}).status_code == 204
    row = only_log_row()
    assert fields(row) == ("statestore.set", "etl", RUN_ID, "t", -1)
    assert_summary(row, via="api", store="task", keys=1)


def test_api_put_of_a_mapped_task_instance_keeps_its_map_index(mirror, api, run):
    assert put(api, f"{TASKS}/mapped/state-store/cursor?map_index=2", {"value": SECRET + "2"}).status_code == 204
    row = only_log_row()
    assert fields(row) == ("statestore.set", "etl", RUN_ID, "mapped", 2)


def test_api_delete_writes_one_log_row(mirror, api, run):
    assert api.delete(f"{TASKS}/t/state-store/job").status_code == 204
    assert not TaskStateStore.objects.filter(key="job").exists()
    row = only_log_row()
    assert fields(row) == ("statestore.delete", "etl", RUN_ID, "t", -1)
    assert_summary(row, via="api", store="task", keys=1)


def test_api_delete_of_an_absent_key_writes_nothing(mirror, api, run):
    assert api.delete(f"{TASKS}/t/state-store/absent").status_code == 204
    assert not Log.objects.exists()


def test_page_edit_writes_one_log_row(mirror, browser, run):
    job = TaskStateStore.objects.get(key="job")
    response = browser.post(f"/keys/task/{job.pk}/edit/", {"value": json.dumps({"id": SECRET + "!"})}, **HX)
    assert response.status_code == 204, response.content
    row = only_log_row()
    assert fields(row) == ("statestore.patch", "etl", RUN_ID, "t", -1)
    assert_summary(row, via="ui", store="task", keys=1)


def test_page_asset_delete_names_the_asset(mirror, browser, asset_factory, asset_key_factory):
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="watermark", value=SECRET)
    confirm = browser.get(f"/assets/{asset.pk}/delete/", {"keys": "watermark"}, **HX).content.decode()
    listed = confirm.split('name="listed" value="')[1].split('"')[0]
    response = browser.post(f"/assets/{asset.pk}/delete/", {"keys": "watermark", "listed": listed}, **HX)
    assert response.status_code == 204, response.content
    row = only_log_row()
    assert fields(row) == ("statestore.delete", None, None, None, None)
    extra = assert_summary(row, via="ui", store="asset", keys=1)
    assert (extra["asset_id"], extra["asset_name"]) == (asset.pk, "orders")


def test_nothing_is_mirrored_with_the_setting_off(settings, api, browser, run):
    settings.AUDIT_TO_AIRFLOW_LOG = False
    assert put(api, f"{TASKS}/t/state-store/other", {"value": 1}).status_code == 204
    assert api.delete(f"{TASKS}/t/state-store/other").status_code == 204
    job = TaskStateStore.objects.get(key="job")
    assert browser.post(f"/keys/task/{job.pk}/edit/", {"value": "2"}, **HX).status_code == 204
    assert AuditEvent.objects.filter(status=AuditEvent.Status.DONE).count() == 3
    assert not Log.objects.exists()


def test_a_failing_change_writes_nothing(mirror, api, browser, run):
    added = browser.post(
        f"/runs/{run.pk}/tasks/t/add/", {"key": "job", "value": "1", "map_index": "-1", "expiry": "never"}, **HX
    )
    assert added.status_code == 422 and "already exists" in added.content.decode()  # Conflict
    job = TaskStateStore.objects.get(key="job")
    stale = browser.post(
        f"/keys/task/{job.pk}/edit/", {"value": "3", "seen_updated_at": "2020-01-01T00:00:00+00:00"}, **HX
    )
    assert stale.status_code == 422 and "after you opened it" in stale.content.decode()  # Conflict
    missing = api.patch(f"{TASKS}/t/state-store/missing", json.dumps({"value": 1}), content_type="application/json")
    assert missing.status_code == 404  # NotFound
    assert not Log.objects.exists()
    assert TaskStateStore.objects.get(key="job").value == json.dumps({"id": SECRET})
