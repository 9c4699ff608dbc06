"""Builders for Airflow rows, used through the fixtures in conftest.py."""

import itertools
import json
import struct
import time
import uuid
from datetime import timedelta

from django.utils import timezone

from statestore_admin.airflow.models import Asset, AssetActive, AssetStateStore, DagRun, TaskInstance, TaskStateStore

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


def make_task_instance(dag_run, task_id="task", map_index=-1, state="success"):
    return TaskInstance.objects.create(
        id=uuid.uuid4(),
        dag_id=dag_run.dag_id,
        task_id=task_id,
        run_id=dag_run.run_id,
        map_index=map_index,
        state=state,
        try_number=1,
        pool="default_pool",
        pool_slots=1,
    )


def make_task_key(dag_run, key="key", value="v", task_id="task", map_index=-1, expires_at=None, updated_at=None):
    return TaskStateStore.objects.create(
        dag_run=dag_run,
        dag_id=dag_run.dag_id,
        run_id=dag_run.run_id,
        task_id=task_id,
        map_index=map_index,
        key=key,
        value=json.dumps(value),
        updated_at=updated_at or timezone.now(),
        expires_at=expires_at,
    )


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


# Airflow 3.4's dynamic regions (helper "ui": make_region, make_region_instance, make_region_key,
# make_loop_decision). Rows are shaped as Airflow writes them (airflow/models/dynamic_region.py): a region's
# ``family_root_id`` is its own id, or its fork source's; its ``path`` is its parent's path, the parent's
# family root and the 4-byte big-endian index it sits at; ids are time-ordered like Airflow's uuid7.
LOOP_GATE_OPERATOR = "LoopGateOperator"
LOOP_DECISION_REASON_KEY = "_airflow_loop_decision_reason"


def _ordered_uuid() -> uuid.UUID:
    """A UUID that sorts after every one made before it, as uuid7's do."""
    return uuid.UUID(int=(time.time_ns() // 1_000_000) << 80 | next(_sequence) << 16)


def make_region(dag_run, node_id, parent=None, parent_index=None, forked_from=None, resumes_from_index=0):
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
    from django.db import connections

    connection = connections["airflow"]
    prep = TaskInstance._meta.get_field("id").get_db_prep_value
    value = "CAST(%s AS JSON)" if connection.vendor == "postgresql" else "%s"
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO xcom_v2 (id, task_instance_id, {connection.ops.quote_name('key')}, value, timestamp) "
            f"VALUES (%s, %s, %s, {value}, %s)",
            [
                prep(uuid.uuid4(), connection),
                prep(gate.pk, connection),
                LOOP_DECISION_REASON_KEY,
                json.dumps(reason),
                timezone.now(),
            ],
        )
