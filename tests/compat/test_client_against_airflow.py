"""Airflow's official Python client (apache-airflow-client 3.3.2, the dashboard's dev requirement) against the
dashboard on each pinned Airflow version's golden database: a 3.3 database, and a 3.4 one whose state sits in
dynamic regions. The client knows nothing of regions: its map_index is the public map index.

The same calls run against Airflow 3.4.0b2's `airflow api-server` too (on another copy): what the test expects
is what Airflow itself does with this client on a database with regions."""

from datetime import UTC, datetime, timedelta

import airflow_client.client as ac
import pytest
from airflow_client.client.exceptions import NotFoundException
from airflow_client.client.models.asset_state_store_body import AssetStateStoreBody
from airflow_client.client.models.task_state_store_body import TaskStateStoreBody
from airflow_client.client.models.task_state_store_patch_body import TaskStateStorePatchBody

from .conftest import AIRFLOW_33, AIRFLOW_34, Dashboard, query, side_of

pytestmark = pytest.mark.compat

# The tasks each golden DAG run has: an unmapped one, and a mapped one (3.4: a mapped task group's task,
# whose task instances sit in the group's region) with its map indexes.
TASKS = {
    "3.3": {"task": "write", "mapped": "fold", "indexes": [0, 1, 2]},
    "3.4": {"task": "plain", "mapped": "per_table.load", "indexes": [0, 1, 2]},
}
ODD_KEY = "reports/2026: daily total"


# Against Airflow 3.4's api-server as the reference (the client is 3.3.2's; 3.3.2's api-server answers these
# routes as test_api_answers_like_airflow checks), then against ours on both versions' databases.
CASES = [(AIRFLOW_34, "airflow"), (AIRFLOW_33, "ours"), (AIRFLOW_34, "ours")]


@pytest.mark.parametrize(("version", "server"), CASES, ids=[f"{v}-{s}" for v, s in CASES])
def test_airflow_client_calls(request, version, server, servers):
    side, golden = side_of(request, version)
    tasks_of = TASKS[side.series]
    db = side.copy(golden["db"], f"client_{server}")
    if server == "airflow":  # the simple auth manager, all admins: no token
        process, url = side.api_server(db)
        token = None
    else:
        dashboard = Dashboard(side, db)
        token = dashboard.setup()
        process, url = dashboard.server()
    servers.append(process)
    dag_id, run_id, task, mapped = golden["dag_id"], golden["run_id"], tasks_of["task"], tasks_of["mapped"]
    index = "region_index" if side.series == "3.4" else "map_index"
    mapped_rows = f"SELECT {index}, key FROM task_state_store WHERE task_id = %s ORDER BY 1, 2"

    with ac.ApiClient(ac.Configuration(host=url, access_token=token)) as client:
        tasks = ac.TaskStateStoreApi(client)
        before = tasks.list_task_state_store(dag_id, run_id, task, limit=100)
        keys = [e.key for e in before.task_state_store]
        assert before.total_entries == len(keys) > 0
        tasks.set_task_state_store(ODD_KEY, dag_id, run_id, task, TaskStateStoreBody(value={"job": "c-1"}))
        entry = tasks.get_task_state_store(ODD_KEY, dag_id, run_id, task)
        assert entry.value == {"job": "c-1"} and entry.expires_at - datetime.now(UTC) > timedelta(days=29)
        tasks.patch_task_state_store(ODD_KEY, dag_id, run_id, task, TaskStateStorePatchBody(value=[1, "two"]))
        assert tasks.get_task_state_store(ODD_KEY, dag_id, run_id, task).value == [1, "two"]
        assert tasks.list_task_state_store(dag_id, run_id, task, limit=100).total_entries == len(keys) + 1
        tasks.delete_task_state_store(ODD_KEY, dag_id, run_id, task)
        with pytest.raises(NotFoundException):
            tasks.get_task_state_store(ODD_KEY, dag_id, run_id, task)

        expected = query(db, mapped_rows, [mapped])
        for i in tasks_of["indexes"]:
            listed = tasks.list_task_state_store(dag_id, run_id, mapped, map_index=i)
            assert [e.key for e in listed.task_state_store] == [k for n, k in expected if n == i]
        tasks.set_task_state_store("by-client", dag_id, run_id, mapped, TaskStateStoreBody(value=2), map_index=2)
        assert query(db, f"SELECT {index} FROM task_state_store WHERE key = 'by-client'") == [(2,)]
        tasks.clear_task_state_store(dag_id, run_id, mapped, map_index=0)
        assert {n for n, _ in query(db, mapped_rows, [mapped])} == {1, 2}
        tasks.clear_task_state_store(dag_id, run_id, mapped, all_map_indices=True)
        assert query(db, mapped_rows, [mapped]) == []

        assets = ac.AssetStateStoreApi(client)
        asset_id = golden["asset_id"]
        listed = assets.list_asset_state_store(asset_id)
        stored = query(
            db, "SELECT key, last_updated_by_kind FROM asset_state_store WHERE asset_id = %s ORDER BY key", [asset_id]
        )
        assert [
            (e.key, e.last_updated_by.kind if e.last_updated_by else None) for e in listed.asset_state_store
        ] == stored
        assets.set_asset_state_store(ODD_KEY, asset_id, AssetStateStoreBody(value={"offset": 42}))
        entry = assets.get_asset_state_store(ODD_KEY, asset_id)
        assert entry.value == {"offset": 42} and entry.last_updated_by.kind == "api"
        assets.delete_asset_state_store(ODD_KEY, asset_id)
        assets.clear_asset_state_store(asset_id)
        assert query(db, "SELECT 1 FROM asset_state_store WHERE asset_id = %s", [asset_id]) == []
        with pytest.raises(NotFoundException):
            assets.list_asset_state_store(987654)
