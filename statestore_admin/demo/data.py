"""A believable Airflow deployment's state, for the embedded demo, tests and benchmarks.

Idempotent: everything is keyed on its natural key (DAG run ``(dag_id, run_id)``, task instance
``(dag_id, task_id, run_id, map_index)``, asset ``(name, uri)``, state key), so a second run on the
same day updates the same rows instead of adding new ones. Run dates are anchored on today (UTC), so
a run on a later day adds that day's runs, as a scheduler would. Expiries are relative to now, so
every status (expired, expiring within the hour, default retention, never) is always present.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connections, transaction
from django.utils import timezone

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
from statestore_admin.core.values import AT, DEFAULT, NEVER, Expiry
from statestore_admin.objects import store as objects

LONG_KEY = ("reports/2026/11/very-long-key-" * 20)[:512]  # the longest key the column takes


@dataclass(frozen=True)
class DemoKey:
    task_id: str
    key: str
    value: object
    expiry: str | timedelta  # NEVER, DEFAULT, or an offset from now (negative = expired)
    map_index: int = -1


def _ref(uri: str) -> dict:
    return {TaskStateStore.REF_KEY: uri}


@dataclass(frozen=True)
class Offloaded:
    """A value a worker-side backend keeps as an object: with the demo's object storage (``make run`` puts it
    in var/demo/state/), written there the way common.io's backend writes it, the row holding its reference."""

    value: object


def _stored(value, store, dag_id: str, run_id: str, task_id: str, map_index: int, key: str):
    if not isinstance(value, Offloaded):
        return value
    if store is None:  # no storage configured: a reference to an object the dashboard cannot reach
        return _ref(f"s3://airflow-state/{dag_id}/{task_id}/{key}")
    ref = store.task_ref(dag_id, run_id, task_id, map_index, key)
    fs, path = store.filesystem(), store.path(ref)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(path, "wb", compression=store.compression or None) as f:
        f.write(json.dumps(value.value).encode())
    return _ref(ref)


def _manifest(files: int) -> list[dict]:
    return [
        {"path": f"s3://landing/events/2026/11/part-{i:05d}.parquet", "bytes": 1_048_576 + i * 37, "rows": 10_000 + i}
        for i in range(files)
    ]


# The run of the README's curl example (README, The REST API): a manual run whose id does not change with the day,
# as a run triggered with a chosen id ("Trigger DAG" with a run id, or the API's dag_run_id) keeps its id.
README_RUN_ID = "manual__demo"

# (dag_id, [(day offset, run_type, state[, a fixed run id])], keys for every run, keys for the latest run only)
DAGS = {
    "etl_orders": {
        "runs": [(-2, "scheduled", "success"), (-1, "scheduled", "failed"), (0, "manual", "running", README_RUN_ID)],
        "tasks": ["extract", "transform", "load", "submit_spark_job"],
        "keys": [
            DemoKey("extract", "watermark", "2026-11-29T00:00:00+00:00", DEFAULT),
            DemoKey("load", "rows_loaded", 128_734, DEFAULT),
            DemoKey("submit_spark_job", "job_id", {"job": "spark-app-20261130-0007", "cluster": "emr-prod"}, NEVER),
            DemoKey("submit_spark_job", "attempt", 2, timedelta(minutes=25)),
            DemoKey(
                "transform", "tmp/partition_cursor", {"partition": "2026-11-29", "offset": 5120}, timedelta(hours=-3)
            ),
        ],
    },
    "ml_training": {
        "runs": [(-1, "scheduled", "success"), (0, "scheduled", "running")],
        "tasks": ["prepare", "train_fold", "evaluate"],
        "mapped": {"train_fold": 5},
        "keys": [
            DemoKey("prepare", "dataset_version", "v2026.11.3", NEVER),
            *[
                DemoKey("train_fold", "checkpoint", {"epoch": 12 + i, "loss": round(0.4 / (i + 1), 4)}, DEFAULT, i)
                for i in range(5)
            ],
            *[
                DemoKey("train_fold", f"metrics/fold-{i}", {"auc": 0.9 + i / 100, "f1": 0.8}, timedelta(days=-1), i)
                for i in range(0, 5, 2)
            ],
            DemoKey("evaluate", "best_fold", 3, timedelta(minutes=50)),
        ],
    },
    "s3_ingest": {
        "runs": [(-1, "scheduled", "success"), (0, "scheduled", "running")],
        "tasks": ["list_files", "download", "validate"],
        "keys": [
            DemoKey("list_files", "manifest_cache", _manifest(250), DEFAULT),
            DemoKey("download", "manifest", Offloaded(_manifest(400)), DEFAULT),
            DemoKey("download", "checkpoint", _ref("s3://airflow-state/task/s3_ingest/download/checkpoint"), NEVER),
            DemoKey("validate", "errors", [], timedelta(seconds=-60)),
        ],
    },
    "long_running_jobs": {
        "runs": [(0, "manual", "running")],
        "tasks": ["submit", "poll"],
        "keys": [
            DemoKey("submit", "emr:cluster/j-2AXXXXXXGAPLF", {"state": "RUNNING", "steps": 4}, NEVER),
            DemoKey("submit", "batch job: eu-west-1", "submitted", timedelta(minutes=10)),
            DemoKey("submit", "état/résumé 🚀", {"message": "Grüße, 世界"}, DEFAULT),
            DemoKey("poll", LONG_KEY, True, DEFAULT),
            DemoKey("poll", "last_poll", 3.5, timedelta(hours=-30)),
            DemoKey("poll", "<script>alert(1)</script>", "<b>not bold</b>", DEFAULT),
        ],
    },
}

ASSETS = [
    # name, uri, group, active, [(key, value, writer kind, writer (dag, run offset, task, map_index) or None)]
    (
        "orders_raw",
        "s3://warehouse/raw/orders",
        "asset",
        True,
        [
            ("watermark", "2026-11-30T00:00:00+00:00", "task", ("etl_orders", 0, "extract", -1)),
            ("last_partition", {"date": "2026-11-29", "files": 42}, "watcher", None),
        ],
    ),
    (
        "customers",
        "postgres://warehouse:5432/public/customers",
        "asset",
        True,
        [
            ("cursor", {"updated_at": "2026-11-30T04:00:00Z", "id": 991_245}, "api", None),
            ("schema_version", 7, None, None),
        ],
    ),
    (
        "events_stream",
        "kafka://broker:9092/events",
        "streams",
        True,
        [
            ("offsets", {f"partition-{p}": 1_000_000 + p * 17 for p in range(12)}, "watcher", None),
            ("features/fold-0", {"rows": 10}, "task", ("ml_training", 0, "train_fold", 0)),
        ],
    ),
    (
        "legacy_export",
        "file:///exports/legacy/customers.csv",
        "asset",
        False,
        [
            ("last_export", "2026-10-01", "task", ("etl_orders", -2, "load", -1)),
        ],
    ),
    ("ml_features", "s3://warehouse/features/v3", "ml", True, []),
]


def _day(offset: int) -> datetime:
    today = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    return today + timedelta(days=offset)


def _run_id(run_type: str, logical_date: datetime) -> str:
    return f"{run_type}__{logical_date.isoformat()}"


def _expiry(expiry: str | timedelta, now: datetime) -> Expiry:
    """A demo key's expiry as the domain's (NEVER, DEFAULT, or the instant ``now + offset``)."""
    return Expiry(AT, now + expiry) if isinstance(expiry, timedelta) else Expiry(expiry)


@transaction.atomic(using=airflow_alias())
def load_demo_data() -> dict[str, int]:
    """Create or refresh the demo deployment. Returns what it wrote, by kind."""
    now = timezone.now()
    config = airflow_config()
    store = objects.storage()
    counts = {"dag_runs": 0, "task_instances": 0, "task_keys": 0, "assets": 0, "asset_keys": 0}
    runs_by_offset: dict[tuple[str, int], DagRun] = {}
    for dag_id, spec in DAGS.items():
        for offset, run_type, state, *fixed_run_id in spec["runs"]:
            logical_date = _day(offset)
            start = logical_date + timedelta(hours=1)
            run, _ = DagRun.objects.get_or_create(
                dag_id=dag_id,
                run_id=fixed_run_id[0] if fixed_run_id else _run_id(run_type, logical_date),
                defaults={
                    "state": state,
                    "run_type": run_type,
                    "logical_date": logical_date,
                    "run_after": logical_date,
                    "queued_at": start,
                    "start_date": start,
                    "end_date": None if state == "running" else start + timedelta(minutes=42),
                    "created_at": start,
                    "updated_at": start,
                },
            )
            runs_by_offset[(dag_id, offset)] = run
            counts["dag_runs"] += 1
            for task_id in spec["tasks"]:
                for map_index in range(spec.get("mapped", {}).get(task_id, 0)) or [-1]:
                    TaskInstance.objects.get_or_create(
                        dag_id=dag_id,
                        task_id=task_id,
                        run_id=run.run_id,
                        map_index=map_index,
                        defaults={
                            "id": uuid.uuid4(),
                            "state": state,
                            "try_number": 1,
                            "pool": "default_pool",
                            "pool_slots": 1,
                            "start_date": start,
                            "operator": "PythonOperator",
                            "rendered_map_index": None if map_index < 0 else f"fold {map_index}",
                        },
                    )
                    counts["task_instances"] += 1
            for key in spec["keys"]:
                TaskStateStore.objects.update_or_create(
                    dag_run=run,
                    task_id=key.task_id,
                    map_index=key.map_index,
                    key=key.key,
                    defaults={
                        "dag_id": dag_id,
                        "run_id": run.run_id,
                        "value": json.dumps(
                            _stored(key.value, store, dag_id, run.run_id, key.task_id, key.map_index, key.key)
                        ),
                        "updated_at": now,
                        "expires_at": _expiry(key.expiry, now).resolve(now, config),
                    },
                )
                counts["task_keys"] += 1

    for name, uri, group, active, keys in ASSETS:
        asset, _ = Asset.objects.get_or_create(
            name=name, uri=uri, defaults={"group": group, "extra": {}, "created_at": now, "updated_at": now}
        )
        counts["assets"] += 1
        if active:
            AssetActive.objects.get_or_create(name=name, uri=uri)
        for key, value, kind, writer in keys:
            provenance = {
                "last_updated_by_kind": kind,
                "last_updated_by_dag_id": None,
                "last_updated_by_run_id": None,
                "last_updated_by_task_id": None,
                "last_updated_by_map_index": None,
            }
            if writer:
                dag_id, offset, task_id, map_index = writer
                provenance.update(
                    last_updated_by_dag_id=dag_id,
                    last_updated_by_run_id=runs_by_offset[(dag_id, offset)].run_id,
                    last_updated_by_task_id=task_id,
                    last_updated_by_map_index=map_index,
                )
            AssetStateStore.objects.update_or_create(
                asset=asset, key=key, defaults={"value": json.dumps(value), "updated_at": now, **provenance}
            )
            counts["asset_keys"] += 1
    regional = load_region_data(now)  # Airflow 3.4 only
    for kind in ("dag_runs", "task_instances", "task_keys"):
        counts[kind] += regional[kind]
    if regional["regions"]:
        counts["regions"] = regional["regions"]
    return counts


SCALE_DAG = "scale_test"
SCALE_TASKS = 10
SCALE_KEYS_PER_RUN = 10_000

# {index}: map_index on Airflow 3.3, region_index on 3.4 (outside any region: region_id keeps its default).
_COLUMNS = "dag_run_id, task_id, {index}, key, dag_id, run_id, value, updated_at, expires_at"
_ROW = (
    "SELECT %(run_pk)s, 'task_' || (g %% {tasks}), -1, 'key_' || g, %(dag_id)s, %(run_id)s, "
    "'{{\"n\": ' || g || '}}', %(now)s, CASE WHEN g %% 1000 < %(expired_per_mille)s THEN {expired} ELSE {live} END "
)
_GENERATE = {
    "postgresql": (
        "INSERT INTO task_state_store ("
        + _COLUMNS
        + ") "
        + _ROW.format(
            tasks=SCALE_TASKS,
            expired="%(expired)s::timestamptz - (g + %(base)s) * interval '1 second'",
            live="%(live)s::timestamptz + (g + %(base)s) * interval '1 second'",
        )
        + "FROM generate_series(0, %(count)s - 1) AS g ON CONFLICT DO NOTHING"
    ),
    # The statement starts with INSERT (its WITH inside): Python's sqlite3 reports no rowcount (-1) for a
    # statement that starts with WITH, and the command would print "0 task keys added".
    "sqlite": (
        "INSERT INTO task_state_store (" + _COLUMNS + ") "
        "WITH RECURSIVE s(g) AS (SELECT 0 UNION ALL SELECT g + 1 FROM s WHERE g + 1 < %(count)s) "
        + _ROW.format(
            tasks=SCALE_TASKS,
            expired="strftime('%%Y-%%m-%%d %%H:%%M:%%f000', %(expired)s, '-' || (g + %(base)s) || ' seconds')",
            live="strftime('%%Y-%%m-%%d %%H:%%M:%%f000', %(live)s, '+' || (g + %(base)s) || ' seconds')",
        )
        + "FROM s WHERE true ON CONFLICT DO NOTHING"
    ),
}


def load_scale_data(rows: int, expired_fraction: float = 0.5) -> int:
    """Add ``rows`` task keys to the ``scale_test`` DAG, set-based in SQL (no row-by-row inserts).

    Keys are spread over runs of ``SCALE_KEYS_PER_RUN``; ``expired_fraction`` of them expired an hour
    ago or earlier (one second apart), the rest expire in 30 days or later. Idempotent: the same
    ``rows`` twice adds nothing. Returns the number of rows inserted.
    """
    connection = connections[airflow_alias()]
    ops = connection.ops
    now = timezone.now()
    sql = _GENERATE[connection.vendor].replace("{index}", schema_of(connection).index_column)
    runs = []
    for number in range((rows + SCALE_KEYS_PER_RUN - 1) // SCALE_KEYS_PER_RUN):
        logical_date = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=number)
        runs.append(
            DagRun(
                dag_id=SCALE_DAG,
                run_id=_run_id("scheduled", logical_date),
                state="success",
                run_type="scheduled",
                logical_date=logical_date,
                run_after=logical_date,
                start_date=logical_date,
                end_date=logical_date,
            )
        )
    DagRun.objects.bulk_create(runs, ignore_conflicts=True, batch_size=500)
    by_run_id = dict(DagRun.objects.filter(dag_id=SCALE_DAG).values_list("run_id", "id"))
    TaskInstance.objects.bulk_create(
        [
            TaskInstance(
                id=uuid.uuid4(),
                dag_id=SCALE_DAG,
                task_id=f"task_{t}",
                run_id=run.run_id,
                map_index=-1,
                state="success",
                try_number=1,
                pool="default_pool",
                pool_slots=1,
            )
            for run in runs
            for t in range(SCALE_TASKS)
        ],
        ignore_conflicts=True,
        batch_size=1000,
    )
    inserted = 0
    for number, run in enumerate(runs):
        count = min(SCALE_KEYS_PER_RUN, rows - number * SCALE_KEYS_PER_RUN)
        params = {
            "run_pk": by_run_id[run.run_id],
            "dag_id": SCALE_DAG,
            "run_id": run.run_id,
            "now": ops.adapt_datetimefield_value(now),
            "expired_per_mille": round(expired_fraction * 1000),
            "expired": ops.adapt_datetimefield_value(now - timedelta(hours=1)),
            "live": ops.adapt_datetimefield_value(now + timedelta(days=30)),
            "count": count,
            "base": number * SCALE_KEYS_PER_RUN,
        }
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(sql, params)
            inserted += max(cursor.rowcount, 0)
    return inserted


# Airflow 3.4 only: a DAG with dynamic regions, shaped as Airflow writes them (airflow/models/dynamic_region.py):
# the loop ``process_batch`` ran three iterations (0, 1, 2: Airflow numbers them from 0) around the mapped
# task ``process_batch.process`` (two map positions an iteration, each expansion a region under its
# iteration), with the gate ``process_batch.batch_ready`` (a LoopGateOperator) recording its decision reason
# as the ``_airflow_loop_decision_reason`` XCom; iteration 1's expansion was cleared and re-created (a fork:
# ``forked_from_region_id``, the replaced task instances out of the working set, their keys kept); and the
# mapped task group ``score`` expanded twice. Ids are derived from the coordinates, so a second load finds
# the same rows.
REGION_DAG = "batch_refinement"
LOOP_NODE, GATE_TASK, CHOOSE_TASK, MAPPED_TASK = (
    "process_batch",
    "process_batch.batch_ready",
    "process_batch.choose_items",
    "process_batch.process",
)
GROUP_NODE, GROUP_TASK = "score", "score.fit"
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


def _region_key(run: DagRun, task_id: str, region, index: int, key: str, value, expires_at, now) -> None:
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
            "updated_at": now,
            "expires_at": expires_at,
        },
    )


def _decision(gate: TaskInstance, reason: str, now) -> None:
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
                now,
            ],
        )


def load_region_data(now: datetime) -> dict[str, int]:
    """The 3.4 DAG ``batch_refinement`` (nothing on 3.3, whose schema has no regions)."""
    counts = {"dag_runs": 0, "regions": 0, "task_instances": 0, "task_keys": 0}
    if not schema_of(connections[airflow_alias()]).regions:
        return counts
    config = airflow_config()
    logical_date = _day(0)
    start = logical_date + timedelta(hours=2)
    run, _ = DagRun.objects.get_or_create(
        dag_id=REGION_DAG,
        run_id=_run_id("manual", logical_date),
        defaults={
            "state": "success",
            "run_type": "manual",
            "logical_date": logical_date,
            "run_after": logical_date,
            "queued_at": start,
            "start_date": start,
            "end_date": start + timedelta(minutes=20),
            "created_at": start,
            "updated_at": start,
        },
    )
    counts["dag_runs"] += 1
    default = _expiry(DEFAULT, now).resolve(now, config)
    loop = _region(run, LOOP_NODE, start)
    counts["regions"] += 1
    for iteration in range(LOOP_ITERATIONS):
        at = start + timedelta(minutes=5 * iteration)
        chooser = _region_ti(run, CHOOSE_TASK, loop, iteration, at)
        _region_key(run, chooser.task_id, loop, iteration, "batch_size", MAP_POSITIONS + iteration, default, now)
        gate = _region_ti(run, GATE_TASK, loop, iteration, at, operator=_LOOP_GATE_OPERATOR)
        _decision(gate, DECISIONS[iteration], now)
        expansion = _region(run, MAPPED_TASK, at, loop, iteration)
        counts["regions"] += 1
        current = expansion
        if iteration == FORKED_ITERATION:  # cleared and re-created: the first expansion is replaced
            current = _region(run, MAPPED_TASK, at + timedelta(minutes=30), loop, iteration, forked_from=expansion)
            counts["regions"] += 1
        for position in range(MAP_POSITIONS):
            if current is not expansion:
                _region_ti(run, MAPPED_TASK, expansion, position, at, working_set=False)
                _region_key(run, MAPPED_TASK, expansion, position, "offset", {"done": position * 10}, default, now)
                counts["task_instances"] += 1
                counts["task_keys"] += 1
            _region_ti(run, MAPPED_TASK, current, position, at)
            value = {"iteration": iteration, "position": position, "done": 100 + 10 * iteration + position}
            _region_key(run, MAPPED_TASK, current, position, "offset", value, default, now)
            counts["task_instances"] += 1
            counts["task_keys"] += 1
        counts["task_instances"] += 2
        counts["task_keys"] += 1
    group = _region(run, GROUP_NODE, start + timedelta(minutes=16))
    counts["regions"] += 1
    for expansion_index in range(GROUP_EXPANSIONS):
        _region_ti(run, GROUP_TASK, group, expansion_index, start + timedelta(minutes=16))
        value = {"model": f"candidate-{expansion_index}", "auc": 0.9 + expansion_index / 50}
        _region_key(run, GROUP_TASK, group, expansion_index, "best_model", value, None, now)
        counts["task_instances"] += 1
        counts["task_keys"] += 1
    return counts
