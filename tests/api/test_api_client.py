"""Airflow's own Python client (apache-airflow-client 3.3.2) against a live server of ours, every method."""

from datetime import UTC, datetime, timedelta

import airflow_client.client as ac
import pytest
from airflow_client.client.exceptions import ForbiddenException, NotFoundException, UnauthorizedException
from airflow_client.client.models.asset_state_store_body import AssetStateStoreBody
from airflow_client.client.models.expires_at import ExpiresAt
from airflow_client.client.models.task_state_store_body import TaskStateStoreBody
from airflow_client.client.models.task_state_store_patch_body import TaskStateStorePatchBody

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
RUN_ID = "manual__2026-11-30T00:00:00+00:00"
ODD_KEY = "reports/2026: daily total"


@pytest.fixture
def deployment(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl_orders", run_id=RUN_ID)
    task_instance_factory(run, task_id="load")
    for map_index in (0, 1, 2):
        task_instance_factory(run, task_id="fold", map_index=map_index)
        task_key_factory(run, task_id="fold", map_index=map_index, key="checkpoint", value={"epoch": map_index})
    asset = asset_factory(name="orders_raw", uri="s3://warehouse/orders")
    asset_key_factory(
        asset,
        key="watermark",
        value="2026-11-29",
        kind="task",
        dag_id="etl_orders",
        run_id=RUN_ID,
        task_id="load",
        map_index=-1,
    )
    return {"run": run, "asset": asset}


def client_for(live_server, user):
    _, token = ApiToken.issue(user, "airflow-client")
    configuration = ac.Configuration(host=live_server.url, access_token=token)
    return ac.ApiClient(configuration)


@pytest.fixture
def api(live_server, operator):
    with client_for(live_server, operator) as api_client:
        yield api_client


def test_task_state_store_api(api, deployment):
    tasks = ac.TaskStateStoreApi(api)
    body = TaskStateStoreBody(value={"job": "spark-1", "attempt": 2})  # expires_at omitted: "default"
    tasks.set_task_state_store(ODD_KEY, "etl_orders", RUN_ID, "load", body)
    entry = tasks.get_task_state_store(ODD_KEY, "etl_orders", RUN_ID, "load")
    assert entry.key == ODD_KEY and entry.value == {"job": "spark-1", "attempt": 2}
    assert entry.expires_at - datetime.now(UTC) > timedelta(days=29)

    never = TaskStateStoreBody(value="forever", expires_at=None)
    never.expires_at = None
    tasks.set_task_state_store("pinned", "etl_orders", RUN_ID, "load", never)
    at = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    tasks.set_task_state_store(
        "dated", "etl_orders", RUN_ID, "load", TaskStateStoreBody(value=[1, 2], expires_at=ExpiresAt(at))
    )
    listed = tasks.list_task_state_store("etl_orders", RUN_ID, "load", limit=2, offset=0)
    assert listed.total_entries == 3 and [e.key for e in listed.task_state_store] == ["dated", "pinned"]
    page_two = tasks.list_task_state_store("etl_orders", RUN_ID, "load", limit=2, offset=2)
    assert [e.key for e in page_two.task_state_store] == [ODD_KEY]
    assert tasks.get_task_state_store("dated", "etl_orders", RUN_ID, "load").expires_at == at
    assert TaskStateStore.objects.get(key="pinned").expires_at is None

    before = tasks.get_task_state_store("dated", "etl_orders", RUN_ID, "load")
    tasks.patch_task_state_store("dated", "etl_orders", RUN_ID, "load", TaskStateStorePatchBody(value={"v": 3}))
    after = tasks.get_task_state_store("dated", "etl_orders", RUN_ID, "load")
    assert after.value == {"v": 3} and after.expires_at == before.expires_at

    mapped = tasks.list_task_state_store("etl_orders", RUN_ID, "fold", map_index=1)
    assert [e.value for e in mapped.task_state_store] == [{"epoch": 1}]
    tasks.clear_task_state_store("etl_orders", RUN_ID, "fold", map_index=0)
    assert set(TaskStateStore.objects.filter(task_id="fold").values_list("map_index", flat=True)) == {1, 2}
    tasks.clear_task_state_store("etl_orders", RUN_ID, "fold", all_map_indices=True)
    assert not TaskStateStore.objects.filter(task_id="fold").exists()

    tasks.delete_task_state_store(ODD_KEY, "etl_orders", RUN_ID, "load")
    tasks.delete_task_state_store(ODD_KEY, "etl_orders", RUN_ID, "load")  # absent: still fine
    assert not TaskStateStore.objects.filter(key=ODD_KEY).exists()


def test_task_state_store_api_not_found(api, deployment):
    tasks = ac.TaskStateStoreApi(api)
    with pytest.raises(NotFoundException) as missing_key:
        tasks.get_task_state_store("nope", "etl_orders", RUN_ID, "load")
    assert "Task state store key 'nope' not found" in missing_key.value.body
    with pytest.raises(NotFoundException) as missing_ti:
        tasks.set_task_state_store("k", "etl_orders", RUN_ID, "ghost", TaskStateStoreBody(value=1))
    assert "Task instance not found for dag_id='etl_orders'" in missing_ti.value.body
    with pytest.raises(NotFoundException):
        tasks.patch_task_state_store("nope", "etl_orders", RUN_ID, "load", TaskStateStorePatchBody(value=1))
    with pytest.raises(NotFoundException):
        tasks.clear_task_state_store("etl_orders", RUN_ID, "ghost")
    with pytest.raises(NotFoundException):
        tasks.delete_task_state_store("k", "etl_orders", "no-such-run", "load")
    assert tasks.list_task_state_store("etl_orders", RUN_ID, "ghost").total_entries == 0


def test_asset_state_store_api(api, deployment):
    assets = ac.AssetStateStoreApi(api)
    asset_id = deployment["asset"].pk
    listed = assets.list_asset_state_store(asset_id)
    assert listed.total_entries == 1
    writer = listed.asset_state_store[0].last_updated_by
    assert (writer.kind, writer.dag_id, writer.task_id, writer.map_index) == ("task", "etl_orders", "load", -1)
    assets.set_asset_state_store(ODD_KEY, asset_id, AssetStateStoreBody(value={"offset": 42}))
    entry = assets.get_asset_state_store(ODD_KEY, asset_id)
    assert entry.value == {"offset": 42} and entry.last_updated_by.kind == "api"
    assert assets.list_asset_state_store(asset_id, limit=1, offset=1).asset_state_store[0].key == "watermark"
    assets.delete_asset_state_store(ODD_KEY, asset_id)
    assert not AssetStateStore.objects.filter(key=ODD_KEY).exists()
    assets.clear_asset_state_store(asset_id)
    assert not AssetStateStore.objects.exists()
    with pytest.raises(NotFoundException) as missing:
        assets.get_asset_state_store("watermark", asset_id)
    assert "Asset state store key 'watermark' not found" in missing.value.body
    with pytest.raises(NotFoundException) as unknown:
        assets.list_asset_state_store(987654)
    assert "Asset with id 987654 not found" in unknown.value.body


def test_client_errors_for_auth(live_server, deployment, nobody):
    with client_for(live_server, nobody) as forbidden:
        with pytest.raises(ForbiddenException):
            ac.TaskStateStoreApi(forbidden).list_task_state_store("etl_orders", RUN_ID, "load")
    configuration = ac.Configuration(host=live_server.url, access_token="ssa_wrong")
    with ac.ApiClient(configuration) as wrong, pytest.raises(UnauthorizedException):
        ac.AssetStateStoreApi(wrong).list_asset_state_store(deployment["asset"].pk)
