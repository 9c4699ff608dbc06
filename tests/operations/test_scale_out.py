"""Several workers, several servers (issue 26; docs/operations.md, "Several servers"): the token-failure limit
holds across gunicorn's workers on the default cache (the dashboard's database), and across two servers that
share the dashboard's PostgreSQL database and a Redis of their own; a session made on one works on the other;
a Redis that stops costs no 500 and, once back, counts again."""

import concurrent.futures
import contextlib
import json
import os
import re
import subprocess
import sys
import time
import uuid

import psycopg
import pytest
import requests

from statestore_admin.cache import RETRY_SECONDS
from statestore_admin.gc import ADVISORY_LOCK_KEY
from tests.operations.test_serving import _run, databases, gunicorn, server_environment
from tests.ports import free_port

STATS = "/api/statestore/v1/stats"

SETUP = """
import json, sys
from datetime import timedelta
from io import StringIO
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone
from tests import factories

get_user_model().objects.create_superuser("admin", "admin@example.com", sys.stdin.read().strip())
out = StringIO()
call_command("create_api_token", "admin", "--name", "scale-out", stdout=out)
run = factories.make_dag_run(dag_id="etl")
factories.make_task_instance(run)
past = timezone.now() - timedelta(days=1)
expired = [factories.make_task_key(run, key=f"old-{n}", expires_at=past) for n in range(3)]
asset = factories.make_asset(name="orders")
for key in ("watermark", "cursor"):
    factories.make_asset_key(asset, key=key, value="1")
made = {"token": out.getvalue().strip(), "asset": asset.pk, "run": run.pk, "expired": [k.pk for k in expired]}
print(json.dumps(made))
"""


def prepare(env, password) -> dict:
    """Migrate the dashboard's database (the cache's table with it), Airflow's schema, a superuser and its
    token, three expired task keys, an asset with two keys."""
    manage = [sys.executable, "manage.py"]
    _run([*manage, "migrate", "--noinput", "--verbosity", "0"], env)
    _run([*manage, "create_airflow_schema"], env)
    return json.loads(_run([*manage, "shell", "--no-imports", "-c", SETUP], env, input=password))


def bearer(base, token, address):
    """A bearer request to the API from ``address`` (the one proxy's X-Forwarded-For: TRUSTED_PROXY_COUNT=1)."""
    headers = {"Authorization": f"Bearer {token}", "X-Forwarded-For": address}
    return requests.get(base + STATS, headers=headers, timeout=30)


def statuses_until_429(bases, address, most):
    """Wrong tokens from ``address``, taking turns among ``bases``, until the first 429 (at most ``most``)."""
    statuses = []
    for n in range(most):
        statuses.append(bearer(bases[n % len(bases)], "ssa_wrong", address).status_code)
        if statuses[-1] == 429:
            break
    return statuses


# --- One server, several workers, the default cache -------------------------------------------------


def test_the_token_limit_holds_across_the_workers_of_one_server(tmp_path):
    """`make serve`'s defaults (3 workers, no CACHE_URL): the 11th wrong token is refused, not the 30th."""
    limit = 10
    with databases() as urls:
        env = server_environment(tmp_path, TOKEN_FAILURE_LIMIT=str(limit), TRUSTED_PROXY_COUNT="1", **urls)
        token = prepare(env, uuid.uuid4().hex)["token"]
        with gunicorn(tmp_path, env):
            base = f"http://127.0.0.1:{env['PORT']}"
            # One after the other: exactly the limit answers 401, then 429 with Retry-After; a valid token works.
            assert statuses_until_429([base], "203.0.113.1", 3 * limit) == [401] * limit + [429]
            refused = bearer(base, "ssa_wrong", "203.0.113.1")
            assert refused.status_code == 429 and 0 < int(refused.headers["Retry-After"]) <= 15 * 60
            assert bearer(base, token, "203.0.113.1").status_code == 200
            assert bearer(base, token, "203.0.113.2").status_code == 200

            # All at once, spread over the workers by the kernel: still the limit, each failure counted once.
            with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
                burst = list(pool.map(lambda _: bearer(base, "ssa_wrong", "203.0.113.3").status_code, range(30)))
            assert sorted(burst) == [401] * limit + [429] * (30 - limit), burst

            ready = requests.get(f"{base}/readyz", timeout=30).json()
            assert ready["cache"] == {"backend": "database", "status": "ok"}


# --- Two servers, one database, one Redis -----------------------------------------------------------


@contextlib.contextmanager
def private_redis(port):
    """A Redis server of the test's own on ``port`` (never the shared one on 6379), keeping nothing on disk."""
    process = subprocess.Popen(
        ["/usr/bin/redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import redis

        client = redis.Redis(port=port, socket_connect_timeout=1)
        started = time.monotonic()
        while True:
            assert process.poll() is None, "redis-server exited"
            assert time.monotonic() - started < 30, "redis-server does not answer"
            try:
                client.ping()
                break
            except redis.RedisError:
                time.sleep(0.1)
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)


def sign_in(base, password) -> requests.Session:
    session = requests.Session()
    login = session.get(f"{base}/login/", timeout=30)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    response = session.post(
        f"{base}/login/",
        data={"username": "admin", "password": password, "csrfmiddlewaretoken": csrf},
        headers={"X-Forwarded-For": "198.51.100.1"},
        timeout=30,
        allow_redirects=False,
    )
    assert response.status_code == 302, response.text[:2000]
    return session


def post(session, url, data):
    """A form post as the dashboard's pages make it (CSRF token from the cookie, as htmx sends it)."""
    headers = {"X-CSRFToken": session.cookies["csrftoken"], "X-Forwarded-For": "198.51.100.1"}
    return session.post(url, data=data, headers=headers, timeout=120, allow_redirects=False)


def wait_for_cache(bases, ok: bool):
    """Until every server's /readyz says the cache answers (``ok``) or does not: a bounded wait."""
    started = time.monotonic()
    while True:
        states = [requests.get(f"{base}/readyz", timeout=30).json()["cache"]["status"] == "ok" for base in bases]
        if all(state == ok for state in states):
            return
        assert time.monotonic() - started < 60, states
        time.sleep(0.2)


class TwoServers:
    def __init__(self, bases, made, password, redis_server, redis_port, airflow_url):
        self.bases, self.password = bases, password
        self.token, self.asset, self.run, self.expired = made["token"], made["asset"], made["run"], made["expired"]
        self.redis_server, self.redis_port, self.airflow_url = redis_server, redis_port, airflow_url


LIMIT = 5


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """Two servers (2 workers each) on one PostgreSQL dashboard database, one Airflow database and one
    private Redis, with the same SECRET_KEY: a deployment of two replicas."""
    if os.environ.get("STATESTORE_TEST_DB", "sqlite") != "postgres":
        pytest.skip("runs once, in the STATESTORE_TEST_DB=postgres pass (two servers share one PostgreSQL database)")
    tmp_path = tmp_path_factory.mktemp("two-servers")
    password = uuid.uuid4().hex
    redis_port = free_port()
    with databases() as urls, private_redis(redis_port) as redis_server:
        shared = dict(
            urls,
            SECRET_KEY="scale-out-" + uuid.uuid4().hex,  # the same on every server: sessions, CSRF, confirmations
            CACHE_URL=f"redis://127.0.0.1:{redis_port}/0",
            TOKEN_FAILURE_LIMIT=str(LIMIT),
            TRUSTED_PROXY_COUNT="1",
            WEB_CONCURRENCY="2",
            GUNICORN_THREADS="4",
        )
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        env_a = server_environment(tmp_path / "a", **shared)
        env_b = server_environment(tmp_path / "b", **shared)
        made = prepare(env_a, password)
        with gunicorn(tmp_path / "a", env_a), gunicorn(tmp_path / "b", env_b):
            bases = [f"http://127.0.0.1:{env['PORT']}" for env in (env_a, env_b)]
            airflow_url = urls["AIRFLOW_DATABASE_URL"].replace("+psycopg2", "")
            yield TwoServers(bases, made, password, redis_server, redis_port, airflow_url)


def test_two_servers_count_wrong_tokens_together(two):
    for base in two.bases:
        assert requests.get(f"{base}/readyz", timeout=30).json()["cache"] == {"backend": "redis", "status": "ok"}
    # Wrong tokens taking turns between the two servers: refused at the limit, on both.
    assert statuses_until_429(two.bases, "203.0.113.1", 3 * LIMIT) == [401] * LIMIT + [429]
    assert [bearer(base, "ssa_wrong", "203.0.113.1").status_code for base in two.bases] == [429, 429]
    assert [bearer(base, two.token, "203.0.113.1").status_code for base in two.bases] == [200, 200]
    # All at once on both servers: each failure counted once.
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        burst = list(pool.map(lambda n: bearer(two.bases[n % 2], "ssa_wrong", "203.0.113.2").status_code, range(20)))
    assert sorted(burst) == [401] * LIMIT + [429] * (20 - LIMIT), burst


def test_a_session_a_refresh_an_export_and_a_confirmation_from_one_server_work_on_the_other(two):
    a, b = two.bases
    session = sign_in(a, two.password)
    page = session.get(f"{b}/", timeout=30, allow_redirects=False)
    assert page.status_code == 200  # signed in on A, recognised by B (sessions live in the shared database)

    # A page opened on A refreshes its panel from B (htmx asks the page's URL again), and B exports its list.
    assert "keys-panel" in session.get(f"{a}/assets/{two.asset}/", timeout=30).text
    panel = session.get(f"{b}/assets/{two.asset}/", headers={"HX-Request": "true"}, timeout=30)
    assert panel.status_code == 200 and 'id="keys-panel"' in panel.text and "watermark" in panel.text
    export = session.get(f"{b}/runs/{two.run}/export/?format=json", timeout=30)
    assert export.status_code == 200 and "attachment" in export.headers["Content-Disposition"]
    assert sorted(key["key"] for key in export.json()["keys"]) == ["old-0", "old-1", "old-2"], export.text[:2000]

    # The confirmation is opened on A (it lists the asset's two keys) and confirmed on B.
    dialog = session.get(f"{a}/assets/{two.asset}/delete/?all=1", headers={"HX-Request": "true"}, timeout=30)
    assert dialog.status_code == 200, dialog.text[:2000]
    listed = re.search(r'name="listed" value="([^"]+)"', dialog.text).group(1)
    done = post(session, f"{b}/assets/{two.asset}/delete/", {"all": "1", "listed": listed})
    assert done.status_code in (200, 204, 302), done.text[:2000]
    keys = f"{a}/api/v2/assets/{two.asset}/state-store"
    answer = requests.get(keys, headers={"Authorization": f"Bearer {two.token}"}, timeout=30)
    assert answer.status_code == 200 and answer.json()["asset_state_store"] == [], answer.text


def test_two_gc_runs_at_once_on_two_servers_one_runs_and_one_says_so(two):
    """A's run takes GC's lock and waits on a row the test holds; B's run, meanwhile, finds the lock taken."""
    a, b = two.bases
    on_a, on_b = sign_in(a, two.password), sign_in(b, two.password)  # each keeps the messages of its run
    form = {"cutoff": "now"}
    with psycopg.connect(two.airflow_url) as holder:
        holder.execute("SELECT id FROM task_state_store WHERE id = %s FOR UPDATE", [two.expired[0]])
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            first = pool.submit(post, on_a, f"{a}/gc/run/", form)
            with psycopg.connect(two.airflow_url, autocommit=True) as watcher:
                started = time.monotonic()
                while not watcher.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                    " AND ((classid::bigint << 32) | objid::bigint) = %s",
                    [ADVISORY_LOCK_KEY],
                ).fetchone()[0]:
                    assert not first.done(), first.result().text[:2000]
                    assert time.monotonic() - started < 60, "A's GC run never took the lock"
                    time.sleep(0.05)
            second = post(on_b, f"{b}/gc/run/", form)
            holder.rollback()  # A's run may go on
            first = first.result(timeout=120)
    assert first.status_code == second.status_code == 302
    assert "Another state_store_clean run is in progress" in on_b.get(f"{b}/gc/", timeout=30).text
    assert re.search(r"GC run #\d+: deleted \d+ expired task state row", on_a.get(f"{a}/gc/", timeout=30).text)


def test_redis_stopped_mid_run_costs_no_500_and_counts_again_once_back(two):
    session = sign_in(two.bases[0], two.password)
    # Redis stops: every answer stays below 500, the token throttle fails open (never counts, never refuses),
    # and the servers stay ready, saying the cache does not answer.
    two.redis_server.terminate()
    two.redis_server.wait(timeout=30)
    for base in two.bases:
        for _ in range(LIMIT + 2):
            assert bearer(base, "ssa_wrong", "203.0.113.3").status_code == 401
        assert bearer(base, two.token, "203.0.113.4").status_code == 200
        assert session.get(f"{base}/", timeout=30).status_code == 200
        ready = requests.get(f"{base}/readyz", timeout=30)
        assert ready.status_code == 200 and ready.json()["cache"]["status"] == "connection refused"

    # Redis is back (empty): once each worker tries it again, failures count again across both servers.
    with private_redis(two.redis_port):
        wait_for_cache(two.bases, ok=True)
        time.sleep(RETRY_SECONDS + 0.5)  # every worker's pause after its last failure is over
        assert statuses_until_429(two.bases, "203.0.113.5", 3 * LIMIT) == [401] * LIMIT + [429]
