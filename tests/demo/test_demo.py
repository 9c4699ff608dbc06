"""Demo data: a believable, idempotent deployment; fast set-based scale data."""

import json
import os
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count
from django.utils import timezone

from statestore_admin.airflow.models import Asset, AssetActive, AssetStateStore, DagRun, TaskInstance, TaskStateStore
from statestore_admin.demo.data import LONG_KEY
from statestore_admin.demo.scale import SCALE_DAG
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


def table_counts():
    return {
        m.__name__: m.objects.count()
        for m in (DagRun, TaskInstance, TaskStateStore, Asset, AssetActive, AssetStateStore)
    }


def load():
    call_command("demo_data", allow_any_database=True, verbosity=0)


def test_refuses_a_database_that_is_not_the_embedded_demo():
    with pytest.raises(CommandError, match="not the embedded demo database"):
        call_command("demo_data")
    assert TaskStateStore.objects.count() == 0


def test_demo_is_believable():
    load()
    now = timezone.now()
    keys = TaskStateStore.objects.all()
    assert DagRun.objects.values("dag_id").distinct().count() >= 4
    assert set(DagRun.objects.values_list("state", flat=True)) >= {"success", "failed", "running"}
    assert keys.filter(expires_at__lt=now).exists(), "expired keys"
    assert keys.filter(expires_at__gte=now, expires_at__lt=now + timedelta(hours=1)).exists(), "expiring in the hour"
    assert keys.filter(expires_at__gt=now + timedelta(days=29)).exists(), "default retention (30 days)"
    assert keys.filter(expires_at__isnull=True).exists(), "NEVER_EXPIRE"
    mapped = set(keys.filter(task_id="train_fold").values_list("map_index", flat=True))
    assert mapped == {0, 1, 2, 3, 4}
    assert set(TaskInstance.objects.filter(task_id="train_fold").values_list("map_index", flat=True)) == mapped
    assert keys.filter(key=LONG_KEY).exists() and len(LONG_KEY) == 512
    assert keys.filter(key__contains="🚀").exists() and keys.filter(key__contains="/").exists()
    sizes = sorted(len(k.value) for k in keys)
    assert sizes[0] <= 4 and sizes[-1] >= 10_000
    assert any(k.worker_ref and k.worker_ref.startswith("s3://") for k in keys)
    # every key belongs to an existing task instance of its run
    for key in keys:
        assert TaskInstance.objects.filter(
            dag_id=key.dag_id, run_id=key.run_id, task_id=key.task_id, map_index=key.map_index
        ).exists()
        assert (key.dag_run.dag_id, key.dag_run.run_id) == (key.dag_id, key.run_id)
    kinds = set(AssetStateStore.objects.values_list("last_updated_by_kind", flat=True))
    assert kinds == {"task", "watcher", "api", None}
    active = {(a.name, a.uri) for a in AssetActive.objects.all()}
    inactive = [a for a in Asset.objects.all() if (a.name, a.uri) not in active]
    assert inactive and AssetStateStore.objects.filter(asset__in=inactive).exists()
    task_written = AssetStateStore.objects.filter(last_updated_by_kind="task").first()
    assert DagRun.objects.filter(
        dag_id=task_written.last_updated_by_dag_id, run_id=task_written.last_updated_by_run_id
    ).exists()


def test_demo_is_idempotent():
    load()
    first = table_counts()
    load()
    assert table_counts() == first


def test_demo_respects_a_zero_default_retention(monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS", "0")
    load()
    assert not TaskStateStore.objects.filter(expires_at__gt=timezone.now() + timedelta(days=1)).exists()


def test_scale_data_is_bulk_and_idempotent():
    call_command("demo_data", allow_any_database=True, scale=25_000, expired_fraction=0.4, verbosity=0)
    scale = TaskStateStore.objects.filter(dag_id=SCALE_DAG)
    assert scale.count() == 25_000
    expired = scale.filter(expires_at__lt=timezone.now()).count()
    assert expired == 10_000
    assert scale.values("run_id").distinct().count() == 3
    assert scale.values("expires_at").distinct().count() == 25_000  # spread, one second apart
    assert scale.order_by("expires_at").first().expires_at < timezone.now() - timedelta(hours=1)
    per_task = scale.values("task_id").annotate(n=Count("id"))
    assert {row["n"] for row in per_task} == {2_500}
    call_command("demo_data", allow_any_database=True, scale=25_000, verbosity=0)
    assert scale.count() == 25_000


def test_clustered_scale_data_expires_the_first_runs_whole_in_the_order_written():
    """--layout clustered: the expired keys are the first written (lowest ids), whole runs of them, and
    expire in the order they were written; the live ones all come after."""
    call_command(
        "demo_data", allow_any_database=True, scale=25_000, expired_fraction=0.4, layout="clustered", verbosity=0
    )
    scale = TaskStateStore.objects.filter(dag_id=SCALE_DAG)
    now = timezone.now()
    expired, live = scale.filter(expires_at__lt=now), scale.filter(expires_at__gte=now)
    assert (expired.count(), live.count()) == (10_000, 15_000)
    assert max(expired.values_list("id", flat=True)) < min(live.values_list("id", flat=True))
    expired_runs = set(expired.values_list("run_id", flat=True).distinct())
    assert len(expired_runs) == 1  # one whole run of 10,000 keys
    # The run's ids as a list, not a subquery: in a fresh test database without statistics, PostgreSQL may plan
    # `run_id IN (subquery)` as a rescan per row, past the Airflow alias's statement timeout on a busy machine.
    assert not live.filter(run_id__in=list(expired_runs)).exists()
    by_id = list(expired.order_by("id").values_list("expires_at", flat=True))
    assert by_id == sorted(by_id) and len(set(by_id)) == 10_000
    assert by_id[-1] < now - timedelta(hours=1)


def test_bad_scale_arguments():
    with pytest.raises(CommandError):
        call_command("demo_data", allow_any_database=True, scale=-1)


def test_with_object_storage_the_demos_offloaded_values_are_objects(monkeypatch, settings, tmp_path):
    """`make run` gives the demo a file:// object storage in var/demo/state/: its offloaded values are written
    there like common.io's backend writes them, and the key page's resolver reads them back."""
    from statestore_admin.objects import sizes
    from statestore_admin.objects import store as objects

    monkeypatch.setenv("AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_PATH", f"file://{tmp_path}/state/")
    monkeypatch.setenv("AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_COMPRESSION", "gzip")
    settings.WORKER_BACKEND_READ = True
    load()
    rows = TaskStateStore.objects.filter(dag_id="s3_ingest", key="manifest")
    assert rows.count() == 2  # one per run, each its own object
    for row in rows:
        # The dashboard wrote these objects: their sizes are known before any read (objects.sizes)
        on_disk = os.path.getsize(objects.storage().path(row.worker_ref))
        assert sizes.stored_size(row.value).object_bytes == on_disk > 0
        resolved = objects.resolve_task_row(row)
        assert resolved.reference.kind == objects.OBJECT and resolved.reference.risk is None
        assert resolved.reference.ref.endswith("/download/-1/manifest.gz")
        assert (tmp_path / "state" / "s3_ingest").is_dir()
        assert json.loads(resolved.text)[0]["path"].startswith("s3://landing/events/")


def test_the_34_demo_has_a_loop_around_a_mapped_task_a_mapped_group_and_a_fork():
    """On Airflow 3.4's schema the demo adds ``batch_refinement``, shaped as Airflow writes it; the 3.3 demo
    has no such DAG (its schema has no regions) and stays as it was."""
    from django.db import connections

    from statestore_admin.airflow.models import DynamicRegion
    from statestore_admin.airflow.versions import schema_of
    from statestore_admin.demo.regions import LOOP_NODE, MAPPED_TASK, REFINED_ASSET, REGION_DAG
    from statestore_admin.state import selectors

    load()
    if not schema_of(connections["airflow"]).regions:
        assert not DagRun.objects.filter(dag_id=REGION_DAG).exists()
        return
    load()  # idempotent
    run = DagRun.objects.get(dag_id=REGION_DAG)
    regions = selectors.run_regions(run)
    (loop,) = regions.loops()
    assert (loop.node_id, [it.index for it in loop.iterations]) == (LOOP_NODE, [0, 1, 2])
    assert loop.iterations[-1].decision.endswith("stop")
    groups, _ = selectors.run_state(run, regions=regions)
    mapped = next(g for g in groups if g.task_id == MAPPED_TASK)
    labels = [(row.coordinate.label, row.replaced) for row in mapped.coordinates]
    assert labels[:3] == [
        ("loop process_batch · iteration 0 › map 0", False),
        ("loop process_batch · iteration 0 › map 1", False),
        ("loop process_batch · iteration 1 › map 0", True),  # the expansion a clear replaced, then its fork
    ]
    assert sum(replaced for _, replaced in labels) == 2 and len(labels) == 8
    assert DynamicRegion.objects.filter(dag_id=REGION_DAG, forked_from_region_id__isnull=False).count() == 1
    group = next(g for g in groups if g.task_id == "score.fit")
    labels = [row.coordinate.label for row in group.coordinates]
    assert labels == ["group score · expansion 0", "group score · expansion 1"]
    # A task in the loop wrote asset state: its writer is named with its iteration, as on the task instance page.
    (published,) = selectors.with_writer_coordinates(AssetStateStore.objects.filter(asset__name=REFINED_ASSET[0]))
    assert published.writer_coordinate.label == "loop process_batch · iteration 2 › map 0"


def _retention(key):
    """The retention the demo gives ``key`` (a DemoKey's expiry; the 3.4 regions' keys use the default, or never)."""
    from statestore_admin.airflow.config import airflow_config
    from statestore_admin.core.values import DEFAULT, NEVER
    from statestore_admin.demo.data import DAGS

    spec = DAGS.get(key.dag_id)
    expiries = [
        k.expiry for k in spec["keys"] if (k.task_id, k.key, k.map_index) == (key.task_id, key.key, key.map_index)
    ]
    expiry = expiries[0] if expiries else (NEVER if key.expires_at is None else DEFAULT)
    if expiry == NEVER:
        return None
    if expiry == DEFAULT:
        return timedelta(days=airflow_config().default_retention_days)
    return expiry


def test_the_demos_dates_tell_one_story():
    """Every task key was written during its run (between the run's start and its end, or now for a running run)
    and expires where Airflow's writer put it: ``updated_at`` + its retention (the default retention unless
    the key says otherwise; NULL for never). Every asset key a task wrote was written during that task's run, and
    no asset key before its asset existed. Runs neither start nor end in the future."""
    from statestore_admin.demo.data import DAGS

    load()
    now = timezone.now()
    runs = DagRun.objects.all()
    assert all(run.start_date <= now and (run.end_date is None or run.end_date <= now) for run in runs)
    for key in TaskStateStore.objects.select_related("dag_run"):
        run = key.dag_run
        where = f"{key.dag_id} {key.run_id} {key.task_id}[{key.map_index}] {key.key[:40]}"
        assert run.start_date <= key.updated_at <= (run.end_date or now), where
        retention = _retention(key) if key.dag_id in DAGS else _retention_34(key)
        expected = None if retention is None else key.updated_at + retention
        assert key.expires_at == expected, where
    for key in AssetStateStore.objects.select_related("asset"):
        assert key.asset.created_at <= key.updated_at <= now, key.key
        if key.last_updated_by_kind == "task":
            run = DagRun.objects.get(dag_id=key.last_updated_by_dag_id, run_id=key.last_updated_by_run_id)
            assert run.start_date <= key.updated_at <= (run.end_date or now), key.key


def _retention_34(key):
    from statestore_admin.airflow.config import airflow_config

    return None if key.expires_at is None else timedelta(days=airflow_config().default_retention_days)
