"""The compat stage's harness: real Airflow (3.3.2 and 3.4.0b2, each in its own virtualenv), and the
dashboard as operators run it.

Both sides are separate processes. Airflow writes state through its own task SDK (`airflow dags test`)
and its own ``MetastoreBackend`` into a "golden" PostgreSQL database, one per Airflow version; every test
works on copies of it (``CREATE DATABASE … TEMPLATE``). The dashboard is configured only through an
``AIRFLOW_HOME`` whose ``airflow.cfg`` names the database, as on a host that runs Airflow.

The versions are the pins of ``scripts/airflow_versions``: ``airflow``/``golden`` are the 3.3 pin's (the
DAGs of ``dags/``), ``airflow34``/``golden34`` the 3.4 pin's (the DAGs of ``dags34/``, which write inside
loops and mapped task groups); ``side_of(request, version)`` gives either pair to a test parametrized by
version.
"""

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import requests

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SERVER = "postgresql://postgres@127.0.0.1:5432"
# The PostgreSQL server may be shared: COMPAT_DB_PREFIX gives one person's databases names of their own.
PREFIX = f"{os.environ.get('COMPAT_DB_PREFIX', 'ssa_compat')}_{uuid.uuid4().hex[:6]}"
DAG_ID = "compat_state_store"
DAG_ID_34 = "compat_regions"
# One pin per line; moving a pin there moves the stage with it.
VERSIONS = (ROOT / "scripts" / "airflow_versions").read_text().split()
AIRFLOW_33 = next(v for v in VERSIONS if v.startswith("3.3."))
AIRFLOW_34 = next(v for v in VERSIONS if v.startswith("3.4."))


def admin(sql: str) -> None:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def query(db: str, sql: str, params=()) -> list[tuple]:
    with psycopg.connect(f"{SERVER}/{db}") as conn:
        return conn.execute(sql, params).fetchall()


def wait_for(url: str, process: subprocess.Popen, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with {process.returncode}")
        try:
            requests.get(url, timeout=2)
            return
        except requests.RequestException:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {seconds}s")


def airflow_venv(version: str) -> Path:
    """The virtualenv of one pinned Airflow version (made once by scripts/airflow_venv.sh, then reused)."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "airflow_venv.sh"), version], capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/airflow_venv.sh {version} failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip())


class AirflowSide:
    def __init__(self, venv: Path, workdir: Path, version: str = AIRFLOW_33, dags: Path = HERE / "dags"):
        self.venv, self.workdir, self.version, self.dags = venv, workdir, version, dags
        self.series = ".".join(version.split(".")[:2])
        # Each version's databases have names of their own (3.3's keep the names they always had).
        self.prefix = PREFIX if self.series == "3.3" else f"{PREFIX}_{self.series.replace('.', '')}"
        self.databases: list[str] = []
        self.extra_cfg: dict[str, str] = {}  # database -> more airflow.cfg sections (copies inherit them)

    def home(self, db: str) -> Path:
        """An AIRFLOW_HOME whose airflow.cfg points at ``db`` (the dashboard reads the same file)."""
        home = self.workdir / f"home-{db}"
        home.mkdir(exist_ok=True)
        (home / "airflow.cfg").write_text(
            "[database]\n"
            f"sql_alchemy_conn = postgresql+psycopg2://postgres@127.0.0.1:5432/{db}\n"
            "[core]\n"
            "load_examples = False\n"
            f"dags_folder = {self.dags}\n"
            "auth_manager = airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager\n"
            "simple_auth_manager_all_admins = True\n" + self.extra_cfg.get(db, "")
        )
        return home

    def env(self, db: str, **extra: str) -> dict[str, str]:
        return {
            "PATH": os.environ["PATH"],
            "HOME": str(self.workdir),
            "AIRFLOW_HOME": str(self.home(db)),
            "PYTHONPATH": str(HERE),
            **extra,
        }

    def run(self, db: str, *args: str, **extra: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [str(self.venv / "bin" / "airflow"), *args],
            env=self.env(db, **extra),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done

    def python(self, db: str, *args: str) -> dict:
        done = subprocess.run(
            [str(self.venv / "bin" / "python"), str(HERE / "airflow_side.py"), *args],
            env=self.env(db),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"airflow_side.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}

    def copy(self, golden: str, name: str) -> str:
        db = f"{self.prefix}_{name}"
        admin(f'DROP DATABASE IF EXISTS "{db}"')
        admin(f'CREATE DATABASE "{db}" TEMPLATE "{golden}"')
        self.databases.append(db)
        if golden in self.extra_cfg:
            self.extra_cfg[db] = self.extra_cfg[golden]
        return db

    def api_server(self, db: str, **extra: str) -> tuple[subprocess.Popen, str]:
        """``airflow api-server`` on ``db``; ``extra``: more environment (Airflow's options)."""
        port = free_port()
        process = subprocess.Popen(
            [str(self.venv / "bin" / "airflow"), "api-server", "--host", "127.0.0.1", "--port", str(port)],
            env=self.env(db, **extra),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        wait_for(f"{url}/api/v2/version", process)
        return process, url


def _copy_sqlite(source: Path, target: Path) -> None:
    """SQLite's own backup: whole, whatever the journal mode left beside the file."""
    with contextlib.closing(sqlite3.connect(source)) as read, contextlib.closing(sqlite3.connect(target)) as write:
        read.backup(write)


class Dashboard:
    """statestore-admin as an operator runs it: its own var/ folder, Airflow's AIRFLOW_HOME, nothing else."""

    # What an operator's first steps leave, the same for every dashboard of a run: the first dashboard set up
    # runs them (migrate, collectstatic, a superuser, an API token); every dashboard after it starts from a copy
    # of that database and serves those static files (STATIC_ROOT). Its own database depends on no Airflow table,
    # and the commands it then runs check each Airflow database themselves (the system checks of every command).
    # Running them in every test was over a third of the stage's CPU (docs/testing.md).
    prepared: "tuple[Path, Path, str] | None" = None  # the database, the static files, the token

    def __init__(self, airflow: AirflowSide, db: str):
        self.airflow, self.db = airflow, db
        self.var = Path(tempfile.mkdtemp(prefix="ssa-compat-var-", dir=airflow.workdir))
        self.static_root: Path | None = None  # var/static, the default, until set up

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PATH": os.environ["PATH"],
            "HOME": str(self.airflow.workdir),
            "AIRFLOW_HOME": str(self.airflow.home(self.db)),
            "STATESTORE_VAR_DIR": str(self.var),
            **({"STATIC_ROOT": str(self.static_root)} if self.static_root else {}),
            **extra,
        }

    def manage(self, *args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=600,
        )

    def _first_steps(self) -> str:
        """An operator's first steps, by the commands the README gives."""
        for command in (("migrate", "--noinput"), ("collectstatic", "--noinput")):
            done = self.manage(*command)
            assert done.returncode == 0, done.stderr
        done = self.manage(
            "shell",
            "--no-imports",
            "-c",
            "from django.contrib.auth import get_user_model; "
            "get_user_model().objects.create_superuser('compat', password='compat-pw-1')",
        )
        assert done.returncode == 0, done.stderr
        token = self.manage("create_api_token", "compat").stdout.strip()
        assert token.startswith("ssa_")
        return token

    def setup(self) -> str:
        """Its own tables, static files, a superuser (compat, compat-pw-1) and an API token (returned)."""
        database = self.var / "dashboard.sqlite3"
        if Dashboard.prepared is None:
            token = self._first_steps()
            assert database.is_file(), sorted(path.name for path in self.var.iterdir())
            kept = Path(tempfile.mkdtemp(prefix="ssa-compat-prepared-", dir=self.airflow.workdir)) / database.name
            _copy_sqlite(database, kept)
            Dashboard.prepared = (kept, self.var / "static", token)
        kept, static, token = Dashboard.prepared
        if not database.exists():
            _copy_sqlite(kept, database)
        self.static_root = static
        return token

    def migrate(self) -> "Dashboard":
        """Its own tables, for a command run alone (the same set-up: a copy once the first is made)."""
        self.setup()
        return self

    def server(self, **extra: str) -> tuple[subprocess.Popen, str]:
        """``runserver`` with the dashboard's environment, plus ``extra`` variables (its own settings)."""
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
            cwd=ROOT,
            env=self.env(**extra),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        wait_for(f"{url}/login/", process)
        return process, url


def _side(tmp_path_factory, version: str, dags: Path):
    side = AirflowSide(airflow_venv(version), tmp_path_factory.mktemp(f"airflow-{version}"), version, dags)
    yield side
    for db in side.databases:
        admin(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def _new_golden(side: AirflowSide) -> str:
    db = f"{side.prefix}_golden"
    admin(f'DROP DATABASE IF EXISTS "{db}"')
    admin(f'CREATE DATABASE "{db}"')
    side.databases.append(db)
    side.run(db, "db", "migrate")
    return db


@pytest.fixture(scope="session")
def airflow(tmp_path_factory):
    """Airflow 3.3 (the pin of scripts/airflow_versions) with the DAGs of dags/."""
    yield from _side(tmp_path_factory, AIRFLOW_33, HERE / "dags")


@pytest.fixture(scope="session")
def golden(airflow):
    """Airflow's schema by `airflow db migrate`, state by `airflow dags test` and by MetastoreBackend."""
    db = _new_golden(airflow)
    airflow.run(db, "dags", "test", DAG_ID)
    run_id = query(db, "SELECT run_id FROM dag_run WHERE dag_id = %s", [DAG_ID])[0][0]
    asset_id = query(db, "SELECT id FROM asset WHERE name = 'compat_orders'")[0][0]
    airflow.python(db, "write-metastore", DAG_ID, run_id, str(asset_id))
    return {"db": db, "run_id": run_id, "asset_id": asset_id, "dag_id": DAG_ID}


@pytest.fixture(scope="session")
def airflow34(tmp_path_factory):
    """Airflow 3.4 (the pin of scripts/airflow_versions) with the DAGs of dags34/."""
    yield from _side(tmp_path_factory, AIRFLOW_34, HERE / "dags34")


@pytest.fixture(scope="session")
def golden34(airflow34):
    """Airflow 3.4's schema by `airflow db migrate`; state written by task SDK 1.4 inside a loop, a mapped
    task in a loop, a mapped task group and to an asset (`airflow dags test compat_regions`, which runs
    loops: each iteration's task instances are created as the previous one ends)."""
    db = _new_golden(airflow34)
    airflow34.run(db, "dags", "test", DAG_ID_34)
    run_id = query(db, "SELECT run_id FROM dag_run WHERE dag_id = %s", [DAG_ID_34])[0][0]
    asset_id = query(db, "SELECT id FROM asset WHERE name = 'compat_regions_orders'")[0][0]
    return {"db": db, "run_id": run_id, "asset_id": asset_id, "dag_id": DAG_ID_34}


def side_of(request, version: str) -> tuple[AirflowSide, dict]:
    """(side, golden) of one pinned version, for a test parametrized by version."""
    if version == AIRFLOW_33:
        return request.getfixturevalue("airflow"), request.getfixturevalue("golden")
    return request.getfixturevalue("airflow34"), request.getfixturevalue("golden34")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture
def servers():
    """Processes started by a test, stopped after it."""
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        stop(process)


TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def normalised(body):
    """A JSON body with every `updated_at` / `expires_at` timestamp replaced by "<ts>" (None kept)."""
    if isinstance(body, dict):
        return {
            k: (
                "<ts>"
                if k in ("updated_at", "expires_at") and isinstance(v, str) and TIMESTAMP.match(v)
                else normalised(v)
            )
            for k, v in body.items()
        }
    if isinstance(body, list):
        return [normalised(v) for v in body]
    return body
