"""A SQLite dashboard database (the embedded default, or ``DATABASE_URL=sqlite:///…``) runs in SQLite's
write-ahead log, so the workers of `make serve` read it while one of them writes (sessions, the tokens' last
use, the audit trail, the shared cache), and a writer waits its turn (20 s) instead of failing."""

import sqlite3
import subprocess
import sys
import uuid

import pytest

from tests.operations.test_production import ROOT, _environment

SHOW = (
    "from django.db import connection\n"
    "with connection.cursor() as cursor:\n"
    "    cursor.execute('PRAGMA journal_mode')\n"
    "    print(cursor.fetchone()[0], connection.transaction_mode)\n"
)


@pytest.mark.any_database  # SQLite files in a clean environment, whatever the pass (tests/conftest.py)
@pytest.mark.parametrize("configured", ["embedded", "url"])
def test_the_dashboards_sqlite_database_runs_in_wal(tmp_path, configured):
    env = _environment(tmp_path, STATESTORE_VAR_DIR=str(tmp_path / "var"), SECRET_KEY=uuid.uuid4().hex)
    path = None  # the embedded file: var/dashboard.sqlite3, or var/demo/ beside an embedded Airflow database
    if configured == "url":
        path = tmp_path / "elsewhere.sqlite3"
        env["DATABASE_URL"] = f"sqlite:///{path}"
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", SHOW],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["wal", "None"]  # deferred: a read-only atomic block takes no write lock
    (path,) = [path] if path else (tmp_path / "var").rglob("dashboard.sqlite3")
    with sqlite3.connect(path) as connection:  # the mode is the file's own: any process that opens it gets it
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
