"""The demo's Airflow 3.4 dynamic regions: the DAG ``batch_refinement`` (a loop around a mapped task, one of
its expansions forked, and a mapped task group), nothing on Airflow 3.3."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta

from django.db import connections

from statestore_admin.airflow.config import airflow_config
from statestore_admin.airflow.models import (
    Asset,
    AssetActive,
    AssetStateStore,
    DagRun,
    DynamicRegion,
    TaskInstance,
    TaskStateStore,
)
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.versions import schema_of
from statestore_admin.core.values import DEFAULT, NEVER
from statestore_admin.demo.runs import day, demo_expiry, demo_run_id, run_dates

# Airflow 3.4 only: a DAG with dynamic regions, shaped as Airflow writes them (airflow/models/dynamic_region.py):
# the loop ``process_batch`` ran three iterations (0, 1, 2: Airflow numbers them from 0) around the mapped
# task ``process_batch.process`` (two map positions an iteration, each expansion a region under its
# iteration), with the gate ``process_batch.batch_ready`` (a LoopGateOperator) recording its decision reason
# as the ``_airflow_loop_decision_reason`` XCom; iteration 1's expansion was cleared and re-created (a fork:
# ``forked_from_region_id``, the replaced task instances out of the working set, their keys kept); and the
# mapped task group ``score`` expanded twice. Ids are derived from the coordinates, so a second load finds
# the same rows. The run is yesterday's (over before now, whatever the hour): each key is written a minute
# after its task instance started, all within the run (its fork included), expiring as Airflow's writer computes.
REGION_DAG = "batch_refinement"
LOOP_NODE, GATE_TASK, CHOOSE_TASK, MAPPED_TASK = (
    "process_batch",
    "process_batch.batch_ready",
    "process_batch.choose_items",
    "process_batch.process",
)
GROUP_NODE, GROUP_TASK = "score", "score.fit"
# The loop's last iteration publishes how far it got to an asset, as a task in a loop writes asset state on 3.4: the
# asset key's writer names the iteration (last_updated_by_region_id and _region_index), which the pages show.
REFINED_ASSET = ("refined_batches", "s3://warehouse/refined/batches")
LOOP_ITERATIONS, MAP_POSITIONS, GROUP_EXPANSIONS = 3, 2, 2
FORKED_ITERATION = 1
DECISIONS = ["min batch 1 < 2: another pass", "min batch 2 < 2: another pass", "every batch ≥ 2: stop"]
_LOOP_DECISION_REASON_KEY = "_airflow_loop_decision_reason"
_LOOP_GATE_OPERATOR = "LoopGateOperator"


def _demo_uuid(*parts) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, "statestore-admin-demo/" + "/".join(map(str, parts)))


def _region(run: DagRun, node_id: str, created, parent=None, parent_index=None, forked_from=None, resumes=0):
    """A ``dynamic_region`` row with the ``family_root_id`` and ``path`` Airflow's insert hook computes."""
    region_id = _demo_uuid(run.run_id, node_id, parent and parent.pk, parent_index, forked_from and forked_from.pk)
    path = b"" if parent is None else bytes(parent.path) + parent.family_root_id.bytes + parent_index.to_bytes(4, "big")
    region, _ = DynamicRegion.objects.get_or_create(
        id=region_id,
        defaults={
            "dag_id": run.dag_id,
            "run_id": run.run_id,
            "node_id": node_id,
            "parent_region_id": parent and parent.pk,
            "parent_region_index": parent_index,
            "forked_from_region_id": forked_from and forked_from.pk,
            "family_root_id": forked_from.family_root_id if forked_from else region_id,
            "path": path,
            "resumes_from_index": resumes,
            "created_at": created,
        },
    )
    return region


def _region_ti(run: DagRun, task_id: str, region, index: int, start, working_set=True, operator="PythonOperator"):
    ti, _ = TaskInstance.objects.get_or_create(
        id=_demo_uuid(run.run_id, task_id, region.pk, index, working_set),
        defaults={
            "dag_id": run.dag_id,
            "task_id": task_id,
            "run_id": run.run_id,
            "map_index": index,
            "region_id": region.pk,
            "working_set": True if working_set else None,
            "state": "success",
            "try_number": 1,
            "pool": "default_pool",
            "pool_slots": 1,
            "start_date": start,
            "operator": operator,
        },
    )
    return ti


def _region_key(run: DagRun, task_id: str, region, index: int, key: str, value, expiry: str, started) -> None:
    """A key the task instance at ``(region, index)``, started at ``started``, wrote a minute later, expiring as
    Airflow's writer computes it from that write."""
    written = started + timedelta(minutes=1)
    TaskStateStore.objects.update_or_create(
        dag_run=run,
        task_id=task_id,
        region_id=region.pk,
        map_index=index,
        key=key,
        defaults={
            "dag_id": run.dag_id,
            "run_id": run.run_id,
            "value": json.dumps(value),
            "updated_at": written,
            "expires_at": demo_expiry(expiry, written).resolve(written, airflow_config()),
        },
    )


def _published(run: DagRun, expansion, iteration: int, written) -> None:
    """The asset key ``refined_through`` that map position 0 of the loop's last iteration wrote at ``written``."""
    name, uri = REFINED_ASSET
    asset, _ = Asset.objects.get_or_create(
        name=name, uri=uri, defaults={"group": "asset", "extra": {}, "created_at": day(-7), "updated_at": day(-7)}
    )
    AssetActive.objects.get_or_create(name=name, uri=uri)
    AssetStateStore.objects.update_or_create(
        asset=asset,
        key="refined_through",
        defaults={
            "value": json.dumps({"iteration": iteration, "batches": MAP_POSITIONS + iteration}),
            "updated_at": written,
            "last_updated_by_kind": "task",
            "last_updated_by_dag_id": run.dag_id,
            "last_updated_by_run_id": run.run_id,
            "last_updated_by_task_id": MAPPED_TASK,
            "last_updated_by_map_index": 0,
            "last_updated_by_region_id": expansion.pk,
            "last_updated_by_region_index": 0,
        },
    )


def _decision(gate: TaskInstance, reason: str, at) -> None:
    """The gate's decision reason as Airflow records it: an XCom of the gate task instance (no XCom model
    here: the dashboard never reads XComs but this one, in the domain)."""
    connection = connections[airflow_alias()]
    prep = TaskInstance._meta.get_field("id").get_db_prep_value
    key = connection.ops.quote_name("key")
    as_json = "CAST(%s AS JSON)" if connection.vendor == "postgresql" else "%s"  # SQLite keeps the text
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM xcom_v2 WHERE task_instance_id = %s AND {key} = %s",
            [prep(gate.pk, connection), _LOOP_DECISION_REASON_KEY],
        )
        cursor.execute(
            f"INSERT INTO xcom_v2 (id, task_instance_id, {key}, value, timestamp) VALUES (%s, %s, %s, {as_json}, %s)",
            [
                prep(_demo_uuid(gate.pk, "decision"), connection),
                prep(gate.pk, connection),
                _LOOP_DECISION_REASON_KEY,
                json.dumps(reason),
                at,
            ],
        )


def load_region_data(now: datetime) -> dict[str, int]:
    """The 3.4 DAG ``batch_refinement`` (nothing on 3.3, whose schema has no regions)."""
    counts = {"dag_runs": 0, "regions": 0, "task_instances": 0, "task_keys": 0, "assets": 0, "asset_keys": 0}
    if not schema_of(connections[airflow_alias()]).regions:
        return counts
    logical_date = day(-1)
    start, end = run_dates(logical_date, now, timedelta(hours=2), timedelta(minutes=45))
    run, _ = DagRun.objects.get_or_create(
        dag_id=REGION_DAG,
        run_id=demo_run_id("manual", logical_date),
        defaults={
            "state": "success",
            "run_type": "manual",
            "logical_date": logical_date,
            "run_after": logical_date,
            "queued_at": start,
            "start_date": start,
            "end_date": end,
            "created_at": start,
            "updated_at": start,
        },
    )
    counts["dag_runs"] += 1
    loop = _region(run, LOOP_NODE, start)
    counts["regions"] += 1
    for iteration in range(LOOP_ITERATIONS):
        at = start + timedelta(minutes=5 * iteration)
        chooser = _region_ti(run, CHOOSE_TASK, loop, iteration, at)
        _region_key(run, chooser.task_id, loop, iteration, "batch_size", MAP_POSITIONS + iteration, DEFAULT, at)
        gate = _region_ti(run, GATE_TASK, loop, iteration, at, operator=_LOOP_GATE_OPERATOR)
        _decision(gate, DECISIONS[iteration], at + timedelta(minutes=2))
        expansion = _region(run, MAPPED_TASK, at, loop, iteration)
        counts["regions"] += 1
        current = expansion
        if iteration == FORKED_ITERATION:  # cleared and re-created: the first expansion is replaced
            current = _region(run, MAPPED_TASK, at + timedelta(minutes=30), loop, iteration, forked_from=expansion)
            counts["regions"] += 1
        for position in range(MAP_POSITIONS):
            if current is not expansion:
                _region_ti(run, MAPPED_TASK, expansion, position, at, working_set=False)
                _region_key(run, MAPPED_TASK, expansion, position, "offset", {"done": position * 10}, DEFAULT, at)
                counts["task_instances"] += 1
                counts["task_keys"] += 1
            _region_ti(run, MAPPED_TASK, current, position, current.created_at)
            value = {"iteration": iteration, "position": position, "done": 100 + 10 * iteration + position}
            _region_key(run, MAPPED_TASK, current, position, "offset", value, DEFAULT, current.created_at)
            counts["task_instances"] += 1
            counts["task_keys"] += 1
        counts["task_instances"] += 2
        counts["task_keys"] += 1
    _published(run, current, LOOP_ITERATIONS - 1, current.created_at + timedelta(minutes=1))
    counts["assets"] += 1
    counts["asset_keys"] += 1
    group = _region(run, GROUP_NODE, start + timedelta(minutes=16))
    counts["regions"] += 1
    for expansion_index in range(GROUP_EXPANSIONS):
        _region_ti(run, GROUP_TASK, group, expansion_index, start + timedelta(minutes=16))
        value = {"model": f"candidate-{expansion_index}", "auc": 0.9 + expansion_index / 50}
        _region_key(run, GROUP_TASK, group, expansion_index, "best_model", value, NEVER, group.created_at)
        counts["task_instances"] += 1
        counts["task_keys"] += 1
    return counts
