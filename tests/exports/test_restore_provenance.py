"""A restore puts back who wrote each key and when (issue 42, item 4), and the audit trail names the asset of a
restore as it names the asset of the change it undoes (item 5). Airflow's rows are read directly, on the schema
the test database has (3.3, or 3.4 with AIRFLOW_FIXTURE_SERIES=3.4) and on SQLite or PostgreSQL."""

import json
import uuid
from datetime import UTC, datetime

import pytest
from django.db import connections

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.airflow.versions import schema_of
from statestore_admin.exports import restore as restores
from statestore_admin.records.models import AuditEvent
from statestore_admin.state import services
from statestore_admin.state.selectors import TaskAddress
from statestore_admin.tokens.models import ApiToken

from ..conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
WRITTEN = datetime(2026, 11, 28, 4, 5, 6, 789000, tzinfo=UTC)
WATCHED = datetime(2026, 11, 20, 1, 2, 3, tzinfo=UTC)
WRITER = (
    "updated_at",
    "last_updated_by_kind",
    "last_updated_by_dag_id",
    "last_updated_by_run_id",
    "last_updated_by_task_id",
    "last_updated_by_map_index",
    "last_updated_by_task_instance_id",
    "last_updated_by_region_id",
    "last_updated_by_region_index",
    "last_updated_by_try_number",
)


def on_34() -> bool:
    return schema_of(connections["airflow"]).regions


@pytest.fixture
def asset(asset_factory, asset_key_factory):
    """orders_raw with a key written by the task etl_orders · extract (with 3.4's identity of it there) and one
    written by a watcher, at times of their own."""
    asset = asset_factory(name="orders_raw", uri="s3://warehouse/orders_raw")
    identity = {}
    if on_34():
        identity = {"task_instance_id": uuid.uuid4(), "region_id": uuid.uuid4(), "region_index": 2, "try_number": 3}
    asset_key_factory(
        asset, key="watermark", value="2026-11-28", kind="task", dag_id="etl_orders",
        run_id="scheduled__2026-11-28", task_id="extract", map_index=2, **identity,
    )  # fmt: skip
    asset_key_factory(asset, key="cursor", value={"id": 7}, kind="watcher")
    AssetStateStore.objects.filter(asset=asset, key="watermark").update(updated_at=WRITTEN)
    AssetStateStore.objects.filter(asset=asset, key="cursor").update(updated_at=WATCHED)
    return asset


def asset_rows(asset) -> dict:
    return {row["key"]: row for row in AssetStateStore.objects.filter(asset=asset).values("key", "value", *WRITER)}


@pytest.fixture
def op_client(client, operator):
    client.force_login(operator)
    return client


def undo_on_the_page(client, event) -> AuditEvent:
    response = client.post(f"/audit/{event.pk}/restore/", **HX)
    assert response.status_code == 200, response.content
    return AuditEvent.objects.get(restored_from=event)


# Item 4: a restore puts back the writer and the time -----------------------------------------------------------
def test_undo_of_an_asset_clear_puts_back_each_writer_and_time(op_client, ui, asset):
    before = asset_rows(asset)
    clear = services.clear_asset(actor=ui, asset_id=asset.pk).event
    assert not asset_rows(asset)
    undo_on_the_page(op_client, clear)
    assert asset_rows(asset) == before
    page = op_client.get(f"/assets/{asset.pk}/key/?key=watermark").content.decode()
    assert "etl_orders · extract" in page and ">API<" not in page


def test_undo_of_an_asset_edit_puts_back_the_task_writer(ui, asset):
    before = asset_rows(asset)
    edit = services.set_asset_key(actor=ui, asset_id=asset.pk, key="watermark", value="x", mode=services.UPDATE)
    assert edit.written and asset_rows(asset)["watermark"]["last_updated_by_kind"] == "api"
    event = AuditEvent.objects.get()
    restores.restore_event(actor=ui, event_id=event.pk)
    assert asset_rows(asset) == before


def test_undo_of_a_restore_puts_back_what_it_replaced(ui, asset):
    """The restore records the writer of what it overwrites too: undoing it is exact in turn."""
    edit_event = services.set_asset_key(actor=ui, asset_id=asset.pk, key="watermark", value="x") and (
        AuditEvent.objects.get()
    )
    edited = asset_rows(asset)
    restores.restore_event(actor=ui, event_id=edit_event.pk)
    restore = AuditEvent.objects.get(restored_from=edit_event)
    restores.restore_event(actor=ui, event_id=restore.pk)
    assert asset_rows(asset) == edited


def test_undo_of_a_task_key_delete_puts_back_its_updated_at(ui, dag_run_factory, task_instance_factory):
    run = dag_run_factory(dag_id="etl_orders", run_id="r1")
    task_instance_factory(run, task_id="extract")
    row = TaskStateStore.objects.create(
        dag_run=run, dag_id="etl_orders", run_id="r1", task_id="extract", key="offset", value="41",
        updated_at=WRITTEN, expires_at=None,
    )  # fmt: skip
    delete = services.delete_task_keys(actor=ui, selection=services.TaskSelection(ids=(row.pk,))).event
    assert not TaskStateStore.objects.exists()
    restores.restore_event(actor=ui, event_id=delete.pk)
    assert TaskStateStore.objects.values_list("key", "value", "updated_at").get() == ("offset", "41", WRITTEN)


def test_undo_of_a_task_expiry_change_keeps_its_updated_at(ui, dag_run_factory, task_instance_factory):
    run = dag_run_factory(dag_id="etl_orders", run_id="r1")
    task_instance_factory(run, task_id="extract")
    TaskStateStore.objects.create(
        dag_run=run, dag_id="etl_orders", run_id="r1", task_id="extract", key="offset", value="41",
        updated_at=WRITTEN, expires_at=None,
    )  # fmt: skip
    address = TaskAddress("etl_orders", "r1", "extract")
    services.expire_task_keys(actor=ui, selection=services.TaskSelection(address=address))
    restores.restore_event(actor=ui, event_id=AuditEvent.objects.get().pk)
    assert TaskStateStore.objects.values_list("updated_at", "expires_at").get() == (WRITTEN, None)


def test_a_restored_file_keeps_its_times_and_names_the_restorer_not_the_api(op_client, ui, asset):
    """A file holds no writer: the key gets none (Airflow reads it as unknown), and the pages say who restored
    it; its updated_at is the file's."""
    document = json.loads(b"".join(op_client.get(f"/assets/{asset.pk}/keys/export/").streaming_content))
    services.clear_asset(actor=ui, asset_id=asset.pk)
    restores.restore_document(actor=ui, document=document)
    rows = asset_rows(asset)
    assert (rows["watermark"]["updated_at"], rows["cursor"]["updated_at"]) == (WRITTEN, WATCHED)
    assert {row["last_updated_by_kind"] for row in rows.values()} == {None}
    page = op_client.get(f"/assets/{asset.pk}/").content.decode()
    assert "restored by <bdi>operator</bdi>" in page and ">API<" not in page
    key_page = op_client.get(f"/assets/{asset.pk}/key/?key=cursor").content.decode()
    assert "restored by <bdi>operator</bdi>" in key_page


# Item 5: one name per asset in the audit trail -------------------------------------------------------------------
def test_the_clear_and_its_restore_name_the_asset_everywhere(op_client, ui, operator, asset):
    clear = services.clear_asset(actor=ui, asset_id=asset.pk).event
    restore = undo_on_the_page(op_client, clear)
    assert (restore.asset_id, restore.asset_name, restore.asset_uri) == (asset.pk, "orders_raw", asset.uri)
    link = f'asset <a href="/assets/{asset.pk}/">orders_raw</a>'
    listed = op_client.get("/audit/").content.decode()
    assert listed.count(link) == 2 and f">{asset.pk}</a>" not in listed
    assert f'<a href="/assets/{asset.pk}/">orders_raw</a>' in op_client.get(f"/audit/{restore.pk}/").content.decode()
    exported = json.loads(b"".join(op_client.get("/audit/export/", {"format": "json"}).streaming_content))
    assert [e["asset_name"] for e in exported["events"]] == ["orders_raw", "orders_raw"]
    csv = b"".join(op_client.get("/audit/export/", {"format": "csv"}).streaming_content).decode()
    assert csv.count("orders_raw") >= 2
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(operator, 'tests')[1]}"}
    items = op_client.get("/api/statestore/v1/audit-events", **bearer).json()["items"]
    assert [e["asset_name"] for e in items] == ["orders_raw", "orders_raw"]
    one = op_client.get(f"/api/statestore/v1/audit-events/{restore.pk}", **bearer).json()
    assert one["asset_name"] == "orders_raw"


def test_an_event_stored_with_the_asset_id_alone_is_named_when_shown(op_client, ui, operator, asset):
    """Restores recorded before the fix kept the asset's id only: the faces name the asset all the same, and
    say so when it no longer exists."""
    clear = services.clear_asset(actor=ui, asset_id=asset.pk).event
    restore = undo_on_the_page(op_client, clear)
    AuditEvent.objects.filter(pk=restore.pk).update(asset_name="", asset_uri="")
    listed = op_client.get("/audit/").content.decode()
    assert listed.count(f'asset <a href="/assets/{asset.pk}/">orders_raw</a>') == 2
    exported = json.loads(b"".join(op_client.get("/audit/export/", {"format": "json"}).streaming_content))
    assert [e["asset_name"] for e in exported["events"]] == ["orders_raw", "orders_raw"]
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(operator, 'tests')[1]}"}
    one = op_client.get(f"/api/statestore/v1/audit-events/{restore.pk}", **bearer).json()
    assert (one["asset_name"], one["asset_uri"]) == ("orders_raw", asset.uri)
    asset_id = asset.pk
    asset.delete()
    listed = op_client.get("/audit/").content.decode()
    assert f"asset #{asset_id}" in listed and "(deleted)" in listed
    event_page = op_client.get(f"/audit/{restore.pk}/").content.decode()
    assert f"asset #{asset_id}" in event_page and "(deleted)" in event_page


def test_a_writer_recorded_on_34_restores_onto_33_without_34s_columns(ui, asset):
    """Airflow 3.4's task identity has no columns on 3.3: the rest of the writer is put back."""
    if on_34():
        pytest.skip("the 3.3 schema: run without AIRFLOW_FIXTURE_SERIES=3.4")
    before = asset_rows(asset)
    clear = services.clear_asset(actor=ui, asset_id=asset.pk).event
    recorded = clear.keys.get(key="watermark")
    recorded.before_writer |= {"last_updated_by_task_instance_id": str(uuid.uuid4()), "last_updated_by_try_number": 3}
    recorded.save()
    restores.restore_event(actor=ui, event_id=clear.pk)
    assert asset_rows(asset) == before


def test_the_asset_filter_names_its_asset_and_finds_the_clear_and_its_restore(op_client, ui, asset):
    clear = services.clear_asset(actor=ui, asset_id=asset.pk).event
    undo_on_the_page(op_client, clear)
    page = op_client.get("/audit/", {"asset_id": asset.pk}).content.decode()
    assert 'data-testid="filter-asset_id-hint">orders_raw</span>' in page
    assert page.count(f'asset <a href="/assets/{asset.pk}/">orders_raw</a>') == 2


def test_a_dashboard_edit_is_shown_as_the_dashboards_not_the_apis(op_client, operator, asset):
    """Airflow's column records kind "api" (as Airflow's PUT does); the pages name the face and the user."""
    response = op_client.post(
        f"/assets/{asset.pk}/key/edit/?key=watermark", {"key": "watermark", "value": '"2026-12-01"'}, **HX
    )
    assert response.status_code in (200, 204), response.content
    assert asset_rows(asset)["watermark"]["last_updated_by_kind"] == "api"
    page = op_client.get(f"/assets/{asset.pk}/key/?key=watermark").content.decode()
    assert '<span class="badge badge-writer">dashboard</span> <bdi>operator</bdi>' in page and ">API<" not in page
    # A write through the API is the API's.
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(operator, 'tests')[1]}"}
    put = op_client.put(
        f"/api/v2/assets/{asset.pk}/state-store/cursor", json.dumps({"value": 8}), content_type="application/json",
        **bearer,
    )  # fmt: skip
    assert put.status_code == 204, put.content
    listed = op_client.get(f"/assets/{asset.pk}/").content.decode()
    assert ">API<" in listed and "<bdi>operator</bdi>" in listed
