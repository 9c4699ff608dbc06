"""No demo account outside the demo (issue 24), tried as a newcomer would, in a fresh clone: `make run`, then the
README's "real Airflow database" steps. The demo's password does not sign in there; a dashboard database that
already holds the demo's accounts (as every demo made them before var/demo/) stops `make serve` and gunicorn.

Runs once, in the STATESTORE_TEST_DB=postgres pass, like test_production.py's fresh clone: it installs the runtime
requirements into the clone and starts its own servers."""

import os
import re
import shutil
import subprocess
import sys
import time
import uuid

import pytest
import requests

from tests.operations.test_production import ROOT, _environment, scratch_databases, stop
from tests.ports import free_port

SUPERUSER_PASSWORD = "real-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def airflow_database():
    """A PostgreSQL database with Airflow's schema, as a real deployment's Airflow leaves it; dropped afterwards."""
    if os.environ.get("STATESTORE_TEST_DB", "sqlite") != "postgres":
        pytest.skip("runs once, in the STATESTORE_TEST_DB=postgres pass (a fresh clone with servers of its own)")
    name = f"statestore_demo_guard_af_{uuid.uuid4().hex[:8]}"
    with scratch_databases(name):
        yield f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"


@pytest.fixture(scope="module")
def after_make_run(tmp_path_factory, airflow_database):
    """A fresh clone after `make run` (started, its printed password read, stopped), and the environment of the
    README's real-database steps: `export AIRFLOW_DATABASE_URL=...`. Airflow's schema in that database is not
    one of the README's steps (Airflow made it)."""
    tmp_path = tmp_path_factory.mktemp("demo-accounts")
    setup = subprocess.run(
        [sys.executable, "manage.py", "create_airflow_schema"],
        cwd=ROOT,
        env=_environment(tmp_path, AIRFLOW_DATABASE_URL=airflow_database, STATESTORE_VAR_DIR=str(tmp_path / "setup")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert setup.returncode == 0, setup.stderr
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)

    port = free_port()
    log_path = tmp_path / "make-run.log"
    with open(log_path, "w") as log:
        demo = subprocess.Popen(
            ["make", "run", f"PORT={port}"],
            cwd=clone,
            env=_environment(tmp_path),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        started = time.monotonic()
        while not (found := re.search(r"login: demo / (\S+)", log_path.read_text())) or not _answers(port):
            assert demo.poll() is None, f"make run exited with {demo.returncode}:\n{log_path.read_text()}"
            assert time.monotonic() - started < 600, f"make run not serving after 10 minutes:\n{log_path.read_text()}"
            time.sleep(0.5)
    finally:
        stop(demo, timeout=30)
    password = found.group(1)
    assert (clone / "var" / "demo" / "demo_password").read_text().strip() == password
    return clone, password, _environment(tmp_path, AIRFLOW_DATABASE_URL=airflow_database)


def _answers(port) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/login/", timeout=5).status_code == 200
    except requests.RequestException:
        return False


def manage(clone, *args, env):
    return subprocess.run(
        [str(clone / ".venv" / "bin" / "python"), "manage.py", *args],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def sign_in(base, username, password) -> bool:
    """Whether the login form lets ``username`` in: Django answers a refused sign-in with the form again."""
    session = requests.Session()
    form = session.get(f"{base}/login/", timeout=30)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
    answer = session.post(
        f"{base}/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": csrf},
        headers={"Referer": f"{base}/login/"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text[:500]
    return "/login/" not in answer.url


def serve(clone, env, log_path):
    with open(log_path, "w") as log:
        return subprocess.Popen(
            ["make", "serve"], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def test_after_make_run_the_readmes_real_database_steps_do_not_let_the_demo_password_in(after_make_run, tmp_path):
    clone, password, env = after_make_run
    env = {**env, "PORT": str(free_port()), "WEB_CONCURRENCY": "2"}
    assert manage(clone, "check", env=env).returncode == 0
    migrate = manage(clone, "migrate", env=env)
    assert migrate.returncode == 0, migrate.stderr
    superuser = manage(
        clone,
        "createsuperuser",
        "--noinput",
        env={**env, "DJANGO_SUPERUSER_USERNAME": "admin", "DJANGO_SUPERUSER_EMAIL": "admin@example.com"}
        | {"DJANGO_SUPERUSER_PASSWORD": SUPERUSER_PASSWORD},
    )
    assert superuser.returncode == 0, superuser.stderr
    log_path = tmp_path / "serve.log"
    server = serve(clone, env, log_path)
    base = f"http://127.0.0.1:{env['PORT']}"
    try:
        started = time.monotonic()
        while not _answers(int(env["PORT"])):
            assert server.poll() is None, f"make serve exited with {server.returncode}:\n{log_path.read_text()}"
            assert time.monotonic() - started < 300, f"make serve not serving:\n{log_path.read_text()}"
            time.sleep(0.5)
        for username in ("demo", "demo-etl", "demo-viewer"):
            assert not sign_in(base, username, password), username
        assert sign_in(base, "admin", SUPERUSER_PASSWORD)
    finally:
        stop(server, timeout=60)
    # The deployment's database is var/dashboard.sqlite3; the demo's stays whole in var/demo/.
    assert (clone / "var" / "dashboard.sqlite3").exists()
    assert (clone / "var" / "demo" / "dashboard.sqlite3").exists()


def test_the_demos_accounts_in_the_deployments_database_stop_make_serve_and_gunicorn(after_make_run, tmp_path):
    """A demo made before var/demo/ existed left its accounts in var/dashboard.sqlite3, which the README's steps
    then reuse: simulated with the demo's database copied there (in a var/ of the test's own)."""
    clone, _, env = after_make_run
    var = tmp_path / "var"
    var.mkdir()
    shutil.copy(clone / "var" / "demo" / "dashboard.sqlite3", var / "dashboard.sqlite3")
    env = {**env, "STATESTORE_VAR_DIR": str(var), "PORT": str(free_port()), "WEB_CONCURRENCY": "1"}

    server = serve(clone, env, tmp_path / "serve.log")
    try:
        assert server.wait(timeout=300) != 0
    finally:
        stop(server, timeout=30)
    log = (tmp_path / "serve.log").read_text()
    assert "statestore.E050" in log and "(demo, demo-etl, demo-viewer)" in log, log
    assert "manage.py remove_demo_accounts" in log
    assert "Booting worker" not in log  # stopped at migrate's checks

    # gunicorn started without `make serve` (no migrate before it): its worker does not start either.
    gunicorn = subprocess.run(
        [str(clone / ".venv" / "bin" / "gunicorn"), "--config", "gunicorn.conf.py"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert gunicorn.returncode != 0
    assert "Worker failed to boot" in gunicorn.stderr and "(demo, demo-etl, demo-viewer)" in gunicorn.stderr
    assert not _answers(int(env["PORT"]))

    removed = manage(clone, "remove_demo_accounts", env=env)
    assert removed.returncode == 0, removed.stderr
    assert "Deleted the demo's accounts demo, demo-etl, demo-viewer" in removed.stdout
    assert manage(clone, "check", env=env).returncode == 0
