"""`manage.py state_store_clean`: Airflow's GC rules, and its operational behaviour."""

import io
import json
import socket
import sys
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from statestore_admin import gc
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import EVERYTHING
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.airflow.versions import schema_of
from statestore_admin.commands import gc_text
from statestore_admin.core import formatting
from statestore_admin.core.errors import Invalid
from statestore_admin.demo.scale import load_scale_data
from statestore_admin.exports import restore as restores
from statestore_admin.records.models import AuditEvent, AuditKey, GcRun, StatsSnapshot, StatsSnapshotDag
from tests.conftest import BOTH_DATABASES
from tests.factories import make_task_keys

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


def clean(*args, **options):
    """Run the command; return (stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    call_command("state_store_clean", *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def clean_json(**options):
    out, _ = clean(json=True, **options)
    return json.loads(out)


def keys():
    return set(TaskStateStore.objects.values_list("task_id", "map_index", "key"))


@pytest.fixture
def reference(dag_run_factory, task_key_factory, asset_factory, asset_key_factory):
    """The scenario observed on Airflow 3.3.2 (docs/airflow.md, GC rules), written as Airflow's writers would."""
    now = timezone.now()
    run = dag_run_factory(dag_id="reference")
    default = now + timedelta(days=30)
    task_key_factory(run, task_id="t", key="never", expires_at=None)
    task_key_factory(run, task_id="t", key="default", expires_at=default)
    task_key_factory(run, task_id="t", key="minus_60s", expires_at=now - timedelta(seconds=60))
    task_key_factory(
        run, task_id="t", key="one_second", updated_at=now - timedelta(seconds=2), expires_at=now - timedelta(seconds=1)
    )  # written with retention 1 s, which has passed
    task_key_factory(run, task_id="t", key="one_day", expires_at=now + timedelta(days=1))
    for map_index in (0, 1):
        task_key_factory(
            run, task_id="mapped", map_index=map_index, key="expired", expires_at=now - timedelta(minutes=5)
        )
        task_key_factory(run, task_id="mapped", map_index=map_index, key="default", expires_at=default)
    asset = asset_factory()
    asset_key_factory(asset, key="watermark")
    asset_key_factory(asset, key="cursor", kind="task")
    return run


SURVIVORS = {
    ("t", -1, "never"),
    ("t", -1, "default"),
    ("t", -1, "one_day"),
    ("mapped", 0, "default"),
    ("mapped", 1, "default"),
}


@pytest.fixture(params=[gc.PHYSICAL, gc.INDEX])
def batch_order(request, monkeypatch):
    """PostgreSQL's batches in either order, whatever the planner expects (gc.sql._batch_order). SQLite's are
    always in index order."""
    monkeypatch.setattr(gc.sql, "_batch_order", lambda connection, plan: request.param)
    return request.param if connections["airflow"].vendor == "postgresql" else gc.INDEX


@pytest.mark.parametrize(("batch_size", "batches"), [(0, 1), (1, 5), (3, 2), (100, 1)])
def test_reference_scenario(reference, batch_size, batches, batch_order):
    summary = clean_json(batch_size=batch_size)
    assert keys() == SURVIVORS
    assert AssetStateStore.objects.count() == 2
    assert (summary["rows_deleted"], summary["batches"], summary["outcome"]) == (4, batches, "completed")
    assert summary["batch_order"] == ("one statement" if batch_size == 0 else batch_order)
    assert summary["safe_batches"] == 0


def test_batches_in_either_order_select_exactly(dag_run_factory, task_key_factory, batch_order):
    """Many pages, expired and live rows interleaved, a DAG filter: batches of at most N, exactly the rows."""
    now = timezone.now()
    for dag_id in ("a", "b"):
        make_task_keys(
            dag_run_factory(dag_id=dag_id),
            600,
            key="k{i:04d}",
            value="x" * 200,
            updated_at=now,
            expires_at=lambda i: None if i % 5 == 0 else now + timedelta(hours=1 if i % 3 else -1),
        )
    expired_a = TaskStateStore.objects.filter(dag_id="a", expires_at__lt=now).count()
    summary = clean_json(batch_size=37, dag_id=["a"])
    assert (summary["rows_deleted"], summary["batch_order"]) == (expired_a, batch_order)
    assert summary["batches"] == expired_a // 37 + 1
    assert not TaskStateStore.objects.filter(dag_id="a", expires_at__lt=now).exists()
    assert TaskStateStore.objects.filter(dag_id="b", expires_at__lt=now).count() == expired_a
    assert TaskStateStore.objects.count() == 1200 - expired_a


@pytest.mark.usefixtures("postgres_only")
def test_batch_order_is_the_walk_the_planner_prices_lower(dag_run_factory):
    """Physical order when expired rows are spread over most pages; the expires_at index when few have
    expired, or when those that have are stored together (whole old runs)."""
    now = timezone.now()
    run = dag_run_factory()

    def rows(expires_in):
        """20,000 keys, key i expiring ``expires_in(i)`` from now."""
        TaskStateStore.objects.all().delete()
        make_task_keys(
            run, 20_000, key="k{i:05d}", value="v" * 100, updated_at=now, expires_at=lambda i: now + expires_in(i)
        )
        with connections["airflow"].cursor() as cursor:
            cursor.execute("ANALYZE task_state_store")
        return gc.sql._batch_order(connections["airflow"], gc.GcPlan(cutoff=timezone.now(), batch_size=100))

    day, second = timedelta(days=1), timedelta(seconds=1)
    # the first half of the table, written together, expiring in the order written (whole old runs)
    assert rows(lambda i: (i - 10_000) * second) == gc.INDEX
    # half of every page, expiring in no order
    assert rows(lambda i: (-day if i % 2 == 0 else day) + (i * 7919 % 20_000) * second) == gc.PHYSICAL
    assert rows(lambda i: -day if i % 5_000 == 0 else day) == gc.INDEX  # four rows


@pytest.mark.parametrize("order", [gc.PHYSICAL, gc.INDEX])
def test_batches_hold_exactly_n_rows_whatever_the_ties_at_their_edges(
    dag_run_factory, task_key_factory, monkeypatch, order
):
    """Rows expiring at the same instant across a batch's edge: every batch still deletes exactly N rows
    (Airflow's LIMIT N), in expiry order in index order, and the next batch takes the rest of the tie."""
    now = timezone.now()
    run = dag_run_factory()
    expiries = [1, 1, 1, 2, 2, 3, 4, 4, 4, 4, 5]  # minutes ago, oldest last: batches of 2 end inside ties
    for i, minutes in enumerate(expiries):
        task_key_factory(run, task_id="t", key=f"k{i:02d}", expires_at=now - timedelta(minutes=minutes))
    task_key_factory(run, task_id="t", key="live", expires_at=now + timedelta(days=1))
    sizes = []
    monkeypatch.setattr(gc.sql, "_batch_order", lambda connection, plan: order)
    plan = gc.GcPlan(cutoff=now, batch_size=2)
    result = gc.run_gc(plan, actor=Actor.command(via="gc"), on_batch=lambda p: sizes.append(p.rows))
    assert (result.outcome, result.rows_deleted) == ("completed", 11)
    assert sizes == [2, 2, 2, 2, 2, 1]
    assert keys() == {("t", -1, "live")}


def test_batch_size_comes_from_airflow_config(reference, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__STATE_CLEANUP_BATCH_SIZE", "2")
    summary = clean_json()
    assert (summary["batch_size"], summary["batches"], summary["rows_deleted"]) == (2, 3, 4)
    assert keys() == SURVIVORS


def test_invalid_airflow_config_is_a_usage_error(reference, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__STATE_CLEANUP_BATCH_SIZE", "x")
    with pytest.raises(CommandError, match="state_cleanup_batch_size") as excinfo:
        clean()
    assert excinfo.value.returncode == 2
    assert len(keys()) == 9


def test_custom_backend_deletes_nothing(reference, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__BACKEND", "mycompany.state.RedisBackend")
    out, _ = clean()
    assert len(keys()) == 9
    assert out.count("\n") == 1 and "Nothing deleted" in out and "custom backend" in out
    dry, _ = clean(dry_run=True)
    assert "Nothing would be deleted" in dry
    assert GcRun.objects.get().outcome == GcRun.Outcome.SKIPPED


def test_declared_metastore_subclass_is_cleaned(reference, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__BACKEND", "mycompany.state.AuditedMetastoreBackend")
    with override_settings(STATESTORE_METASTORE_BACKENDS=["mycompany.state.AuditedMetastoreBackend"]):
        clean()
    assert keys() == SURVIVORS


@pytest.fixture
def importable_backends(tmp_path, monkeypatch):
    """Airflow's MetastoreBackend class path and two company backends, importable from tmp_path.

    Airflow itself is not installed beside the dashboard; the compat stage checks the real classes.
    """
    (tmp_path / "airflow" / "state").mkdir(parents=True)
    (tmp_path / "airflow" / "__init__.py").write_text("")
    (tmp_path / "airflow" / "state" / "__init__.py").write_text("")
    (tmp_path / "airflow" / "state" / "metastore.py").write_text("class MetastoreBackend:\n    pass\n")
    (tmp_path / "company_backends.py").write_text(
        "from airflow.state.metastore import MetastoreBackend\n"
        "class Audited(MetastoreBackend):\n    pass\n"
        "class Redis:\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in [m for m in sys.modules if m == "company_backends" or m == "airflow" or m.startswith("airflow.")]:
        del sys.modules[name]


@pytest.mark.parametrize(
    ("backend", "cleaned"), [("company_backends.Audited", True), ("company_backends.Redis", False)]
)
def test_importable_backend_is_checked_for_subclassing(reference, monkeypatch, importable_backends, backend, cleaned):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__BACKEND", backend)
    clean()
    assert (keys() == SURVIVORS) is cleaned
    assert len(keys()) == (5 if cleaned else 9)


def test_before_selects_exactly(dag_run_factory, task_key_factory):
    now = timezone.now()
    run = dag_run_factory()
    for hours in (1, 2, 3, 4):
        task_key_factory(run, key=f"h{hours}", expires_at=now - timedelta(hours=hours))
    boundary = now - timedelta(hours=2)
    clean(before=boundary.isoformat())
    assert {k for _, _, k in keys()} == {"h1", "h2"}  # expires_at == cutoff is not < cutoff


def test_dag_id_selects_exactly(dag_run_factory, task_key_factory):
    past = timezone.now() - timedelta(hours=1)
    for dag_id in ("a", "b", "c"):
        task_key_factory(dag_run_factory(dag_id=dag_id), key=dag_id, expires_at=past)
    summary = clean_json(dag_id=["a", "c", "a"])
    assert {k for _, _, k in keys()} == {"b"}
    assert summary["dag_ids"] == ["a", "c"] and summary["rows_deleted"] == 2


@pytest.mark.parametrize(
    ("before", "message"),
    [
        ("2999-01-01T00:00:00+00:00", "in the future"),
        ("2026-01-01T00:00:00", "a naive date and time is ambiguous"),
        ("yesterday", "Not a date and time"),
    ],
)
def test_bad_cutoffs_are_refused_and_change_nothing(reference, before, message):
    with pytest.raises(CommandError, match=message) as excinfo:
        clean(before=before)
    assert excinfo.value.returncode == 2
    assert len(keys()) == 9
    assert not GcRun.objects.exists()


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"batch_size": -1}, "--batch-size -1"),
        ({"max_batches": 0}, "--max-batches 0"),
        ({"sleep": -1}, "--sleep -1"),
        ({"lock_timeout": 0}, "--lock-timeout 0"),
        ({"dag_id": [""]}, "--dag-id"),
    ],
)
def test_bad_numbers_are_refused(reference, options, option):
    with pytest.raises(CommandError, match=option) as excinfo:
        clean(**options)
    assert excinfo.value.returncode == 2
    assert len(keys()) == 9
    assert not GcRun.objects.exists() and not AuditEvent.objects.exists()


def test_dry_run_is_bounded_and_deletes_nothing(reference, monkeypatch):
    monkeypatch.setattr(gc.preview, "DRY_RUN_EXACT_CAP", 200_000)  # exact figures (the capped path: tests below)
    load_scale_data(100_000, expired_fraction=1.0)
    out, _ = clean(dry_run=True)
    lines = out.splitlines()
    assert len(lines) <= 4 + 10 + 1 + 5 + 1
    assert lines[0].startswith("Dry run: 100,004 task state rows expired before")
    assert "scale_test" in out and "reference" in out
    assert TaskStateStore.objects.count() == 100_009
    assert not GcRun.objects.exists()
    summary = json.loads(clean(dry_run=True, json=True, top=1)[0])
    assert summary["rows"] == 100_004 and len(summary["by_dag"]) == 1 and len(summary["sample"]) == 5
    assert summary["by_dag"][0] == {"dag_id": "scale_test", "rows": 100_000}
    assert (summary["rows_estimated"], summary["rows_more_than"], summary["by_dag_source"]) == (False, None, "exact")
    assert summary["snapshot_taken_at"] is None and summary["snapshot_age_seconds"] is None


def dry(**plan) -> gc.DryRunSummary:
    return gc.dry_run(gc.GcPlan(cutoff=timezone.now(), **plan), scope=EVERYTHING)


@pytest.fixture
def analysed(reference):
    """The planner's statistics of task_state_store fresh (PostgreSQL): what an estimate past the cap reads. A
    worker's new test database was never analysed, and stale statistics are counted exactly instead
    (``counting.table_statistics``); which earlier tests of the same database had it analysed is no precondition."""
    if connections["airflow"].vendor == "postgresql":
        with connections["airflow"].cursor() as cursor:
            cursor.execute("ANALYZE task_state_store")
    return reference


def snapshot(taken_at, expired: dict[str, int], status=StatsSnapshot.Status.DONE):
    taken = StatsSnapshot.objects.create(taken_at=taken_at, finished_at=taken_at, status=status)
    StatsSnapshotDag.objects.bulk_create(
        StatsSnapshotDag(snapshot=taken, dag_id=dag_id, keys=n + 1, expired=n) for dag_id, n in expired.items()
    )
    return taken


def test_dry_run_past_the_cap_counts_no_more_than_the_cap(analysed, monkeypatch):
    """Past DRY_RUN_EXACT_CAP expired rows: "more than the cap", the planner's estimate on PostgreSQL (none on
    SQLite), no DAG figures without a statistics snapshot; the expiry range and the sample stay exact."""
    monkeypatch.setattr(gc.preview, "DRY_RUN_EXACT_CAP", 2)
    summary = dry()
    answer = summary.as_dict()
    postgres = connections["airflow"].vendor == "postgresql"
    assert (answer["rows_more_than"], answer["rows_estimated"]) == (2, postgres)
    assert answer["rows"] >= 3 if postgres else answer["rows"] is None
    assert (answer["dags"], answer["by_dag"], answer["by_dag_source"], answer["snapshot_taken_at"]) == (
        None, [], None, None
    )  # fmt: skip
    assert [s["key"] for s in answer["sample"]] == ["expired", "expired", "minus_60s", "one_second"]
    assert answer["oldest_expiry"] == answer["sample"][0]["expires_at"]
    assert answer["newest_expiry"] == answer["sample"][-1]["expires_at"]
    text = "\n".join(gc_text.dry_run_lines(summary))
    assert "Dry run: more than 2 task state rows expired before" in text
    assert ("by the planner's estimate" in text) == postgres and ("no estimate here" in text) != postgres
    assert "By DAG: not counted" in text and "run state_store_stats" in text
    monkeypatch.setattr(gc.preview, "DRY_RUN_EXACT_CAP", 4)  # exactly at the cap: still exact
    assert (dry().rows, dry().rows_more_than, dry().by_dag_source, dry().dags) == (4, None, "exact", 1)


def test_dry_run_past_the_cap_shows_the_latest_snapshot_by_dag(reference, monkeypatch):
    monkeypatch.setattr(gc.preview, "DRY_RUN_EXACT_CAP", 2)
    now = timezone.now()
    snapshot(now - timedelta(days=2), {"old": 99})
    snapshot(now - timedelta(minutes=30), {"never": 1}, status=StatsSnapshot.Status.FAILED)
    taken = snapshot(now - timedelta(hours=3), {"reference": 40, "other": 70, "quiet": 0, "third": 5})
    summary = dry(dag_ids=())
    answer = summary.as_dict()
    assert answer["by_dag"] == [{"dag_id": "other", "rows": 70}, {"dag_id": "reference", "rows": 40},
                                {"dag_id": "third", "rows": 5}]  # fmt: skip
    assert (answer["by_dag_source"], answer["dags"]) == ("snapshot", 3)
    assert answer["snapshot_taken_at"] == formatting.iso(taken.taken_at)
    assert 3 * 3600 <= answer["snapshot_age_seconds"] < 3 * 3600 + 60
    text = "\n".join(gc_text.dry_run_lines(summary))
    assert "By DAG (top 3 of 3), expired at the statistics snapshot of" in text and "(3 h ago)" in text
    only = dry(
        dag_ids=("reference", "old"),
    ).as_dict()  # the DAG filter applies to the snapshot's rows too
    assert (only["by_dag"], only["dags"]) == ([{"dag_id": "reference", "rows": 40}], 1)
    top = gc.dry_run(gc.GcPlan(cutoff=timezone.now()), top=1, scope=EVERYTHING).as_dict()
    assert top["by_dag"] == [{"dag_id": "other", "rows": 70}] and top["dags"] == 3
    snapshot(now - timedelta(minutes=5), {"newer": 3})  # a snapshot's DAGs are kept per snapshot: the new one's
    newer = dry(dag_ids=()).as_dict()
    assert (newer["by_dag"], newer["dags"]) == ([{"dag_id": "newer", "rows": 3}], 1)


def test_dry_run_under_the_cap_ignores_snapshots(reference):
    snapshot(timezone.now(), {"other": 70})
    answer = dry().as_dict()
    assert (answer["rows"], answer["by_dag"], answer["by_dag_source"]) == (
        4, [{"dag_id": "reference", "rows": 4}], "exact"
    )  # fmt: skip


def test_dry_run_text_under_the_cap_is_the_commands(reference):
    cutoff = timezone.now() - timedelta(seconds=1)
    out, _ = clean(dry_run=True, before=cutoff.isoformat())
    assert out.splitlines() == gc_text.dry_run_lines(gc.dry_run(gc.GcPlan(cutoff=cutoff), scope=EVERYTHING))


def test_dry_run_lists_oldest_first(reference):
    out, _ = clean(dry_run=True)
    sample = [line for line in out.splitlines() if line.startswith("  dag ")]
    assert [line.split("key ")[1].split(" ")[0] for line in sample] == [
        "'expired'",
        "'expired'",
        "'minus_60s'",
        "'one_second'",
    ]


def test_max_batches_stops_early(reference):
    summary = clean_json(batch_size=1, max_batches=2)
    assert (summary["outcome"], summary["rows_deleted"], summary["batches"]) == ("partial", 2, 2)
    assert len(keys()) == 7
    assert "--max-batches" in summary["message"]


def test_each_real_run_is_recorded(reference):
    summary = clean_json(batch_size=3)
    run = GcRun.objects.get()
    assert run.pk == summary["run_id"]
    assert (run.outcome, run.rows_deleted, run.batches, run.batch_size) == ("completed", 4, 2, 3)
    assert run.finished_at >= run.started_at >= run.cutoff - timedelta(seconds=5)
    assert run.host and run.pid


def test_verbosity_levels(reference):
    quiet, _ = clean(batch_size=1, verbosity=0)
    assert quiet == ""


def test_progress_lines_at_verbosity_2(reference):
    out, _ = clean(batch_size=2, verbosity=2)
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines[:-1]] == ["batch 1", "batch 2", "batch 3"]
    assert "rows/s" in lines[0]
    assert lines[-1].startswith("Deleted 4 expired task state rows in 3 batches")


def test_worker_side_backend_is_mentioned(reference, monkeypatch):
    monkeypatch.setenv("AIRFLOW__WORKERS__STATE_STORE_BACKEND", "company.S3Backend")
    _, err = clean()
    assert "does not delete the external objects" in err
    assert keys() == SURVIVORS


def test_unmigrated_dashboard_database_says_run_migrate_and_deletes_nothing(reference):
    with connections["default"].cursor() as cursor:
        cursor.execute(f"DROP TABLE {GcRun._meta.db_table}")  # rolled back with the test's transaction
    with pytest.raises(CommandError, match=r"run `python manage.py migrate` first\. Nothing was deleted\.") as excinfo:
        clean()
    assert excinfo.value.returncode == 1
    assert len(keys()) == 9


# The rules both faces share: cutoff, bounds, dry-run summary ----------------------------------------
def test_parse_cutoff():
    now = timezone.now()
    assert gc.parse_cutoff(None, now) is now and gc.parse_cutoff("", now) is now
    parsed = gc.parse_cutoff("2026-01-01T01:00:00+01:00", now)
    assert parsed.isoformat() == "2026-01-01T00:00:00+00:00"
    for text, message in [
        ("yesterday", "Not a date and time"),
        ("2026-01-01T00:00:00", "naive"),
        ((now + timedelta(seconds=5)).isoformat(), "in the future"),
        ("  ", "surrounding spaces"),
        (" 2026-01-01T00:00:00+00:00", "surrounding spaces"),
    ]:
        with pytest.raises(Invalid, match=message) as excinfo:
            gc.parse_cutoff(text, now)
        assert list(excinfo.value.message_dict) == ["before"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"batch_size": -1}, "batch_size"),
        ({"batch_size": 1.5}, "batch_size"),
        ({"sleep": -0.1}, "sleep"),
        ({"max_batches": 0}, "max_batches"),
        ({"lock_timeout": 0}, "lock_timeout"),
        ({"dag_ids": ("a", "")}, "dag_ids"),
        ({"dag_ids": ("a", None)}, "dag_ids"),
        ({"cutoff": timezone.now().replace(tzinfo=None)}, "cutoff"),
    ],
)
def test_plan_bounds_live_in_the_plan(fields, field):
    with pytest.raises(Invalid) as excinfo:
        gc.GcPlan(**{"cutoff": timezone.now(), **fields})
    assert list(excinfo.value.message_dict) == [field]


def test_plan_accepts_its_edges():
    plan = gc.GcPlan(cutoff=timezone.now(), dag_ids=("a",), batch_size=0, sleep=0, max_batches=1, lock_timeout=0.01)
    assert plan.max_batches == 1 and gc.GcPlan(cutoff=timezone.now(), max_batches=None).max_batches is None


@pytest.mark.parametrize("cap", [10_000, 1])
def test_dry_run_json_of_the_command_is_the_api_answer(analysed, client, operator, monkeypatch, cap):
    monkeypatch.setattr(gc.preview, "DRY_RUN_EXACT_CAP", cap)
    if cap == 1:
        snapshot(timezone.now() - timedelta(minutes=5), {"reference": 4})
    cutoff = (timezone.now() - timedelta(seconds=30)).isoformat()
    command = json.loads(clean(dry_run=True, json=True, before=cutoff, dag_id=["reference"])[0])
    client.force_login(operator)
    api = client.get("/api/statestore/v1/gc/dry-run", {"before": cutoff, "dag_id": "reference"}).json()
    age = command.pop("snapshot_age_seconds"), api.pop("snapshot_age_seconds")  # answered a moment apart
    assert command == api and (age[0] is None) == (age[1] is None) == (cap > 1)
    assert (command["outcome"], command["dag_ids"]) == ("dry_run", ["reference"])
    assert command["rows"] == 3 if cap > 1 else command["rows_more_than"] == 1
    assert command["by_dag_source"] == ("exact" if cap > 1 else "snapshot")
    assert [s["key"] for s in command["sample"]] == ["expired", "expired", "minus_60s"]
    # Airflow 3.4's dry run names a row's region and its index there; 3.3's, its map index.
    coordinates = {"region_id", "region_index"} if schema_of(connections["airflow"]).regions else set()
    assert set(command["sample"][0]) == {
        "key", "value", "updated_at", "expires_at", "dag_id", "run_id", "task_id", "map_index", *coordinates
    }  # fmt: skip


def test_dry_run_with_a_custom_backend_counts_nothing(reference, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__BACKEND", "mycompany.state.RedisBackend")
    summary = clean_json(dry_run=True)
    assert (summary["outcome"], summary["rows"], summary["backend_is_metastore"]) == ("skipped", 0, False)
    assert summary["message"].startswith("Nothing would be deleted") and summary["sample"] == []


# The audit trail -------------------------------------------------------------------------------------
def test_a_run_is_one_audit_event_with_counts_not_rows(reference):
    summary = clean_json(batch_size=3, dag_id=["reference"])
    event = AuditEvent.objects.get()
    record = GcRun.objects.get()
    assert (event.action, event.via, event.store, event.status, event.outcome) == ("gc", "gc", "", "done", "done")
    assert event.key_count == 4 and event.dag_id == "reference"
    assert event.os_user and event.host == socket.gethostname() and event.actor.endswith("@" + event.host)
    assert event.user is None and event.finished_at >= event.at
    details = event.details
    assert (details["outcome"], details["rows_deleted"], details["batches"]) == ("completed", 4, 2)
    assert (details["gc_run_id"], details["batch_size"], details["dag_ids"]) == (record.pk, 3, ["reference"])
    assert details["cutoff"] == formatting.iso(record.cutoff) and details["duration_seconds"] >= 0
    assert summary["audit_event_id"] == event.pk
    assert not AuditKey.objects.exists()  # counts, not the rows


def test_a_dry_run_is_not_audited(reference):
    clean(dry_run=True)
    clean(dry_run=True, json=True)
    assert not AuditEvent.objects.exists() and not GcRun.objects.exists()


def test_a_partial_run_is_audited_with_its_outcome(reference):
    clean_json(batch_size=1, max_batches=2)
    event = AuditEvent.objects.get()
    assert (event.details["outcome"], event.key_count, event.details["batches"]) == ("partial", 2, 2)
    assert "--max-batches" in event.details["message"]


def test_a_skipped_run_is_audited(reference, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__BACKEND", "mycompany.state.RedisBackend")
    clean()
    event = AuditEvent.objects.get()
    assert (event.status, event.details["outcome"], event.key_count) == ("done", "skipped", 0)
    assert "custom backend" in event.details["message"]


def test_an_interrupted_run_is_audited(reference):
    interrupter = gc.Interrupter()
    interrupter.request(15)  # SIGTERM before the first batch
    result = gc.run_gc(
        gc.GcPlan(cutoff=timezone.now(), batch_size=1), actor=Actor.command(via="gc"), interrupter=interrupter
    )
    assert result.outcome == "interrupted" and len(keys()) == 9
    event = AuditEvent.objects.get()
    assert (event.details["outcome"], event.key_count, event.details["gc_run_id"]) == (
        "interrupted",
        0,
        result.record.pk,
    )


def test_a_failed_run_is_audited(reference):
    with connections["airflow"].cursor() as cursor:
        cursor.execute("DROP TABLE task_state_store")  # rolled back with the test's transaction
    with pytest.raises(Exception, match="task_state_store"):
        gc.run_gc(gc.GcPlan(cutoff=timezone.now(), batch_size=5), actor=Actor.command(via="gc"))
    event = AuditEvent.objects.get()
    assert (event.status, event.details["outcome"], event.key_count) == ("failed", "failed", 0)
    assert "task_state_store" in event.details["message"]
    assert GcRun.objects.get().outcome == "failed"


@pytest.mark.usefixtures("postgres_only")
def test_a_locked_run_is_audited(reference):
    import psycopg

    db = connections["airflow"].settings_dict
    with psycopg.connect(
        host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname=db["NAME"], autocommit=True
    ) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [gc.ADVISORY_LOCK_KEY])
        result = gc.run_gc(gc.GcPlan(cutoff=timezone.now()), actor=Actor.command(via="gc"))
    assert result.outcome == "locked" and len(keys()) == 9
    event = AuditEvent.objects.get()
    assert (event.status, event.details["outcome"], event.key_count) == ("done", "locked", 0)


def test_gc_events_are_not_restorable(reference):
    clean()
    event = AuditEvent.objects.get()
    with pytest.raises(Invalid, match="not restorable"):
        restores.restore_event(actor=Actor.command(), event_id=event.pk)
    assert keys() == SURVIVORS and AuditEvent.objects.count() == 1


def test_dry_run_lines_name_the_coordinates_as_airflow_does(dag_run_factory, task_key_factory, region_factory):
    """Airflow 3.4's `state-store clean --dry-run` prints region_index where 3.3's printed map_index; a row in a
    loop's iteration is told apart from another iteration's by its region."""
    run = dag_run_factory(dag_id="loops")
    loop = region_factory(run, "refine")
    expansion = region_factory(run, "refine.work", parent=loop, parent_index=1)
    expired = timezone.now() - timedelta(hours=1)
    task_key_factory(run, task_id="refine.work", map_index=0, region_id=expansion.pk, key="k", expires_at=expired)
    task_key_factory(run, task_id="plain", key="p", expires_at=expired - timedelta(minutes=1))
    out, _ = clean("--dry-run")
    assert f"task 'refine.work' region_id {expansion.pk} region_index 0 key 'k'" in out
    assert "task 'plain' region_index -1 key 'p'" in out and "map_index" not in out


def test_dry_run_lines_name_the_map_index_on_airflow_33(reference):
    if schema_of(connections["airflow"]).regions:
        pytest.skip("Airflow 3.3's wording: runs with the default AIRFLOW_FIXTURE_SERIES=3.3")
    out, _ = clean("--dry-run")
    assert "task 'mapped' map_index 0 key 'expired'" in out and "region" not in out
