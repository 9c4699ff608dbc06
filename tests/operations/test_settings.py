"""The settings module as an operator meets it: in a fresh process, configured by the environment only."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from statestore_admin.airflow.schema import fixture_sql

ROOT = Path(__file__).resolve().parents[2]

# Each test builds its processes' whole environment: they run the same in every pass (tests/conftest.py).
pytestmark = pytest.mark.any_database


def run_manage(*args, env, cwd=ROOT, timeout=120):
    """``manage.py`` in a fresh process whose environment is ``env`` (with its own HOME) and PATH only."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=cwd,
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_secret_key_is_required_with_a_dashboard_database_url(tmp_path):
    result = run_manage(
        "check",
        env={"HOME": str(tmp_path), "DATABASE_URL": "postgres://u@127.0.0.1/x", "STATESTORE_VAR_DIR": str(tmp_path)},
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DATABASE_URL is set" in result.stderr


def test_embedded_mode_generates_a_private_secret_key_once(tmp_path):
    """Nothing configured: the demo's files, its key in var/demo/ (a dashboard on a real Airflow has its own)."""
    env = {"STATESTORE_VAR_DIR": str(tmp_path / "var")}
    first = run_manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings; print(settings.SECRET_KEY)",
        env={"HOME": str(tmp_path), **env},
    )
    second = run_manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings; print(settings.SECRET_KEY)",
        env={"HOME": str(tmp_path), **env},
    )
    assert first.returncode == 0, first.stderr
    key = first.stdout.strip()
    assert len(key) >= 50 and key == second.stdout.strip()
    assert (tmp_path / "var" / "demo" / "secret_key").stat().st_mode & 0o077 == 0


def test_how_long_a_sign_in_lasts_is_the_operators(tmp_path):
    """SESSION_COOKIE_AGE: with single sign-on, also how long a group lost at the provider still counts."""
    result = run_manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings; print(settings.SESSION_COOKIE_AGE)",
        env={"HOME": str(tmp_path), "STATESTORE_VAR_DIR": str(tmp_path / "var"), "SESSION_COOKIE_AGE": "3600"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "3600"


def test_debug_is_off_by_default(tmp_path):
    result = run_manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings; print(settings.DEBUG)",
        env={"HOME": str(tmp_path), "STATESTORE_VAR_DIR": str(tmp_path)},
    )
    assert result.stdout.strip() == "False", result.stderr


@pytest.fixture
def airflow_postgres_database():
    """A PostgreSQL database made from Airflow 3.3.2's `airflow db migrate` DDL, dropped afterwards."""
    name = f"statestore_plain_{uuid.uuid4().hex[:8]}"
    admin = "postgresql://postgres@127.0.0.1:5432/postgres"
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL is not reachable on 127.0.0.1:5432: {exc}")
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{name}") as conn:
        conn.execute(fixture_sql("postgresql"))
        conn.execute(
            "INSERT INTO dag_run (dag_id, run_id, run_type, run_after) VALUES ('d', 'r', 'manual', now());"
            "INSERT INTO task_state_store (dag_run_id, task_id, key, dag_id, run_id, value, updated_at) "
            "SELECT id, 't', k, 'd', 'r', '1', now() FROM dag_run, (VALUES ('a'), ('b')) AS keys(k);"
        )
    yield f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_airflow_database_url_alone_is_enough(tmp_path, airflow_postgres_database):
    """Only AIRFLOW_DATABASE_URL: the dashboard checks the database and reads its state tables."""
    env = {"HOME": str(tmp_path), "AIRFLOW_DATABASE_URL": airflow_postgres_database}
    check = run_manage("check", env=dict(env))
    assert check.returncode == 0, check.stderr
    # The one issue is the Info naming Airflow's schema: nothing else to report.
    assert "identified 1 issue" in check.stderr and "statestore.I001" in check.stderr, check.stderr
    counts = run_manage(
        "shell",
        "--no-imports",
        "-c",
        "from statestore_admin.state.selectors import store_totals as s; "
        "from statestore_admin.access.scopes import EVERYTHING; "
        "t = s(EVERYTHING); print(t.task_keys, t.asset_keys)",
        env=dict(env),
    )
    assert counts.stdout.strip() == "2 0", counts.stderr


def test_demo_setup_creates_the_demo_once_and_keeps_changes(tmp_path):
    """What `make run` does before starting the server, twice, with a key deleted in between."""
    import sqlite3

    env = {"HOME": str(tmp_path), "STATESTORE_DEMO": "1", "STATESTORE_VAR_DIR": str(tmp_path / "var")}
    assert run_manage("migrate", "--noinput", env=dict(env)).returncode == 0
    first = run_manage("demo_setup", env=dict(env))
    assert first.returncode == 0, first.stderr
    assert "Demo data:" in first.stdout and "login: demo / " in first.stdout
    assert (
        "demo-viewer (Viewer), demo-etl (Operator, scoped to DAGs etl_* and assets s3://warehouse/raw/*)"
        in first.stdout
    )
    password = first.stdout.split("login: demo / ")[1].split()[0]
    scoped = run_manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.contrib.auth.models import User; from statestore_admin.access.scopes import scope_of; "
        "u = User.objects.get(username='demo-etl'); "
        f"print(sorted(g.name for g in u.groups.all()), scope_of(u).describe(), u.check_password({password!r}))",
        env=dict(env),
    )
    assert scoped.stdout.strip() == (
        "['Operator', 'demo accounts', 'demo-team-etl'] DAGs etl_*; assets s3://warehouse/raw/* True"
    ), scoped.stderr
    db = sqlite3.connect(tmp_path / "var" / "demo" / "airflow.sqlite3")
    total = db.execute("SELECT count(*) FROM task_state_store").fetchone()[0]
    assert total >= 40
    db.execute("DELETE FROM task_state_store WHERE key = 'job_id'")
    db.commit()
    second = run_manage("demo_setup", env=dict(env))
    assert second.returncode == 0 and "Keeping the existing demo database" in second.stdout
    assert f"login: demo / {password}" in second.stdout
    assert db.execute("SELECT count(*) FROM task_state_store").fetchone()[0] == total - 3  # one job_id per run
    db.close()


def test_commands_print_only_their_own_output(tmp_path):
    """A scheduled state_store_clean mails what it prints: django-axes' start-up line ("AXES: BEGIN version …")
    is not among it, on stdout or stderr (issue 24)."""
    env = {"HOME": str(tmp_path), "STATESTORE_DEMO": "1", "STATESTORE_VAR_DIR": str(tmp_path / "var")}
    assert run_manage("migrate", "--noinput", "--verbosity", "0", env=dict(env)).returncode == 0
    assert run_manage("create_airflow_schema", env=dict(env)).returncode == 0
    clean = run_manage("state_store_clean", "--dry-run", env=dict(env))
    assert clean.returncode == 0, clean.stderr
    assert "AXES" not in clean.stderr + clean.stdout and clean.stderr == "", clean.stderr
    assert clean.stdout.strip()  # its own report
