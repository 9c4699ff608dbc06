"""Builders for Airflow rows, used through the fixtures in conftest.py."""

import itertools
import json
import uuid
import zlib
from datetime import timedelta

from django.db import connections, models
from django.utils import timezone

from statestore_admin.airflow.models import (
    Asset,
    AssetActive,
    AssetStateStore,
    DagRun,
    DynamicRegion,
    TaskInstance,
    TaskStateStore,
)
from statestore_admin.airflow.versions import SENTINEL_REGION_ID

_sequence = itertools.count(1)


def make_dag_run(dag_id="example_dag", run_id=None, state="success", **fields):
    now = timezone.now()
    number = next(_sequence)
    return DagRun.objects.create(
        dag_id=dag_id,
        run_id=run_id or f"manual__test-{number}",
        state=state,
        run_type="manual",
        logical_date=now - timedelta(minutes=number),
        run_after=now,
        **fields,
    )


def make_task_instance(dag_run, task_id="task", map_index=-1, state="success", region_id=SENTINEL_REGION_ID):
    return TaskInstance.objects.create(
        id=uuid.uuid4(),
        dag_id=dag_run.dag_id,
        task_id=task_id,
        run_id=dag_run.run_id,
        map_index=map_index,
        region_id=region_id,
        state=state,
        try_number=1,
        pool="default_pool",
        pool_slots=1,
    )


def make_task_key(
    dag_run,
    key="key",
    value="v",
    task_id="task",
    map_index=-1,
    expires_at=None,
    updated_at=None,
    region_id=SENTINEL_REGION_ID,
):
    return TaskStateStore.objects.create(
        dag_run=dag_run,
        dag_id=dag_run.dag_id,
        run_id=dag_run.run_id,
        task_id=task_id,
        map_index=map_index,
        region_id=region_id,
        key=key,
        value=json.dumps(value),
        updated_at=updated_at or timezone.now(),
        expires_at=expires_at,
    )


def make_fork(region, resumes_from_index=0):
    """The execution that a clear put in place of ``region`` (Airflow 3.4: same slot, ``forked_from_region_id``)."""
    fork_id = uuid.uuid4()
    return DynamicRegion.objects.create(
        id=fork_id,
        dag_id=region.dag_id,
        run_id=region.run_id,
        node_id=region.node_id,
        parent_region_id=region.parent_region_id,
        parent_region_index=region.parent_region_index,
        forked_from_region_id=region.pk,
        family_root_id=region.family_root_id,
        path=region.path,
        resumes_from_index=resumes_from_index,
        created_at=timezone.now(),
    )


def archive(task_instance, reason="cleared"):
    """Take a task instance out of the working set, as Airflow 3.4 keeps an execution a clear replaced."""
    _airflow_sql(
        "UPDATE task_instance SET working_set = NULL, archived_reason = %s WHERE id = %s", [reason], task_instance.pk
    )


def serialized_task_group(group_id, children, loop=False, mapped=False):
    """A task group as Airflow 3.4's DagSerialization writes it: ``children`` maps task ids to
    "plain"/"mapped" and group ids to other groups; a loop group has ``loop``, a mapped one ``is_mapped``."""
    return {"group_id": group_id, "children": children, "loop": loop, "mapped": mapped}


def make_dag_version(dag_id, children, compressed=False):
    """A DAG version of ``dag_id`` with its serialized DAG (``dag_bundle``, ``dag``, ``dag_version``,
    ``serialized_dag`` rows, as `airflow dags reserialize` leaves them): ``children`` as in
    ``serialized_task_group``. Returns the version's id; ``pin`` ties runs and task instances to it."""
    now = timezone.now()
    tasks = []

    def encode(group_id, members, loop, mapped, expanding):
        encoded = {"_group_id": group_id, "prefix_group_id": True, "tooltip": "", "children": {}}
        for name, member in members.items():
            if isinstance(member, dict):
                inner = encode(
                    member["group_id"],
                    member["children"],
                    member["loop"],
                    member["mapped"],
                    expanding or member["mapped"],
                )
                encoded["children"][name] = ["taskgroup", inner]
                continue
            var = {"task_id": name, "task_type": "_PythonDecoratedOperator"}
            if member == "mapped":
                var["_is_mapped"] = True
            else:
                var["_needs_expansion"] = expanding
            tasks.append({"__type": "operator", "__var": var})
            encoded["children"][name] = ["operator", name]
        if loop:
            encoded["loop"] = {"max_iterations": 3, "has_until": False, "terminal_task_id": None, "gate_task_id": None}
        if mapped:
            encoded["is_mapped"] = True
            encoded["expand_input"] = {"type": "dict-of-lists", "value": {}}
        return encoded

    task_group = encode(None, children, False, False, False)
    document = {"__version": 3, "dag": {"dag_id": dag_id, "tasks": tasks, "task_group": task_group}}
    text = json.dumps(document)
    version = uuid.uuid4()
    with connections["airflow"].cursor() as cursor:
        cursor.execute("SELECT 1 FROM dag WHERE dag_id = %s", [dag_id])
        if cursor.fetchone() is None:
            cursor.execute(
                "INSERT INTO dag_bundle (name) SELECT %s WHERE NOT EXISTS (SELECT 1 FROM dag_bundle WHERE name = %s)",
                ["tests", "tests"],
            )
            cursor.execute(
                "INSERT INTO dag (dag_id, is_paused, is_stale, bundle_name, timetable_type, partition_mapper_info, "
                "max_active_tasks, max_consecutive_failed_dag_runs, has_task_concurrency_limits) "
                "VALUES (%s, %s, %s, %s, %s, %s, 16, 0, %s)",
                [dag_id, False, False, "tests", "", "{}", False],
            )
        cursor.execute("SELECT COUNT(*) FROM dag_version WHERE dag_id = %s", [dag_id])
        number = cursor.fetchone()[0] + 1
        cursor.execute(
            "INSERT INTO dag_version (id, version_number, dag_id, created_at, last_updated) "
            "VALUES (%s, %s, %s, %s, %s)",
            [_uuid_param(version), number, dag_id, now, now],
        )
        cursor.execute(
            "INSERT INTO serialized_dag (id, dag_id, data, data_compressed, created_at, last_updated, dag_hash, "
            "dag_version_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            [
                _uuid_param(uuid.uuid4()),
                dag_id,
                None if compressed else text,
                zlib.compress(text.encode()) if compressed else None,
                now,
                now,
                "0" * 32,
                _uuid_param(version),
            ],
        )
    return version


def pin(version, dag_run=None, task_instances=()):
    """Record ``version`` as what ``dag_run`` was created with and what ``task_instances`` ran."""
    if dag_run is not None:
        _airflow_sql("UPDATE dag_run SET created_dag_version_id = %s WHERE id = %s", [_uuid_param(version)], dag_run.pk)
    for ti in task_instances:
        _airflow_sql("UPDATE task_instance SET dag_version_id = %s WHERE id = %s", [_uuid_param(version)], ti.pk)


def _uuid_param(value):
    return models.UUIDField().get_db_prep_value(value, connections["airflow"])


def _airflow_sql(sql, params, pk):
    if isinstance(pk, uuid.UUID):
        pk = _uuid_param(pk)
    with connections["airflow"].cursor() as cursor:
        cursor.execute(sql, [*params, pk])


def make_asset(name=None, uri=None, active=True, group="asset"):
    number = next(_sequence)
    name = name or f"asset_{number}"
    uri = uri or f"s3://bucket/{name}"
    now = timezone.now()
    asset = Asset.objects.create(name=name, uri=uri, group=group, extra={}, created_at=now, updated_at=now)
    if active:
        AssetActive.objects.create(name=name, uri=uri)
    return asset


def make_asset_key(asset, key="key", value="v", kind="api", **writer):
    return AssetStateStore.objects.create(
        asset=asset,
        key=key,
        value=json.dumps(value),
        updated_at=timezone.now(),
        last_updated_by_kind=kind,
        **{f"last_updated_by_{k}": v for k, v in writer.items()},
    )


def make_region(dag_run, node_id="loop", parent=None, parent_index=None):
    """One execution of a loop or expansion (Airflow 3.4's ``dynamic_region``; only on the 3.4 schema)."""
    region_id = uuid.uuid4()
    return DynamicRegion.objects.create(
        id=region_id,
        dag_id=dag_run.dag_id,
        run_id=dag_run.run_id,
        node_id=node_id,
        parent_region_id=parent.pk if parent is not None else None,
        parent_region_index=parent_index,
        family_root_id=parent.family_root_id if parent is not None else region_id,
        path=region_id.bytes,
        created_at=timezone.now(),
    )
