"""Builders for Airflow rows, used through the fixtures in conftest.py."""

import itertools
import json
import struct
import time
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
        **{"run_after": now, **fields},
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


def make_task_keys(dag_run, count, key="k{i}", value="1", task_id="t", updated_at=None, expires_at=None):
    """``count`` keys of one task instance of ``dag_run`` in one INSERT, for tests at scale. ``key`` is formatted
    with the row's number ``i``; ``value`` is the stored JSON text; ``value`` and ``expires_at`` are fixed or a
    function of ``i``. Every row has the same ``updated_at`` (now unless given)."""
    updated_at = updated_at or timezone.now()
    return TaskStateStore.objects.bulk_create(
        TaskStateStore(
            dag_run=dag_run,
            dag_id=dag_run.dag_id,
            run_id=dag_run.run_id,
            task_id=task_id,
            map_index=-1,
            key=key.format(i=i),
            value=value(i) if callable(value) else value,
            updated_at=updated_at,
            expires_at=expires_at(i) if callable(expires_at) else expires_at,
        )
        for i in range(count)
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


def _insert_filled(table: str, values: dict) -> None:
    """A row of one of Airflow's tables with ``values`` and, in every other column that must have a value and
    has no default, a plain one of its type (the ``dag`` table has about forty columns, which vary by series)."""
    connection = connections["airflow"]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s "
                "AND is_nullable = 'NO' AND column_default IS NULL",
                [table],
            )
            required = cursor.fetchall()
        else:
            cursor.execute(f"PRAGMA table_info({table})")
            required = [
                (name, kind) for _, name, kind, notnull, default, _ in cursor.fetchall() if notnull and default is None
            ]
        row = dict(values)
        for name, kind in required:
            kind = kind.lower()
            if name in row:
                continue
            if "bool" in kind:
                row[name] = False
            elif "int" in kind or "float" in kind or "double" in kind or "numeric" in kind:
                row[name] = 0
            elif "json" in kind:
                row[name] = "{}"
            elif "time" in kind or "date" in kind:
                row[name] = timezone.now()
            else:
                row[name] = "x"
        columns = ", ".join(connection.ops.quote_name(c) for c in row)
        placeholders = ", ".join(["%s"] * len(row))
        cursor.execute(f"INSERT INTO {table} ({columns}) VALUES ({placeholders})", list(row.values()))


def make_dag(dag_id="example_dag", is_paused=False, is_stale=False):
    """A DAG as Airflow's DAG processor records it (``dag``), with its bundle (``dag_bundle``)."""
    with connections["airflow"].cursor() as cursor:
        cursor.execute("SELECT 1 FROM dag_bundle WHERE name = 'tests'")
        if cursor.fetchone() is None:
            _insert_filled("dag_bundle", {"name": "tests"})
    _insert_filled("dag", {"dag_id": dag_id, "is_paused": is_paused, "is_stale": is_stale, "bundle_name": "tests"})


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


def make_deployment(
    task_keys,
    asset_keys=None,
    expires_at=None,
    dag_id="etl_orders",
    run_id="manual__2026-11-29",
    state="success",
    task_id="train",
):
    """The data most page tests start from: a run of ``dag_id`` whose task ``task_id`` holds ``task_keys``
    ({key: value}) expiring at ``expires_at`` (one time for all, or {key: time}, None: never), and the warehouse's
    orders_raw asset holding ``asset_keys`` ({key: (value, writer kind)}); no asset without them.
    Returns {"run", "asset", "keys"}: the task keys' rows by key."""
    run = make_dag_run(dag_id=dag_id, run_id=run_id, state=state)
    make_task_instance(run, task_id=task_id)
    expiry = expires_at if isinstance(expires_at, dict) else dict.fromkeys(task_keys, expires_at)
    rows = {
        key: make_task_key(run, task_id=task_id, key=key, value=value, expires_at=expiry.get(key))
        for key, value in task_keys.items()
    }
    asset = None
    if asset_keys:
        asset = make_asset(name="orders_raw", uri="s3://warehouse/orders")
        for key, (value, kind) in asset_keys.items():
            make_asset_key(asset, key=key, value=value, kind=kind)
    return {"run": run, "asset": asset, "keys": rows}


# Airflow 3.4's dynamic regions (helper "ui": make_region, make_region_instance, make_region_key,
# make_loop_decision). Rows are shaped as Airflow writes them (airflow/models/dynamic_region.py): a region's
# ``family_root_id`` is its own id, or its fork source's; its ``path`` is its parent's path, the parent's
# family root and the 4-byte big-endian index it sits at; ids are time-ordered like Airflow's uuid7.
LOOP_GATE_OPERATOR = "LoopGateOperator"
LOOP_DECISION_REASON_KEY = "_airflow_loop_decision_reason"


def _ordered_uuid() -> uuid.UUID:
    """A UUID that sorts after every one made before it, as uuid7's do."""
    return uuid.UUID(int=(time.time_ns() // 1_000_000) << 80 | next(_sequence) << 16)


def make_region(dag_run, node_id="loop", parent=None, parent_index=None, forked_from=None, resumes_from_index=0):
    from statestore_admin.airflow.models import DynamicRegion

    region_id = _ordered_uuid()
    path = b"" if parent is None else bytes(parent.path) + parent.family_root_id.bytes + struct.pack(">I", parent_index)
    return DynamicRegion.objects.create(
        id=region_id,
        dag_id=dag_run.dag_id,
        run_id=dag_run.run_id,
        node_id=node_id,
        parent_region_id=parent.pk if parent else None,
        parent_region_index=parent_index,
        forked_from_region_id=forked_from.pk if forked_from else None,
        family_root_id=forked_from.family_root_id if forked_from else region_id,
        path=path,
        resumes_from_index=resumes_from_index,
        created_at=timezone.now() + timedelta(microseconds=next(_sequence)),
    )


def make_region_instance(dag_run, task_id, region, index, state="success", working_set=True, operator=None):
    return TaskInstance.objects.create(
        id=_ordered_uuid(),
        dag_id=dag_run.dag_id,
        task_id=task_id,
        run_id=dag_run.run_id,
        map_index=index,
        region_id=region.pk,
        working_set=True if working_set else None,
        state=state,
        try_number=1,
        pool="default_pool",
        pool_slots=1,
        operator=operator,
    )


def make_region_key(dag_run, task_id, region, index, key="key", value="v"):
    return TaskStateStore.objects.create(
        dag_run=dag_run,
        dag_id=dag_run.dag_id,
        run_id=dag_run.run_id,
        task_id=task_id,
        region_id=region.pk,
        map_index=index,
        key=key,
        value=json.dumps(value),
        updated_at=timezone.now(),
    )


def make_loop_decision(gate, reason):
    """The gate task instance's decision reason, as Airflow records it: an XCom (xcom_v2) of the gate."""
    _insert_loop_decisions([(gate, reason)])


def _insert_loop_decisions(decisions) -> None:
    """One xcom_v2 row of the decision reason for each ``(gate, reason)``."""
    from django.db import connections

    connection = connections["airflow"]
    prep = TaskInstance._meta.get_field("id").get_db_prep_value
    value = "CAST(%s AS JSON)" if connection.vendor == "postgresql" else "%s"
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO xcom_v2 (id, task_instance_id, {connection.ops.quote_name('key')}, value, timestamp) "
            f"VALUES (%s, %s, %s, {value}, %s)",
            [
                [
                    prep(uuid.uuid4(), connection),
                    prep(gate.pk, connection),
                    LOOP_DECISION_REASON_KEY,
                    json.dumps(r),
                    now,
                ]
                for gate, r in decisions
            ],
        )


def make_long_loop(dag_run, node_id, iterations, keyed=(), decision=lambda index: f"reason {index}"):
    """A loop ``node_id`` of ``iterations`` iterations in a few INSERTs, for tests at scale: each iteration has its
    gate ``{node_id}.gate`` (recording ``decision(index)``), a task ``{node_id}.step`` directly in the loop, and an
    expansion of the mapped task ``{node_id}.work`` (a region under the iteration) with one task instance; the
    iterations in ``keyed`` hold a key ``offset`` in both tasks. Returns the loop's region."""
    loop = make_region(dag_run, node_id)
    gate, step, work = f"{node_id}.gate", f"{node_id}.step", f"{node_id}.work"
    now = timezone.now()
    regions, instances, keys, gates = [], [], [], []

    def instance(task_id, region_id, index, operator=None):
        return TaskInstance(
            id=_ordered_uuid(),
            dag_id=dag_run.dag_id,
            task_id=task_id,
            run_id=dag_run.run_id,
            map_index=index,
            region_id=region_id,
            working_set=True,
            state="success",
            try_number=1,
            pool="default_pool",
            pool_slots=1,
            operator=operator,
        )

    for index in range(iterations):
        expansion = _ordered_uuid()
        regions.append(
            DynamicRegion(
                id=expansion,
                dag_id=dag_run.dag_id,
                run_id=dag_run.run_id,
                node_id=work,
                parent_region_id=loop.pk,
                parent_region_index=index,
                family_root_id=expansion,
                path=bytes(loop.path) + loop.family_root_id.bytes + struct.pack(">I", index),
                resumes_from_index=0,
                created_at=now + timedelta(microseconds=next(_sequence)),
            )
        )
        gates.append(instance(gate, loop.pk, index, LOOP_GATE_OPERATOR))
        instances += [gates[-1], instance(step, loop.pk, index), instance(work, expansion, 0)]
        if index in keyed:
            keys += [
                TaskStateStore(
                    dag_run=dag_run,
                    dag_id=dag_run.dag_id,
                    run_id=dag_run.run_id,
                    task_id=task_id,
                    region_id=region_id,
                    map_index=at,
                    key="offset",
                    value=json.dumps({"iteration": index}),
                    updated_at=now,
                )
                for task_id, region_id, at in ((step, loop.pk, index), (work, expansion, 0))
            ]
    DynamicRegion.objects.bulk_create(regions)
    TaskInstance.objects.bulk_create(instances)
    TaskStateStore.objects.bulk_create(keys)
    _insert_loop_decisions([(g, decision(g.map_index)) for g in gates])
    return loop
