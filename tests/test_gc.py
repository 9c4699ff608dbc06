"""`manage.py state_store_clean`: Airflow's GC rules, and its operational behaviour."""

import io
import json
import sys
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from statestore_admin.airflow.demo import load_scale_data
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.state.models import GcRun

from .conftest import BOTH_DATABASES

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


@pytest.mark.parametrize(("batch_size", "batches"), [(0, 1), (1, 5), (3, 2), (100, 1)])
def test_reference_scenario(reference, batch_size, batches):
    summary = clean_json(batch_size=batch_size)
    assert keys() == SURVIVORS
    assert AssetStateStore.objects.count() == 2
    assert (summary["rows_deleted"], summary["batches"], summary["outcome"]) == (4, batches, "completed")


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
        ("2026-01-01T00:00:00", "no time zone"),
        ("yesterday", "not a date and time"),
    ],
)
def test_bad_cutoffs_are_refused_and_change_nothing(reference, before, message):
    with pytest.raises(CommandError, match=message) as excinfo:
        clean(before=before)
    assert excinfo.value.returncode == 2
    assert len(keys()) == 9
    assert not GcRun.objects.exists()


@pytest.mark.parametrize("options", [{"batch_size": -1}, {"max_batches": 0}, {"sleep": -1}])
def test_bad_numbers_are_refused(reference, options):
    with pytest.raises(CommandError):
        clean(**options)
    assert len(keys()) == 9


def test_dry_run_is_bounded_and_deletes_nothing(reference):
    load_scale_data(100_000, expired_fraction=1.0)
    out, _ = clean(dry_run=True)
    lines = out.splitlines()
    assert len(lines) <= 4 + 10 + 1 + 5 + 1
    assert lines[0].startswith("Dry run: 100004 task state row(s) expired before")
    assert "scale_test" in out and "reference" in out
    assert TaskStateStore.objects.count() == 100_009
    assert not GcRun.objects.exists()
    summary = json.loads(clean(dry_run=True, json=True, top=1)[0])
    assert summary["rows"] == 100_004 and len(summary["by_dag"]) == 1 and len(summary["sample"]) == 5
    assert summary["by_dag"][0] == {"dag_id": "scale_test", "rows": 100_000}


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
    assert lines[-1].startswith("Deleted 4 expired task state row(s) in 3 batch(es)")


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
