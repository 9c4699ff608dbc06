"""A believable Airflow deployment's state, for the embedded demo, tests and benchmarks.

Idempotent: everything is keyed on its natural key (DAG run ``(dag_id, run_id)``, task instance
``(dag_id, task_id, run_id, map_index)``, asset ``(name, uri)``, state key), so a second run on the
same day updates the same rows instead of adding new ones. Run dates are anchored on today (UTC), so
a run on a later day adds that day's runs, as a scheduler would. A key is written during its run and expires
its retention after that write (``runs``): the older runs' short-lived keys have expired, those today's running
runs have just written expire within the hour, so every status (expired, expiring within the hour, default
retention, never) is always present.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from statestore_admin.airflow.config import airflow_config
from statestore_admin.airflow.models import (
    Asset,
    AssetActive,
    AssetStateStore,
    DagRun,
    TaskInstance,
    TaskStateStore,
)
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.core.values import DEFAULT, NEVER
from statestore_admin.demo.regions import load_region_data
from statestore_admin.demo.runs import day, demo_expiry, demo_run_id, run_dates, written_at
from statestore_admin.objects import sizes
from statestore_admin.objects import store as objects

LONG_KEY = ("reports/2026/11/very-long-key-" * 20)[:512]  # the longest key the column takes


@dataclass(frozen=True)
class DemoKey:
    task_id: str
    key: str
    value: object
    expiry: str | timedelta  # NEVER, DEFAULT, or a retention from the write
    map_index: int = -1
    after: timedelta | None = timedelta(minutes=5)  # written so long after its run's start; None: at its end (now)


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
    place = sizes.Place("task", key, dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index)
    return _ref(objects.write_object(store, ref, json.dumps(value.value).encode(), place))


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
            DemoKey("extract", "watermark", "2026-11-29T00:00:00+00:00", DEFAULT, after=timedelta(minutes=2)),
            DemoKey("load", "rows_loaded", 128_734, DEFAULT, after=timedelta(minutes=30)),
            DemoKey(
                "submit_spark_job",
                "job_id",
                {"job": "spark-app-20261130-0007", "cluster": "emr-prod"},
                NEVER,
                after=timedelta(minutes=20),
            ),
            DemoKey("submit_spark_job", "attempt", 2, timedelta(minutes=25), after=None),
            DemoKey(
                "transform",
                "tmp/partition_cursor",
                {"partition": "2026-11-29", "offset": 5120},
                timedelta(hours=3),
                after=timedelta(minutes=10),
            ),
        ],
    },
    "ml_training": {
        "runs": [(-1, "scheduled", "success"), (0, "scheduled", "running")],
        "tasks": ["prepare", "train_fold", "evaluate"],
        "mapped": {"train_fold": 5},
        "keys": [
            DemoKey("prepare", "dataset_version", "v2026.11.3", NEVER, after=timedelta(minutes=3)),
            *[
                DemoKey(
                    "train_fold",
                    "checkpoint",
                    {"epoch": 12 + i, "loss": round(0.4 / (i + 1), 4)},
                    DEFAULT,
                    i,
                    after=timedelta(minutes=10 + i),
                )
                for i in range(5)
            ],
            *[
                DemoKey(
                    "train_fold",
                    f"metrics/fold-{i}",
                    {"auc": 0.9 + i / 100, "f1": 0.8},
                    timedelta(hours=6),
                    i,
                    after=timedelta(minutes=12 + i),
                )
                for i in range(0, 5, 2)
            ],
            DemoKey("evaluate", "best_fold", 3, timedelta(minutes=50), after=None),
        ],
    },
    "s3_ingest": {
        "runs": [(-1, "scheduled", "success"), (0, "scheduled", "running")],
        "tasks": ["list_files", "download", "validate"],
        "keys": [
            DemoKey("list_files", "manifest_cache", _manifest(250), DEFAULT, after=timedelta(minutes=2)),
            DemoKey("download", "manifest", Offloaded(_manifest(400)), DEFAULT, after=timedelta(minutes=15)),
            DemoKey(
                "download",
                "checkpoint",
                _ref("s3://airflow-state/task/s3_ingest/download/checkpoint"),
                NEVER,
                after=timedelta(minutes=20),
            ),
            DemoKey("validate", "errors", [], timedelta(minutes=30), after=timedelta(minutes=35)),
        ],
    },
    "long_running_jobs": {
        "runs": [(0, "manual", "running")],
        "tasks": ["submit", "poll"],
        "keys": [
            DemoKey(
                "submit", "emr:cluster/j-2AXXXXXXGAPLF", {"state": "RUNNING", "steps": 4}, NEVER, after=timedelta(0)
            ),
            DemoKey("submit", "batch job: eu-west-1", "submitted", timedelta(minutes=10), after=None),
            DemoKey("submit", "état/résumé 🚀", {"message": "Grüße, 世界"}, DEFAULT, after=timedelta(minutes=1)),
            DemoKey("poll", LONG_KEY, True, DEFAULT, after=None),
            DemoKey("poll", "last_poll", 3.5, timedelta(minutes=1), after=timedelta(minutes=2)),
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
            logical_date = day(offset)
            running = state == "running"
            start, end = run_dates(logical_date, now, timedelta(hours=1), None if running else timedelta(minutes=42))
            run, _ = DagRun.objects.get_or_create(
                dag_id=dag_id,
                run_id=fixed_run_id[0] if fixed_run_id else demo_run_id(run_type, logical_date),
                defaults={
                    "state": state,
                    "run_type": run_type,
                    "logical_date": logical_date,
                    "run_after": logical_date,
                    "queued_at": start,
                    "start_date": start,
                    "end_date": end,
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
                written = written_at(run, now, key.after)
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
                        "updated_at": written,
                        "expires_at": demo_expiry(key.expiry, written).resolve(written, config),
                    },
                )
                counts["task_keys"] += 1

    declared = day(-7)  # the assets were declared before any of the demo's runs wrote to them
    for name, uri, group, active, keys in ASSETS:
        asset, _ = Asset.objects.get_or_create(
            name=name, uri=uri, defaults={"group": group, "extra": {}, "created_at": declared, "updated_at": declared}
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
            written = now  # a watcher, the API or an unknown writer: just now
            if writer:  # a task: during its run, as it wrote its own keys
                dag_id, offset, task_id, map_index = writer
                written = written_at(runs_by_offset[(dag_id, offset)], now, timedelta(minutes=6))
                provenance.update(
                    last_updated_by_dag_id=dag_id,
                    last_updated_by_run_id=runs_by_offset[(dag_id, offset)].run_id,
                    last_updated_by_task_id=task_id,
                    last_updated_by_map_index=map_index,
                )
            AssetStateStore.objects.update_or_create(
                asset=asset, key=key, defaults={"value": json.dumps(value), "updated_at": written, **provenance}
            )
            counts["asset_keys"] += 1
    regional = load_region_data(now)  # Airflow 3.4 only
    for kind in ("dag_runs", "task_instances", "task_keys", "assets", "asset_keys"):
        counts[kind] += regional[kind]
    if regional["regions"]:
        counts["regions"] = regional["regions"]
    return counts
