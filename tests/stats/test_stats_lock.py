"""One statistics snapshot at a time across processes and servers (stats.take_snapshot, locks.py): while one
is being taken, another command, page or GC run anywhere says so and records nothing. PostgreSQL only (the
lock lives in Airflow's database; SQLite is one host's file)."""

import json
import subprocess
import sys

import psycopg
import pytest

from statestore_admin.access.actors import Actor
from statestore_admin.records.models import StatsSnapshot
from statestore_admin.stats import snapshots as stats
from tests.conftest import BOTH_DATABASES
from tests.gc.test_gc_concurrency import ROOT, libpq_url, manage, manage_env

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables", "postgres_only"),
]


def state_store_stats():
    return subprocess.run(
        [sys.executable, "manage.py", "state_store_stats"],
        cwd=ROOT,
        env=manage_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_second_snapshot_while_one_is_taken_says_so_and_records_nothing():
    with psycopg.connect(libpq_url(), autocommit=True) as other:  # a snapshot under way, elsewhere
        other.execute("SELECT pg_advisory_lock(%s)", [stats.SNAPSHOT_LOCK_KEY])
        second = state_store_stats()
        with pytest.raises(stats.SnapshotInProgress, match="Another statistics snapshot is being taken"):
            stats.take_snapshot(trigger="page", actor=Actor.command())
    assert second.returncode == 3, second.stderr
    assert "Another statistics snapshot is being taken (database session pid" in second.stderr
    assert not StatsSnapshot.objects.exists()

    done = state_store_stats()  # the other one ended: its lock went with its session
    assert done.returncode == 0, done.stderr
    assert list(StatsSnapshot.objects.values_list("status", flat=True)) == ["done"]


def test_gc_while_a_snapshot_is_taken_runs_and_says_it_took_none():
    with psycopg.connect(libpq_url(), autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [stats.SNAPSHOT_LOCK_KEY])
        clean = manage("--json")
        out, err = clean.communicate(timeout=120)
    assert clean.returncode == 0, err  # GC's own outcome is unchanged
    result = json.loads(out)
    assert result["outcome"] == "completed"
    assert result["stats"]["status"] == "skipped" and "Another statistics snapshot" in result["stats"]["error"]
    assert "No statistics snapshot after this run (the GC run itself is done)" in err
    assert not StatsSnapshot.objects.exists()
