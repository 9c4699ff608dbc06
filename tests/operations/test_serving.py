"""The production server (gunicorn.conf.py, statestore_admin/serving.py) over real sockets: slow clients hold
no thread, the longest valid key's URLs are served, and gunicorn's own errors are JSON under /api/."""

import concurrent.futures
import contextlib
import html
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import uuid

import psycopg
import pytest
import requests

from tests.operations.test_production import ADMIN_URL, ROOT, _environment, stop
from tests.ports import free_port

CLIENT_TIMEOUT = 6  # seconds for a request's headers, then its body (GUNICORN_CLIENT_TIMEOUT of the server)

# The worst case the request-line limit is sized for: every character 4 bytes of UTF-8, 12 once
# percent-encoded; the longest key the column takes and the longest dag, run and task ids.
KEY = "\U0001d49c" * 512
DAG_ID = "\U0001d49f" * 250
RUN_ID = "\U0001d4e1" * 250
TASK_ID = "\U0001d4af" * 250
ASSET_KEY = "\U0001d4d0" * 512

SETUP = """
import json, sys
from io import StringIO
from django.contrib.auth import get_user_model
from django.core.management import call_command
from tests import factories

ids = json.loads(sys.stdin.read())
get_user_model().objects.create_superuser("admin", "admin@example.com", ids["password"])
out = StringIO()
call_command("create_api_token", "admin", "--name", "serving", stdout=out)
run = factories.make_dag_run(dag_id=ids["dag_id"], run_id=ids["run_id"])
factories.make_task_instance(run, task_id=ids["task_id"])
task_key = factories.make_task_key(run, key=ids["key"], value={"n": 1}, task_id=ids["task_id"])
asset = factories.make_asset(name="orders")
factories.make_asset_key(asset, key=ids["asset_key"], value={"n": 2})
print(json.dumps({"token": out.getvalue().strip(), "task_key": task_key.pk, "asset": asset.pk}))
"""


class Server:
    def __init__(self, port, token, task_key, asset, password):
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.token = token
        self.task_key = task_key
        self.asset = asset
        self.password = password


def _run(command, env, **kwargs):
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, **kwargs)
    assert result.returncode == 0, result.stderr
    return result.stdout


@contextlib.contextmanager
def gunicorn(tmp_path, env):
    """gunicorn with gunicorn.conf.py, as `make serve` starts it; its port once /healthz answers. Stopped
    with SIGTERM; its log must show no traceback."""
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--config", "gunicorn.conf.py"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        started = time.monotonic()
        while True:
            assert process.poll() is None, log_path.read_text()
            assert time.monotonic() - started < 60, log_path.read_text()
            try:
                if requests.get(f"http://127.0.0.1:{env['PORT']}/healthz", timeout=5).status_code == 200:
                    break
            except requests.RequestException:  # not listening yet, or a worker still starting
                time.sleep(0.2)
        yield process
    finally:
        stop(process, timeout=40)
    assert "Traceback" not in log_path.read_text(), log_path.read_text()


def server_environment(tmp_path, **variables):
    defaults = dict(
        STATESTORE_VAR_DIR=str(tmp_path / "var"),
        SECRET_KEY="serving-test-" + uuid.uuid4().hex,
        ALLOWED_HOSTS="127.0.0.1",
        DEBUG="0",
        HOST="127.0.0.1",
        PORT=str(free_port()),
        GUNICORN_CLIENT_TIMEOUT=str(CLIENT_TIMEOUT),
        WEB_CONCURRENCY="3",
        GUNICORN_THREADS="4",
        SECURE_COOKIES="0",  # plain HTTP: the login form's cookies must come back
    )
    return _environment(tmp_path, **{**defaults, **variables})


@contextlib.contextmanager
def databases():
    """The server's two databases: SQLite files in its var/ by default; in the STATESTORE_TEST_DB=postgres
    pass two PostgreSQL databases of its own (the dashboard's, Airflow's), dropped afterwards."""
    if os.environ.get("STATESTORE_TEST_DB", "sqlite") != "postgres":
        yield {}
        return
    base = f"statestore_serving_{uuid.uuid4().hex[:8]}"
    names = [base, f"{base}_airflow"]
    with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5) as conn:
        for name in names:
            conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield {
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{base}",
            "AIRFLOW_DATABASE_URL": f"postgresql+psycopg2://postgres@127.0.0.1:5432/{base}_airflow",
        }
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
            for name in names:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """gunicorn as `make serve` runs it (gunicorn.conf.py, its defaults: 3 workers x 4 threads on 2 cores),
    on databases of its own (SQLite, or PostgreSQL in that pass), with a superuser, an API token and rows
    holding the longest keys."""
    tmp_path = tmp_path_factory.mktemp("serving")
    with databases() as urls:
        env = server_environment(tmp_path, **urls)
        manage = [sys.executable, "manage.py"]
        _run([*manage, "migrate", "--noinput", "--verbosity", "0"], env)
        _run([*manage, "create_airflow_schema"], env)
        password = uuid.uuid4().hex
        ids = dict(dag_id=DAG_ID, run_id=RUN_ID, task_id=TASK_ID, key=KEY, asset_key=ASSET_KEY, password=password)
        made = json.loads(_run([*manage, "shell", "--no-imports", "-c", SETUP], env, input=json.dumps(ids)))
        with gunicorn(tmp_path, env):
            yield Server(int(env["PORT"]), made["token"], made["task_key"], made["asset"], password)


def raw(port, data: bytes, timeout=10):
    """Send bytes as they are; (status, headers, body) of the answer, read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    if headers.get("transfer-encoding") == "chunked":
        chunks, rest = [], body
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            chunks.append(rest[: int(size, 16)])
            rest = rest[int(size, 16) + 2 :]
        body = b"".join(chunks)
    return int(lines[0].split()[1]), headers, body


def quoted(text):
    return urllib.parse.quote(text, safe="")


def json_detail(response):
    status, headers, body = response
    assert headers["content-type"] == "application/json", (status, headers, body[:300])
    detail = json.loads(body)["detail"]
    assert isinstance(detail, str) and detail
    return status, detail


# --- Slow clients ---------------------------------------------------------------------------------------


def test_stalled_bodies_hold_no_thread_and_get_408(server):
    """48 unauthenticated connections announce a 1,000-byte login form and send none of it (4 times the
    server's 12 threads): /healthz still answers at once, and each stalled one gets 408 at the deadline."""
    for _ in range(6):  # each worker's first request (Django's lazy imports) out of the way
        requests.get(f"{server.base}/healthz", timeout=30)
    started = time.monotonic()
    stalled = []
    try:
        for _ in range(48):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=CLIENT_TIMEOUT + 10)
            sock.sendall(
                b"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n"
            )
            stalled.append(sock)
        time.sleep(0.5)  # every request's headers parsed, every body awaited
        for _ in range(3):
            assert requests.get(f"{server.base}/healthz", timeout=CLIENT_TIMEOUT).status_code == 200
        # Answered while the 48 were all still waiting, unanswered: had they held the threads, /healthz would have
        # waited for one of them to get its 408 (a condition, where a bound on the time would flake under load).
        assert not select.select(stalled, [], [], 0)[0]
        for sock in stalled:
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
            assert b"text/html" in answer.partition(b"\r\n\r\n")[0].lower()
    finally:
        for sock in stalled:
            sock.close()
    assert time.monotonic() - started < 30


def test_a_stalled_api_body_gets_408_json(server):
    status, detail = json_detail(
        raw(
            server.port,
            b"PUT /api/v2/assets/1/state-store/k HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
            timeout=CLIENT_TIMEOUT + 10,
        )
    )
    assert status == 408 and "did not arrive" in detail


def test_a_connection_that_sends_no_request_is_closed_at_the_deadline(server):
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=CLIENT_TIMEOUT + 10) as sock:
        assert sock.recv(65536) == b""  # closed, without an answer: there was no request to answer
    assert CLIENT_TIMEOUT - 0.5 < time.monotonic() - started < CLIENT_TIMEOUT + 3


def test_headers_that_stall_get_408(server):
    """Under /api/ and for a page, at once (each waits out the deadline)."""
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        api = pool.submit(raw, server.port, b"GET /api/v2/assets/1/state-store HTTP/1.1\r\nHost: 127.0.0.1\r\n", 20)
        page = pool.submit(raw, server.port, b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept:", 20)
        status, detail = json_detail(api.result())
        assert status == 408 and time.monotonic() - started < CLIENT_TIMEOUT + 3
        status, headers, body = page.result()
        assert status == 408 and headers["content-type"].startswith("text/html") and b"<html" in body


def test_a_body_past_the_memory_spool_reaches_django_whole(server):
    """A body kept in a temporary file (past 1 MB), sent in pieces: Django parses all of it (the value's
    size is the domain's refusal, which names the limit)."""
    body = json.dumps({"value": "x" * 1_500_000}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            b"PUT /api/v2/assets/%d/state-store/big HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n" % (server.asset, server.token.encode(), len(body))
        )
        for start in range(0, len(body), 300_000):
            sock.sendall(body[start : start + 300_000])
            time.sleep(0.05)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 422 "), answer[:300]
    assert "max_value_storage_bytes" in json.dumps(json.loads(payload))


def test_a_body_larger_than_any_view_takes_is_413_before_it_is_sent(server):
    status, detail = json_detail(
        raw(
            server.port,
            b"PUT /api/v2/assets/1/state-store/k HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n",
        )
    )
    assert status == 413 and "larger than" in detail


# --- Errors gunicorn answers itself ----------------------------------------------------------------------

API = b"/api/v2/assets/1/state-store"


@pytest.mark.parametrize(
    "request_bytes, expected",
    [
        pytest.param(b"GET " + API + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nNo colon here\r\n\r\n", 400, id="malformed"),
        pytest.param(
            b"GET " + API + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n", 431, id="oversized"
        ),
        pytest.param(
            b"PUT " + API + b"/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n", 400, id="negative-length"
        ),
        pytest.param(
            b"GET " + API + b"/" + b"k" * 20000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414, id="long-line"
        ),
        pytest.param(b"GET " + API + b" HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n", 400, id="bad-version"),
    ],
)
def test_protocol_errors_under_api_are_json(server, request_bytes, expected):
    status, detail = json_detail(raw(server.port, request_bytes))
    assert status == expected, detail


LIMIT = 512 * 12 + 3 * 250 * 12 + 1024  # gunicorn.conf.py's limit_request_line


@pytest.mark.parametrize("length, expected", [(LIMIT, 404), (LIMIT + 1, 414)])
def test_the_request_line_limit_is_exact(server, length, expected):
    """A request line of exactly the limit reaches Django (an unknown path under /api/: 404 JSON), one byte
    more is gunicorn's 414, also JSON."""
    head, tail = b"GET /api/", b" HTTP/1.1"
    line = head + b"x" * (length - len(head) - len(tail)) + tail
    assert len(line) == length
    status, _ = json_detail(raw(server.port, line + b"\r\nHost: 127.0.0.1\r\n\r\n"))
    assert status == expected


def test_a_websocket_upgrade_is_answered_as_a_plain_request(server):
    status, detail = json_detail(
        raw(
            server.port,
            b"GET /api/v2/no-such-thing HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
    )
    assert (status, detail) == (404, "Not Found")


def test_protocol_errors_of_pages_are_html(server):
    """A browser can send a header too large (a cookie): its page answer is HTML, as the pages' own errors."""
    status, headers, body = raw(
        server.port, b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: " + b"a" * 9000 + b"\r\n\r\n"
    )
    assert status == 431 and headers["content-type"].startswith("text/html") and b"<html" in body


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(b"GET /dags/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: b\r\n c\r\n\r\n", id="folded header"),
        pytest.param(b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: " + b"a" * 9000 + b"\r\n\r\n", id="431"),
        pytest.param(b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", id="414"),
        pytest.param(b"GET " + API + b" HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n", id="api 400"),
        pytest.param(
            b"POST /audit/restore-file/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 999999999999\r\n\r\n",
            id="413",
        ),
    ],
)
def test_the_servers_own_error_answers_refuse_every_frame(server, request_bytes):
    """The answers gunicorn and the body reader give before Django (which sets these headers on its own) are
    never framed either, and are not sniffed as another type."""
    status, headers, _ = raw(server.port, request_bytes)
    assert status >= 400
    assert headers.get("x-frame-options") == "DENY", headers
    assert "frame-ancestors 'none'" in headers.get("content-security-policy", ""), headers
    assert headers.get("x-content-type-options") == "nosniff", headers


# --- The longest valid keys -------------------------------------------------------------------------------


def test_the_longest_key_pages_and_edit_dialogs_are_served(server):
    """Signed in through the login form: the asset key page (its key in the query string), the edit dialog
    it opens, and the task key's page and dialog (its links carry the 250-character ids)."""
    session = requests.Session()
    login = session.get(f"{server.base}/login/", timeout=30)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    signed_in = session.post(
        f"{server.base}/login/",
        data={"username": "admin", "password": server.password, "csrfmiddlewaretoken": csrf},
        timeout=30,
    )
    assert signed_in.status_code == 200 and "/login/" not in signed_in.url, signed_in.text[:500]

    page_url = f"{server.base}/assets/{server.asset}/key/?key={quoted(ASSET_KEY)}"
    assert len(page_url) > 6000
    page = session.get(page_url, timeout=30)
    assert page.status_code == 200 and ASSET_KEY in page.text
    # The dialog as the page's Edit button opens it (htmx).
    edit = re.search(r'hx-get="(/assets/\d+/key/edit/\?key=[^"]+)"', page.text).group(1)
    assert len(edit) > 6000
    dialog = session.get(server.base + html.unescape(edit), headers={"HX-Request": "true"}, timeout=30)
    assert dialog.status_code == 200 and "<form" in dialog.text and ASSET_KEY in dialog.text, dialog.text[:500]

    task_page = session.get(f"{server.base}/keys/task/{server.task_key}/", timeout=30)
    assert task_page.status_code == 200 and KEY in task_page.text and DAG_ID in task_page.text
    long_links = [link for link in re.findall(r'href="(/[^"]+)"', task_page.text) if len(link) > 1000]
    assert long_links  # the dag's and the task's pages
    for link in long_links:
        followed = session.get(server.base + html.unescape(link), timeout=30)
        assert followed.status_code == 200, (link[:100], followed.status_code)
    dialog = session.get(f"{server.base}/keys/task/{server.task_key}/edit/", headers={"HX-Request": "true"}, timeout=30)
    assert dialog.status_code == 200 and "<form" in dialog.text, dialog.text[:500]


def test_the_longest_key_api_urls_are_served(server):
    url = (
        f"{server.base}/api/v2/dags/{quoted(DAG_ID)}/dagRuns/{quoted(RUN_ID)}/taskInstances/{quoted(TASK_ID)}"
        f"/state-store/{quoted(KEY)}?map_index=-1"
    )
    assert len(url) > 15000  # well past gunicorn's default 4,094-byte request line
    auth = {"Authorization": f"Bearer {server.token}"}
    got = requests.get(url, headers=auth, timeout=30)
    assert got.status_code == 200, got.text[:500]
    assert got.json()["key"] == KEY and got.json()["value"] == {"n": 1}
    put = requests.put(url, json={"value": {"n": 3}}, headers=auth, timeout=30)
    assert put.status_code == 204, put.text[:500]
    assert requests.get(url, headers=auth, timeout=30).json()["value"] == {"n": 3}
    deleted = requests.delete(url, headers=auth, timeout=30)
    assert deleted.status_code == 204, deleted.text[:500]
    missing = requests.get(url, headers=auth, timeout=30)
    assert missing.status_code == 404 and missing.headers["Content-Type"] == "application/json"

    asset_url = f"{server.base}/api/v2/assets/{server.asset}/state-store/{quoted(ASSET_KEY)}"
    got = requests.get(asset_url, headers=auth, timeout=30)
    assert got.status_code == 200 and got.json()["key"] == ASSET_KEY, got.text[:500]


# --- Behind a proxy ---------------------------------------------------------------------------------------


@pytest.mark.any_database  # its processes run in a clean environment, on files of their own (tests/conftest.py)
def test_behind_a_tls_proxy_the_scheme_and_the_access_log_are_as_before(tmp_path):
    """X-Forwarded-Proto from a trusted address (FORWARDED_ALLOW_IPS: the local host) makes the request
    HTTPS (no redirect), and the access log keeps its format with the proxy's X-Forwarded-For."""
    env = server_environment(tmp_path, BEHIND_TLS_PROXY="1")
    port = int(env["PORT"])
    with gunicorn(tmp_path, env):
        proxied = raw(
            port,
            b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: 203.0.113.9\r\n"
            b"X-Forwarded-Proto: https\r\nUser-Agent: probe\r\nConnection: close\r\n\r\n",
        )
        direct = raw(port, b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert proxied[0] == 200 and b"<form" in proxied[2]
    assert direct[0] == 301 and direct[1]["location"] == "https://127.0.0.1/login/"
    log = (tmp_path / "serve.log").read_text()
    assert re.search(
        r'^127\.0\.0\.1 "203\.0\.113\.9" \[[^]]+\] "GET /login/ HTTP/1\.1" 200 \d+ \d+us "probe"$', log, re.M
    ), log


# --- Stopping ----------------------------------------------------------------------------------------------


@pytest.mark.any_database  # its processes run in a clean environment, on files of their own (tests/conftest.py)
def test_sigterm_lets_a_request_in_flight_finish(tmp_path):
    """A body half sent when SIGTERM arrives is still read and answered; new connections are refused and
    the server is gone soon after."""
    env = server_environment(tmp_path)
    port = int(env["PORT"])
    with gunicorn(tmp_path, env) as process:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            sock.sendall(b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\n12345")
            time.sleep(0.5)
            os.killpg(process.pid, signal.SIGTERM)
            time.sleep(1.5)
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
            sock.sendall(b"67890")
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        # Django's answer (a POST without a CSRF cookie), given once the whole body had arrived.
        assert answer.startswith(b"HTTP/1.1 403 ") and b"CSRF" in answer, answer[:200]
        process.wait(timeout=10)
