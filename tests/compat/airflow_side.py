"""Run with an Airflow virtualenv's python (3.3.2 or 3.4.0b2): writes and reads state through Airflow's own code.

    python airflow_side.py write-metastore DAG_ID RUN_ID ASSET_ID
    python airflow_side.py get-task DAG_ID RUN_ID TASK_ID MAP_INDEX KEY [REGION_ID]
                                                                             -> JSON {"value": <text or null>}
    python airflow_side.py sdk-get-ti JSON     JSON: [[task_instance_id, key], …] -> JSON {"values": [...]}
    python airflow_side.py get-asset ASSET_ID KEY                            -> JSON {"value": <text or null>}
    python airflow_side.py sdk-set-task JSON   JSON: [[dag_id, run_id, task_id, map_index, key, value], …]
    python airflow_side.py sdk-read JSON       JSON: [["task", dag_id, run_id, task_id, map_index, key] or
                                                      ["asset", asset_id, key], …] -> JSON {"values": [...]}

``sdk-set-task`` and ``sdk-read`` do what a task does through ``context["task_state_store"]`` /
``context["asset_state_store"]`` with ``[workers] state_store_backend`` configured: the SDK's own backend
loader, ``serialize_task_state_store_to_ref`` and the ``{"__airflow_state_ref__": ref}`` marker, stored by
the configured state backend as the execution API stores it (``json.dumps`` of the body's value); reading
unwraps the marker and calls ``deserialize_*_from_ref`` (a value without the marker is returned as is).

``get-task`` with REGION_ID (3.4) addresses the key by region_id and region_index (MAP_INDEX), as
``MetastoreBackend`` stores it. ``sdk-get-ti`` (3.4) reads as a running task does: the task SDK's client
(``TaskStateStoreOperations.get``) against the execution API served in process, as `airflow dags test` runs
it; the API finds the task instance's region_id and region_index itself. A missing key reads as null.

The database comes from Airflow's own configuration (AIRFLOW_HOME / AIRFLOW__DATABASE__SQL_ALCHEMY_CONN).
"""

import json
import sys
from datetime import UTC, datetime, timedelta
from uuid import UUID

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


def sdk_set_task(rows: list) -> None:
    """As ``TaskStateStoreAccessor.set`` with the default retention, then the execution API's PUT."""
    from airflow.configuration import conf
    from airflow.sdk.execution_time.context import _get_worker_state_store_backend, _wrap_external_ref
    from airflow.state import get_state_backend

    worker = _get_worker_state_store_backend()
    days = conf.getint("state_store", "default_retention_days")
    for dag_id, run_id, task_id, map_index, key, value in rows:
        scope = TaskScope(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=int(map_index))
        stored = value
        if worker is not None:
            stored = _wrap_external_ref(worker.serialize_task_state_store_to_ref(value=value, key=key, scope=scope))
        expires_at = None if days == 0 else datetime.now(UTC) + timedelta(days=days)
        get_state_backend().set(scope, key, json.dumps(stored), expires_at=expires_at)


def sdk_read(entries: list) -> list:
    """As the accessors' ``get``: the execution API's ``json.loads`` of the row, the marker unwrapped and
    resolved by the worker backend."""
    from airflow.sdk.execution_time.context import _get_worker_state_store_backend, _unwrap_external_ref
    from airflow.state import get_state_backend

    worker = _get_worker_state_store_backend()
    values = []
    for kind, *where in entries:
        if kind == "task":
            dag_id, run_id, task_id, map_index, key = where
            scope = TaskScope(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=int(map_index))
            deserialize = worker and worker.deserialize_task_state_store_from_ref
        else:
            asset_id, key = where
            scope = AssetScope(asset_id=int(asset_id))
            deserialize = worker and worker.deserialize_asset_state_store_from_ref
        text = get_state_backend().get(scope, key)
        stored = None if text is None else json.loads(text)
        if worker is not None and isinstance(stored, dict) and (ref := _unwrap_external_ref(stored)):
            stored = deserialize(ref)
        values.append(stored)
    return values


def sdk_get_ti(entries: list) -> list:
    from airflow.sdk.execution_time.comms import ErrorResponse
    from airflow.sdk.execution_time.supervisor import InProcessTestSupervisor

    client = InProcessTestSupervisor._api_client()
    values = []
    for ti_id, key in entries:
        answer = client.task_state_store.get(UUID(ti_id), key)
        values.append(None if isinstance(answer, ErrorResponse) else answer.value)
    return values


def main() -> None:
    command, *args = sys.argv[1:]
    if command == "write-metastore":
        write_metastore(*args)
        return
    if command == "sdk-set-task":
        sdk_set_task(json.loads(args[0]))
        print(json.dumps({"written": True}))
        return
    if command == "sdk-read":
        print(json.dumps({"values": sdk_read(json.loads(args[0]))}))
        return
    if command == "sdk-get-ti":
        print(json.dumps({"values": sdk_get_ti(json.loads(args[0]))}))
        return
    backend = MetastoreBackend()
    if command == "get-task":
        dag_id, run_id, task_id, map_index, key, *region = args
        where = {"region_id": UUID(region[0])} if region else {}
        scope = TaskScope(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=int(map_index), **where)
        value = backend.get(scope, key)
    elif command == "get-asset":
        asset_id, key = args
        value = backend.get(AssetScope(asset_id=int(asset_id)), key)
    else:
        raise SystemExit(f"unknown command {command!r}")
    print(json.dumps({"value": value}))


if __name__ == "__main__":
    main()
