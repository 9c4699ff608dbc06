"""Builders for Airflow rows, used through the fixtures in conftest.py."""

import itertools
import json
import uuid
from datetime import timedelta

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
