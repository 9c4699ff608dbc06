"""Honest failure when Airflow's database is slow, hung or down (docs/operations.md), with real faults.

A TCP proxy (``tests/faults.py``) in front of the PostgreSQL test server black-holes or refuses the Airflow
alias's connections mid-session; a private PostgreSQL cluster on a port of its own is stopped outright.
Pages answer the 503 page, htmx a line of text, the API 503 JSON in Airflow's shape, each within the
deadline; requests that do not need Airflow's database answer meanwhile; once the database is back,
everything answers 200 again without a restart. PostgreSQL only (the STATESTORE_TEST_DB=postgres pass),
except the settings checks at the end.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
import requests
from django.core.signals import request_finished, request_started
from django.db import connections
from django.db.utils import ConnectionHandler

from statestore_admin.airflow.availability import AirflowDatabaseUnavailable, query_timeout
from statestore_admin.airflow.dburl import sqlalchemy_url_to_django, with_timeouts
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES
from tests.faults import TcpProxy
from tests.ports import free_port

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True)

CONNECT_TIMEOUT = 2  # libpq's minimum
QUERY_TIMEOUT = 3.0
MARGIN = 2.0  # scheduling, Django, the proxy's polling
BASE_DIR = Path(__file__).resolve().parents[2]
PG_BIN = Path("/usr/lib/postgresql/15/bin")

PAGE = "/"  # the overview: counts over both state tables
API = "/api/statestore/v1/stats"
TASKS = "/api/v2/dags/etl/dagRuns/manual__faults/taskInstances/t/state-store"
NOT_AIRFLOW = ["/login/", "/healthz", "/api/schema/", "/api/docs/", "/account/tokens/"]


@pytest.fixture
def pg(postgres_only):
    return connections["airflow"].settings_dict


@contextmanager
def airflow_alias_at(host: str, port: int, name: str | None = None):
    """Point the Airflow alias, in every thread (the live server's too), at ``host:port``, with short timeouts."""
    connection = connections["airflow"]
    shared = connection.settings_dict  # the same dict for every thread's connection object
    saved, saved_timeout = copy.deepcopy(shared), connection.query_timeout
    connection.close()
    shared.update(HOST=host, PORT=str(port), NAME=name or shared["NAME"])
    shared["OPTIONS"] = {**shared["OPTIONS"], "connect_timeout": str(CONNECT_TIMEOUT), "query_timeout": QUERY_TIMEOUT}
    connection.set_query_timeout(QUERY_TIMEOUT)
    try:
        yield
    finally:
        connection.close()
        shared.clear()
        shared.update(saved)
        connection.set_query_timeout(saved_timeout)


@pytest.fixture
def proxy(pg):
    with TcpProxy(int(pg["PORT"] or 5432), pg["HOST"] or "127.0.0.1") as tcp_proxy:
        with airflow_alias_at("127.0.0.1", tcp_proxy.port):
            yield tcp_proxy


def timed(call):
    start = time.monotonic()
    result = call()
    return result, time.monotonic() - start


def wait_until(condition, timeout=60):
    """Poll for a condition (never a fixed wait); fail with the condition's name once ``timeout`` has passed."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"still not true after {timeout} s: {condition}"
        time.sleep(0.02)


def assert_unavailable_json(response, *words):
    assert response.status_code == 503, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    detail = response.json()["detail"]
    assert detail.startswith("Airflow's metadata database is unavailable: "), detail
    for word in words:
        assert word in detail, detail
    return detail


# The deadline itself ------------------------------------------------------------------------------------
def test_the_deadline_holds_when_the_server_stops_answering_mid_session(proxy):
    airflow = connections["airflow"]
    with airflow.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")  # the server gives up a little before the client
        assert cursor.fetchone()[0] == "2700ms"
    proxy.black_hole()
    start = time.monotonic()
    with pytest.raises(AirflowDatabaseUnavailable, match="no answer within 3 s"):
        airflow.cursor().execute("SELECT 1")
    assert QUERY_TIMEOUT - 0.5 < time.monotonic() - start < QUERY_TIMEOUT + MARGIN
    assert airflow.connection.closed  # its state is unknown: never reused
    proxy.pass_through()
    with airflow.cursor() as cursor:  # a new connection, without anything else to do
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_the_deadline_bounds_a_query_in_flight(proxy):
    airflow = connections["airflow"]
    airflow.ensure_connection()
    threading.Timer(0.3, proxy.black_hole).start()  # the answer (due at 1 s) never comes
    start = time.monotonic()
    with pytest.raises(AirflowDatabaseUnavailable, match="no answer within 3 s"):
        with airflow.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(1)")
    assert QUERY_TIMEOUT - 0.5 < time.monotonic() - start < QUERY_TIMEOUT + MARGIN


def test_a_live_but_slow_server_is_stopped_by_statement_timeout_first(pg):
    with airflow_alias_at(pg["HOST"] or "127.0.0.1", int(pg["PORT"] or 5432)):
        airflow = connections["airflow"]
        with pytest.raises(AirflowDatabaseUnavailable, match="statement timeout"):
            with airflow.cursor() as cursor:
                cursor.execute("SELECT pg_sleep(10)")
        assert not airflow.connection.closed  # the server answered: the connection stays
        with airflow.cursor() as cursor:
            cursor.execute("SELECT 1")


def test_a_longer_deadline_for_a_block_such_as_gc(pg):
    with airflow_alias_at(pg["HOST"] or "127.0.0.1", int(pg["PORT"] or 5432)):
        airflow = connections["airflow"]
        airflow.ensure_connection()
        with query_timeout(20):
            with airflow.cursor() as cursor:
                cursor.execute("SHOW statement_timeout")
                assert cursor.fetchone()[0] == "19s"
                cursor.execute("SELECT pg_sleep(3.2)")  # past the page deadline (3 s), within GC's
        with query_timeout(0):
            with airflow.cursor() as cursor:
                cursor.execute("SHOW statement_timeout")
                assert cursor.fetchone()[0] == "0"
        with airflow.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            assert cursor.fetchone()[0] == "2700ms"
        assert airflow.connection.query_timeout == QUERY_TIMEOUT


def test_state_store_clean_runs_under_its_own_deadline(pg, monkeypatch, settings):
    from django.core.management import call_command

    seen = []
    monkeypatch.setattr(
        "statestore_admin.gc.run_gc",
        lambda *args, **kwargs: seen.append(connections["airflow"].query_timeout) or _stop(),
    )
    settings.AIRFLOW_DATABASE_GC_QUERY_TIMEOUT = 1234
    with pytest.raises(Exception, match="stop here"):
        call_command("state_store_clean", "--batch-size", "10")
    assert seen == [1234]
    assert connections["airflow"].query_timeout == connections["airflow"].settings_dict["OPTIONS"]["query_timeout"]


def _stop():
    raise RuntimeError("stop here")


# Pages and API, in process: one kept connection, black-holed mid-session -------------------------------
@pytest.fixture
def operator_client(client, operator):
    client.force_login(operator)
    return client


def test_pages_htmx_and_api_answer_503_mid_session_then_recover(
    committed_airflow_tables, proxy, operator_client, operator, dag_run_factory, task_instance_factory
):
    run = dag_run_factory(dag_id="etl", run_id="manual__faults")
    task_instance_factory(run, task_id="t")
    client = operator_client
    token = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(operator, 'faults')[1]}"}
    put = {"data": json.dumps({"value": 1}), "content_type": "application/json", **token}
    assert client.get(PAGE).status_code == 200
    assert client.get(API, **token).status_code == 200
    assert client.put(f"{TASKS}/k", **put).status_code == 204

    proxy.black_hole()
    page, elapsed = timed(lambda: client.get(PAGE))
    assert page.status_code == 503 and elapsed < QUERY_TIMEOUT + MARGIN
    text = page.content.decode()
    assert "Airflow's database is unavailable" in text and "no answer within 3 s" in text
    assert "Traceback" not in text and "password" not in text.lower()
    # Later requests connect again, and the black hole holds the connection: the connect timeout.
    htmx, elapsed = timed(lambda: client.get(PAGE, HTTP_HX_REQUEST="true"))
    assert htmx.status_code == 503 and elapsed < CONNECT_TIMEOUT + MARGIN
    assert htmx["Content-Type"].startswith("text/plain")
    assert (
        htmx.content.decode()
        == "Airflow's metadata database is unavailable: no connection within 2 s (connect timeout)."
    )
    api, elapsed = timed(lambda: client.get(API, **token))
    assert elapsed < CONNECT_TIMEOUT + MARGIN
    assert_unavailable_json(api, "connect timeout")
    write, elapsed = timed(lambda: client.put(f"{TASKS}/k", **put))
    assert elapsed < CONNECT_TIMEOUT + MARGIN
    assert_unavailable_json(write, "connect timeout")

    proxy.pass_through()
    assert client.get(PAGE).status_code == 200
    assert client.get(API, **token).status_code == 200
    assert client.get(f"{TASKS}/k", **token).json()["value"] == 1


# A live server: concurrent requests, black hole and refusal -------------------------------------------
@pytest.fixture
def web(live_server, operator_client):
    """A requests session logged in as the operator on the live server (its connections kept alive, so the
    server's threads keep their database connections between requests: mid-session)."""
    with requests.Session() as session:
        session.cookies.set("sessionid", operator_client.cookies["sessionid"].value)
        session.base = live_server.url
        yield session


def get(session, path, **kwargs):
    return session.get(session.base + path, timeout=30, allow_redirects=False, **kwargs)


def test_a_hung_database_delays_only_what_needs_it_then_recovers(proxy, web, operator):
    token = {"Authorization": f"Bearer {ApiToken.issue(operator, 'faults')[1]}"}
    assert get(web, PAGE).status_code == 200
    assert get(web, API, headers=token).status_code == 200

    # While two requests wait on Airflow's (black-holed) database, requests that do not need it answer. The
    # two wait as long as the test needs (a long connect timeout) rather than racing a 2 s deadline on a busy
    # machine; answering 503 at the deadline is test_a_request_spends_one_deadline_on_a_hung_database's.
    connections["airflow"].settings_dict["OPTIONS"]["connect_timeout"] = "120"
    proxy.black_hole()
    with ThreadPoolExecutor(max_workers=2) as pool:
        page = pool.submit(get, web, PAGE)
        api = pool.submit(get, web, API, headers=token)
        wait_until(lambda: proxy.holding == 2)  # both are now waiting on Airflow's database
        for path in NOT_AIRFLOW:
            # under a black hole, a request that needed Airflow's database would wait for it, then answer 503
            assert get(web, path).status_code == 200, path
        assert proxy.holding == 2 and not page.done() and not api.done()
        proxy.pass_through()  # what the black hole held is delivered: the two go on
        assert page.result().status_code == 200 and api.result().status_code == 200
    connections["airflow"].settings_dict["OPTIONS"]["connect_timeout"] = str(CONNECT_TIMEOUT)
    assert get(web, PAGE).status_code == 200
    assert get(web, API, headers=token).status_code == 200

    proxy.refuse()
    page = get(web, PAGE)  # refused at once, so no deadline: the message says which
    assert page.status_code == 503 and "Connection refused" in page.text and "timeout" not in page.text
    api = get(web, API, headers=token)
    assert api.status_code == 503 and "Connection refused" in api.json()["detail"]
    for path in NOT_AIRFLOW:
        assert get(web, path).status_code == 200, path

    proxy.pass_through()
    assert get(web, PAGE).status_code == 200
    assert get(web, API, headers=token).status_code == 200


# One deadline per request -----------------------------------------------------------------------------
# Where the database stops answering, which deadline that costs the request, and what the 503 says.
HANGS = {
    # between two requests: the kept connection's check before reuse waits the connect timeout
    "kept connection": (CONNECT_TIMEOUT, "no answer within 2 s to the check of a kept connection (connect timeout"),
    # before the request: a new connection waits the connect timeout
    "at connect": (CONNECT_TIMEOUT, "no connection within 2 s (connect timeout)"),
    # during the request, after the check passed: the query in flight waits the query deadline
    "during the request": (QUERY_TIMEOUT, "no answer within 3 s (query deadline"),
}


@pytest.mark.parametrize("target", ["page", "api"])
@pytest.mark.parametrize("hang", list(HANGS))
def test_a_request_spends_one_deadline_on_a_hung_database(
    committed_airflow_tables, proxy, web, operator, dag_run_factory, task_instance_factory, hang, target
):
    """Once a wait on the database has run out, the request answers 503 at once: no second connection attempt
    and no second query, neither in the view, nor in the middleware, the error path or the request's end (a
    kept connection's check followed by a new connection's connect timeout took two deadlines)."""
    run = dag_run_factory(dag_id="etl", run_id="manual__faults")
    task_instance_factory(run, task_id="t")
    token = {"Authorization": f"Bearer {ApiToken.issue(operator, 'faults')[1]}"}
    path, headers = (PAGE, {}) if target == "page" else (f"{TASKS}/k", token)
    if hang != "at connect":  # the server's thread for this session keeps its connection, schema known
        assert get(web, path, headers=headers).status_code in (200, 404)
    deadline, reason = HANGS[hang]
    accepted = proxy.accepted
    if hang == "during the request":
        proxy.black_hole_on(b"task_state_store")  # the check (alembic_version) passes; the first read hangs
    else:
        proxy.black_hole()

    response, elapsed = timed(lambda: get(web, path, headers=headers))
    assert response.status_code == 503, response.text[:300]
    # It waited the deadline, and not a second one: a second connection attempt shows in the proxy's count
    # below; a second wait on the same connection would take the request past twice the deadline.
    assert 0.9 * deadline < elapsed < 2 * deadline, (hang, target, elapsed)
    if target == "api":  # the usual body
        assert list(response.json()) == ["detail"]
        body = response.json()["detail"]
        assert body.startswith("Airflow's metadata database is unavailable: "), body
    else:
        body = response.text
        assert "Airflow's database is unavailable" in body
    assert reason in body
    # The same server thread answers next (keep-alive), so the request before it, its end included, is over.
    assert get(web, "/healthz").status_code == 200
    assert proxy.accepted - accepted == (1 if hang == "at connect" else 0)  # the one attempt, or the kept one

    proxy.pass_through()  # the next request tries again
    assert get(web, path, headers=headers).status_code in (200, 404)


def test_a_shorter_budget_that_runs_out_leaves_the_request_its_deadline(proxy):
    """A block's budget (the count budget's ``query_timeout``) is not the request's deadline: when its
    server-side cancel comes late, the request's next query connects again instead of answering 503."""
    airflow = connections["airflow"]
    request_started.send(sender=__name__)
    try:
        airflow.ensure_connection()
        proxy.black_hole()
        with pytest.raises(AirflowDatabaseUnavailable, match="no answer within 0.65 s"):
            with query_timeout(0.5), airflow.cursor() as cursor:
                cursor.execute("SELECT 1")
        proxy.pass_through()
        accepted = proxy.accepted
        with airflow.cursor() as cursor:
            cursor.execute("SELECT 1")
        assert proxy.accepted == accepted + 1
    finally:
        request_finished.send(sender=__name__)


# The database stopped outright: a private cluster ------------------------------------------------------
class PrivateCluster:
    """A PostgreSQL 15 cluster of our own in a temporary folder, never the shared one on 5432."""

    def __init__(self):
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="statestore-faults-pg-"))
        self.data = self.root / "data"
        self.as_postgres = []
        if os.geteuid() == 0:  # initdb refuses root: run the cluster as the postgres user
            shutil.chown(self.root, "postgres")
            self.as_postgres = ["runuser", "-u", "postgres", "--"]

    def run(self, *args: str) -> None:
        subprocess.run([*self.as_postgres, *args], cwd=self.root, check=True, capture_output=True, timeout=60)

    def init(self) -> None:
        self.run(str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def start(self) -> None:
        self.run(
            str(PG_BIN / "pg_ctl"), "start", "-w", "-D", str(self.data), "-l", str(self.root / "log"),
            "-o", f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off",
        )  # fmt: skip

    def stop(self) -> None:
        self.run(str(PG_BIN / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate")

    def remove(self) -> None:
        subprocess.run([*self.as_postgres, str(PG_BIN / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate"],
                       capture_output=True)  # fmt: skip
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def private_cluster(postgres_only):
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"needs PostgreSQL 15's server binaries in {PG_BIN} (apt-get install postgresql-15)")
    cluster = PrivateCluster()
    try:
        cluster.init()
        cluster.start()
        with psycopg.connect(host="127.0.0.1", port=cluster.port, user="postgres", dbname="postgres") as conn:
            conn.autocommit = True
            conn.execute("CREATE DATABASE airflow")
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DJANGO_SETTINGS", "STATESTORE"))},
            "DJANGO_SETTINGS_MODULE": "statestore_admin.settings",
            "AIRFLOW_DATABASE_URL": f"postgresql://postgres@127.0.0.1:{cluster.port}/airflow",
            "DATABASE_URL": f"sqlite:///{cluster.root / 'dashboard.sqlite3'}",
            "SECRET_KEY": "tests-only",
            "STATESTORE_VAR_DIR": str(cluster.root / "var"),
        }
        subprocess.run(
            [sys.executable, "manage.py", "create_airflow_schema"], cwd=BASE_DIR, env=env, check=True,
            capture_output=True, timeout=120,
        )  # fmt: skip
        yield cluster
    finally:
        cluster.remove()


def test_the_database_stopped_and_started_again(private_cluster, web, operator):
    token = {"Authorization": f"Bearer {ApiToken.issue(operator, 'faults')[1]}"}
    with airflow_alias_at("127.0.0.1", private_cluster.port, name="airflow"):
        assert get(web, PAGE).status_code == 200
        assert get(web, API, headers=token).status_code == 200

        private_cluster.stop()
        page, elapsed = timed(lambda: get(web, PAGE))
        assert page.status_code == 503 and elapsed < CONNECT_TIMEOUT + MARGIN
        assert "Airflow's database is unavailable" in page.text and "Connection refused" in page.text
        api = get(web, API, headers=token)
        assert api.status_code == 503 and "Connection refused" in api.json()["detail"]
        htmx = get(web, PAGE, headers={"HX-Request": "true"})
        assert htmx.status_code == 503 and htmx.text.startswith("Airflow's metadata database is unavailable: ")
        for path in NOT_AIRFLOW:
            assert get(web, path).status_code == 200, path

        private_cluster.start()
        assert get(web, PAGE).status_code == 200
        assert get(web, API, headers=token).status_code == 200

        # A restart between two requests: the kept connections are found dead before reuse, not an error.
        private_cluster.stop()
        private_cluster.start()
        assert get(web, PAGE).status_code == 200
        assert get(web, API, headers=token).status_code == 200


# Settings (both databases) ----------------------------------------------------------------------------
def test_timeouts_only_for_postgresql_and_url_options_win():
    postgres = with_timeouts(sqlalchemy_url_to_django("postgresql://a@h/db?connect_timeout=9"), 5, 30.0)
    assert postgres["ENGINE"] == "statestore_admin.airflow.backends.postgresql"
    assert postgres["OPTIONS"]["connect_timeout"] == "9"
    assert postgres["OPTIONS"]["query_timeout"] == 30.0
    assert postgres["OPTIONS"]["keepalives"] == "1"
    sqlite = sqlalchemy_url_to_django("sqlite:////tmp/airflow.db")
    assert with_timeouts(sqlite, 5, 30.0) == sqlite


def connection_params(url: str) -> dict:
    settings = with_timeouts(sqlalchemy_url_to_django(url), 5, 30.0)
    return ConnectionHandler({"default": settings})["default"].get_connection_params()  # never connects


def test_statement_timeout_one_second_under_the_deadline_unless_the_url_sets_one():
    params = connection_params("postgresql://a@h/db")
    assert params["options"] == "-c statement_timeout=29000" and "query_timeout" not in params
    assert connection_params("postgresql://a@h/db?options=-c%20statement_timeout%3D5s")["options"] == (
        "-c statement_timeout=5s"
    )
