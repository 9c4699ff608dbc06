"""Run with the Airflow 3.3.2 virtualenv's python: writes and reads state through Airflow's own code.

    python airflow_side.py write-metastore DAG_ID RUN_ID ASSET_ID
    python airflow_side.py get-task DAG_ID RUN_ID TASK_ID MAP_INDEX KEY      -> JSON {"value": <text or null>}
    python airflow_side.py get-asset ASSET_ID KEY                            -> JSON {"value": <text or null>}

The database comes from Airflow's own configuration (AIRFLOW_HOME / AIRFLOW__DATABASE__SQL_ALCHEMY_CONN).
"""

import json
import sys
from datetime import UTC, datetime, timedelta

from airflow._shared.state import AssetScope, AssetStateStoreWriterKind, TaskScope
from airflow.state.metastore import MetastoreBackend


def write_metastore(dag_id: str, run_id: str, asset_id: str) -> None:
    backend = MetastoreBackend()
    now = datetime.now(UTC)
    scope = TaskScope(dag_id=dag_id, run_id=run_id, task_id="write")
    backend.set(scope, "metastore/never", json.dumps({"written": "by MetastoreBackend"}), expires_at=None)
    backend.set(scope, "metastore expired", json.dumps([1, 2, 3]), expires_at=now - timedelta(hours=2))
    backend.set(scope, "metastore:soon", json.dumps("soon"), expires_at=now + timedelta(minutes=30))
    backend.set(
        TaskScope(dag_id=dag_id, run_id=run_id, task_id="fold", map_index=1),
        "metastore/mapped",
        json.dumps({"deep": {"er": [True, None, 1.5]}}),
        expires_at=now - timedelta(seconds=5),
    )
    asset = AssetScope(asset_id=int(asset_id))
    backend.set_asset_state_store(
        asset,
        "by task",
        json.dumps({"cursor": 17}),
        kind=AssetStateStoreWriterKind.TASK,
        dag_id=dag_id,
        run_id=run_id,
        task_id="write",
        map_index=-1,
    )
    backend.set_asset_state_store(asset, "by/watcher", json.dumps("w"), kind=AssetStateStoreWriterKind.WATCHER)
    backend.set_asset_state_store(asset, "by: api", json.dumps(3), kind=AssetStateStoreWriterKind.API)
    backend.set(asset, "no writer", json.dumps({"legacy": True}))


def main() -> None:
    command, *args = sys.argv[1:]
    if command == "write-metastore":
        write_metastore(*args)
        return
    backend = MetastoreBackend()
    if command == "get-task":
        dag_id, run_id, task_id, map_index, key = args
        value = backend.get(TaskScope(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=int(map_index)), key)
    elif command == "get-asset":
        asset_id, key = args
        value = backend.get(AssetScope(asset_id=int(asset_id)), key)
    else:
        raise SystemExit(f"unknown command {command!r}")
    print(json.dumps({"value": value}))


if __name__ == "__main__":
    main()
