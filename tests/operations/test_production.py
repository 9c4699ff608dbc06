"""Production: `make serve` in a fresh clone as the README says, static files without a 500, health endpoints."""

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connections
from django.test import override_settings

from tests.conftest import BOTH_DATABASES
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def http(url, headers=None):
    """(status, headers, body) of a GET, whatever the status."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def stop(process, timeout):
    """SIGTERM to the server's process group (make, gunicorn and its workers), SIGKILL if it outlives ``timeout``."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextmanager
def scratch_databases(*names: str):
    """Empty PostgreSQL databases on the shared cluster, dropped afterwards. PostgreSQL unreachable: the test is
    skipped, saying why, except in CI, where it fails."""
    try:
        with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
            for name in names:
                conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        message = f"PostgreSQL is not reachable on 127.0.0.1:5432 (user postgres): {exc}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            for name in names:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- `make serve` in a fresh clone -----------------------------------------------------------------


@pytest.fixture
def postgres_databases():
    """Two empty PostgreSQL databases (the dashboard's, and Airflow's), dropped afterwards."""
    if os.environ.get("STATESTORE_TEST_DB", "sqlite") != "postgres":
        pytest.skip("runs once, in the STATESTORE_TEST_DB=postgres pass (it starts its own server on PostgreSQL)")
    if settings.AIRFLOW_FIXTURE_SERIES != "3.3":
        # Its Airflow database is made by create_airflow_schema in a clean environment (_environment), which
        # gives Airflow 3.3's schema whatever series the run is on: a second run would repeat the first exactly.
        pytest.skip("runs once, on Airflow 3.3's schema: its clean environment makes that schema in every pass")
    base = f"statestore_prod_{uuid.uuid4().hex[:8]}"
    with scratch_databases(base, f"{base}_airflow"):
        yield [
            f"postgres://postgres@127.0.0.1:5432/{base}",
            f"postgresql+psycopg2://postgres@127.0.0.1:5432/{base}_airflow",
        ]


def _environment(tmp_path, **variables):
    """A clean environment: no Django or Airflow variable of the test process, pip's own settings kept."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "XDG_CACHE_HOME")
    env = {name: value for name, value in os.environ.items() if name in keep or name.startswith("PIP_")}
    return {**env, "AIRFLOW_HOME": str(tmp_path / "airflow-home"), **variables}


def test_make_serve_in_a_fresh_clone(tmp_path, postgres_databases):
    """The README's Production section, word for word: clone, `make serve` with the documented environment,
    a superuser and an API token from manage.py; the login page is styled, health answers, the API answers."""
    dashboard_url, airflow_url = postgres_databases
    port = free_port()
    env = _environment(
        tmp_path,
        AIRFLOW_DATABASE_URL=airflow_url,
        DATABASE_URL=dashboard_url,
        SECRET_KEY="production-test-" + uuid.uuid4().hex,
        ALLOWED_HOSTS="127.0.0.1",
        DEBUG="0",
        HOST="127.0.0.1",
        PORT=str(port),
    )
    # Airflow's database as Airflow leaves it (its schema, an asset with a key): not part of the README's steps.
    setup = subprocess.run(
        [sys.executable, "manage.py", "create_airflow_schema"],
        cwd=ROOT,
        env={**env, "STATESTORE_VAR_DIR": str(tmp_path / "setup-var")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert setup.returncode == 0, setup.stderr
    with psycopg.connect(airflow_url.replace("+psycopg2", "")) as conn:
        asset_id = conn.execute(
            'INSERT INTO asset (name, uri, "group", extra, created_at, updated_at) '
            "VALUES ('orders', 's3://bucket/orders', 'asset', '{}', now(), now()) RETURNING id"
        ).fetchone()[0]
        conn.execute("INSERT INTO asset_active (name, uri) VALUES ('orders', 's3://bucket/orders')")
        conn.execute(
            "INSERT INTO asset_state_store (asset_id, key, value, updated_at) VALUES (%s, 'watermark', '42', now())",
            [asset_id],
        )

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    log_path = tmp_path / "serve.log"
    started = time.monotonic()
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            ["make", "serve"], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            assert server.poll() is None, f"make serve exited with {server.returncode}:\n{log_path.read_text()}"
            assert time.monotonic() - started < 600, f"not serving after 10 minutes:\n{log_path.read_text()}"
            # Only once this clone's gunicorn holds the port: until then (pip, migrate, collectstatic) another stage's
            # server may have taken the same free port and answer in its place (CI at 20f9f10).
            if f"Listening at: http://127.0.0.1:{port} " not in log_path.read_text():
                time.sleep(0.5)
                continue
            try:
                if http(f"{base}/healthz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        print(f"make serve in a fresh clone: serving after {time.monotonic() - started:.1f} s")

        status, headers, body = http(f"{base}/healthz")
        assert (status, json.loads(body)) == (200, {"status": "ok"})
        status, headers, body = http(f"{base}/readyz")
        ready = json.loads(body)
        schema = ready.pop("airflow_schema")
        assert (status, ready) == (
            200,
            {
                "status": "ok",
                "databases": {"default": "ok", "airflow": "ok"},
                "cache": {"backend": "database", "status": "ok"},  # shared by the workers, needs nothing more
            },
        ), body
        assert schema["series"] in ("3.3", "3.4") and schema["describe"].startswith("Airflow 3."), body

        status, headers, body = http(f"{base}/login/")
        assert status == 200, body[:2000]
        stylesheet = re.search(rb'<link rel="stylesheet" href="([^"]+)"', body).group(1).decode()
        assert re.fullmatch(r"/static/css/app\.[0-9a-f]{12}\.css", stylesheet), stylesheet  # collected, hashed
        status, headers, css = http(base + stylesheet)
        assert status == 200 and headers["Content-Type"].startswith("text/css") and b"{" in css
        assert "immutable" in headers["Cache-Control"]

        status, headers, body = http(f"{base}/no-such-page/")
        assert status == 404 and b"<html" in body.lower()

        manage = [str(clone / ".venv" / "bin" / "python"), "manage.py"]
        superuser = subprocess.run(
            [*manage, "createsuperuser", "--noinput"],
            cwd=clone,
            env={
                **env,
                "DJANGO_SUPERUSER_USERNAME": "admin",
                "DJANGO_SUPERUSER_EMAIL": "admin@example.com",
                "DJANGO_SUPERUSER_PASSWORD": uuid.uuid4().hex,
            },
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert superuser.returncode == 0, superuser.stderr
        token = subprocess.run(
            [*manage, "create_api_token", "admin", "--name", "production-test"],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert token.returncode == 0, token.stderr
        url = f"{base}/api/v2/assets/{asset_id}/state-store"
        status, headers, body = http(url, {"Authorization": f"Bearer {token.stdout.strip()}"})
        assert status == 200, body
        assert [item["key"] for item in json.loads(body)["asset_state_store"]] == ["watermark"]
        assert http(url)[0] == 401

        # A production install pulls no test tools.
        for module in ("pytest", "playwright", "schemathesis", "ruff", "airflow_client"):
            found = subprocess.run([manage[0], "-c", f"import {module}"], capture_output=True)
            assert found.returncode != 0, f"{module} is installed by make serve"
    finally:
        stop(server, timeout=60)
    log = log_path.read_text()
    assert "Booting worker" in log and '"GET /login/ HTTP/1.1" 200' in log  # gunicorn's access log, on stdout


# --- Static files: never a 500, collected or not ----------------------------------------------------

UNCOLLECTED = {
    "DEBUG": False,
    "STORAGES": {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "statestore_admin.staticfiles.ManifestStaticFilesStorage"},
    },
    "WHITENOISE_USE_FINDERS": True,
}


def test_without_collectstatic_the_login_page_is_styled_and_404_is_404(client, tmp_path):
    """The production storage with an empty STATIC_ROOT (collectstatic never ran): plain URLs, served from the
    source folders, instead of Django's 500 'Missing staticfiles manifest entry'."""
    with override_settings(STATIC_ROOT=tmp_path, **UNCOLLECTED):
        response = client.get("/login/")
        assert response.status_code == 200
        assert b'<link rel="stylesheet" href="/static/css/app.css">' in response.content
        css = client.get("/static/css/app.css")
        assert css.status_code == 200 and css["Content-Type"].startswith("text/css")
        assert b"".join(css.streaming_content)
        missing = client.get("/no-such-page/")
        assert missing.status_code == 404 and b"app.css" in missing.content


@pytest.mark.any_database  # its processes run in a clean environment, on files of their own (tests/conftest.py)
def test_serving_from_the_source_folders_only_until_collectstatic_ran(tmp_path):
    def use_finders(static_root):
        result = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "shell",
                "--no-imports",
                "-c",
                "from django.conf import settings as s; print(s.WHITENOISE_USE_FINDERS, s.DEBUG)",
            ],
            cwd=ROOT,
            env=_environment(tmp_path, STATIC_ROOT=str(static_root), STATESTORE_VAR_DIR=str(tmp_path / "var")),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.split()

    static_root = tmp_path / "static"
    static_root.mkdir()
    assert use_finders(static_root) == ["True", "False"]
    (static_root / "staticfiles.json").write_text('{"paths": {}, "version": "1.1"}')
    assert use_finders(static_root) == ["False", "False"]


@pytest.mark.any_database  # its processes run in a clean environment, on files of their own (tests/conftest.py)
def test_the_dashboard_database_keeps_checked_connections(tmp_path):
    def database(**variables):
        result = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "shell",
                "--no-imports",
                "-c",
                "from django.conf import settings as s; d = s.DATABASES['default']; "
                "print(d['CONN_MAX_AGE'], d['CONN_HEALTH_CHECKS'])",
            ],
            cwd=ROOT,
            env=_environment(tmp_path, STATESTORE_VAR_DIR=str(tmp_path / "var"), **variables),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.split()

    assert database() == ["60", "True"]
    assert database(DATABASE_CONN_MAX_AGE="0") == ["0", "True"]


def test_requirements_split():
    runtime = (ROOT / "requirements.txt").read_text().lower()
    dev = (ROOT / "requirements-dev.txt").read_text().lower()
    assert "gunicorn==" in runtime
    for tool in ("pytest", "playwright", "schemathesis", "ruff", "apache-airflow-client"):
        assert not re.search(rf"^{tool}\b", runtime, re.M), tool
        assert re.search(rf"^{tool}==", dev, re.M), tool
    assert "-r requirements.txt" in dev


# --- Health endpoints -------------------------------------------------------------------------------


def test_healthz_needs_no_login_and_no_database(client):
    """No `db` fixture: pytest-django fails the test if the view touches a database."""
    response = client.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert "no-cache" in response["Cache-Control"]
    assert client.post("/healthz").status_code == 405


def test_health_is_not_redirected_to_https_behind_a_tls_proxy(client):
    """A probe's plain-HTTP request answered with a redirect would count as success."""
    with override_settings(SECURE_SSL_REDIRECT=True):
        assert client.get("/healthz").status_code == 200
        assert client.get("/login/").status_code == 301


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_readyz_answers_when_both_databases_do(client):
    response = client.get("/readyz")
    body = response.json()
    schema = body.pop("airflow_schema")
    assert (response.status_code, body) == (
        200,
        {
            "status": "ok",
            "databases": {"default": "ok", "airflow": "ok"},
            "cache": {"backend": "database", "status": "ok"},
        },
    )
    series = settings.AIRFLOW_FIXTURE_SERIES  # the test database's Airflow schema
    assert schema["series"] == series and schema["regions"] == (series == "3.4")
    assert schema["revision"] == {"3.3": "d2f4e1b3c5a7", "3.4": "9cffe90fa0c0"}[series]
    assert schema["describe"].startswith(f"Airflow {series}")


@pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True)
def test_readyz_is_not_ready_on_a_schema_it_does_not_support(client, committed_airflow_tables):
    """A column that neither Airflow 3.3 nor 3.4 has in a state table (a future Airflow): 503, naming it."""
    with connections["airflow"].cursor() as cursor:
        cursor.execute("ALTER TABLE task_state_store ADD COLUMN future_flag integer")
    try:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert "task_state_store has unknown columns future_flag" in response.json()["airflow_schema"]["unsupported"]
    finally:
        with connections["airflow"].cursor() as cursor:
            cursor.execute("ALTER TABLE task_state_store DROP COLUMN future_flag")


def _airflow_settings(monkeypatch, **changes):
    """The settings `airflow` resolves to from now on (the live connection of the test keeps its own)."""
    monkeypatch.setitem(connections.settings, "airflow", {**connections.settings["airflow"], "OPTIONS": {}, **changes})


def _postgresql(port):
    return dict(ENGINE="django.db.backends.postgresql", NAME="airflow", USER="postgres", HOST="127.0.0.1", PORT=port)


@pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True)
def test_readyz_reads_the_schema_while_a_writer_holds_airflows_sqlite_lock(client):
    """Airflow writing (its SQLite file's write lock held) does not keep /readyz past its deadline: the schema is
    read without a transaction (Django's column introspection opened one, IMMEDIATE on Airflow's alias, and waited
    for the lock for the alias's whole 20 s busy timeout), and the probe's lock wait is its own 2 s at most."""
    airflow = connections["airflow"]
    if airflow.vendor != "sqlite":
        pytest.skip("SQLite's file lock: runs in the STATESTORE_TEST_DB=sqlite pass")
    writer = sqlite3.connect(airflow.settings_dict["NAME"], isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE dag_run SET state = state")
        started = time.monotonic()
        response = client.get("/readyz")
        elapsed = time.monotonic() - started
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert response.status_code == 200, response.json()
    assert response.json()["airflow_schema"]["series"] == settings.AIRFLOW_FIXTURE_SERIES
    assert elapsed < 6, elapsed


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_readyz_names_the_database_that_refuses(client, monkeypatch):
    port = free_port()  # nothing listens there
    _airflow_settings(monkeypatch, **_postgresql(port))
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "databases": {"default": "ok", "airflow": "connection refused"},
        "cache": {"backend": "database", "status": "ok"},
    }
    assert str(port) not in response.content.decode() and "127.0.0.1" not in response.content.decode()


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_readyz_gives_up_after_two_seconds_on_a_server_that_never_answers(client, monkeypatch):
    """A socket that accepts connections (the kernel completes them) and never says a word."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        _airflow_settings(monkeypatch, **_postgresql(silent.getsockname()[1]))
        started = time.monotonic()
        response = client.get("/readyz")
        elapsed = time.monotonic() - started
    assert response.status_code == 503
    assert response.json()["databases"] == {"default": "ok", "airflow": "timeout after 2s"}
    assert 1.9 < elapsed < 6, elapsed


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_readyz_reports_a_missing_sqlite_file_without_creating_it(client, monkeypatch, tmp_path):
    missing = tmp_path / "airflow.sqlite3"
    _airflow_settings(monkeypatch, ENGINE="django.db.backends.sqlite3", NAME=str(missing))
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["databases"]["airflow"] == "database file cannot be opened"
    assert not missing.exists()
