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

import pytest
import requests

from statestore_admin.cache import RETRY_SECONDS
from tests.operations.test_production import free_port
from tests.operations.test_serving import _run, databases, gunicorn, server_environment

STATS = "/api/statestore/v1/stats"

SETUP = """
import json, sys
from io import StringIO
from django.contrib.auth import get_user_model
from django.core.management import call_command

get_user_model().objects.create_superuser("admin", "admin@example.com", sys.stdin.read().strip())
out = StringIO()
call_command("create_api_token", "admin", "--name", "scale-out", stdout=out)
print(json.dumps({"token": out.getvalue().strip()}))
"""


def prepare(env, password) -> str:
    """Migrate the dashboard's database (the cache's table with it), Airflow's schema, a superuser; its token."""
    manage = [sys.executable, "manage.py"]
    _run([*manage, "migrate", "--noinput", "--verbosity", "0"], env)
    _run([*manage, "create_airflow_schema"], env)
    return json.loads(_run([*manage, "shell", "--no-imports", "-c", SETUP], env, input=password))["token"]


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
        token = prepare(env, uuid.uuid4().hex)
        with gunicorn(tmp_path, env):
            base = f"http://127.0.0.1:{env['PORT']}"
            # One after the other: exactly the limit answers 401, then 429 with Retry-After, valid token or not.
            assert statuses_until_429([base], "203.0.113.1", 3 * limit) == [401] * limit + [429]
            refused = bearer(base, token, "203.0.113.1")
            assert refused.status_code == 429 and 0 < int(refused.headers["Retry-After"]) <= 15 * 60
            assert bearer(base, token, "203.0.113.2").status_code == 200  # another address is not affected

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


def wait_for_cache(bases, ok: bool):
    """Until every server's /readyz says the cache answers (``ok``) or does not: a bounded wait."""
    started = time.monotonic()
    while True:
        states = [requests.get(f"{base}/readyz", timeout=30).json()["cache"]["status"] == "ok" for base in bases]
        if all(state == ok for state in states):
            return
        assert time.monotonic() - started < 60, states
        time.sleep(0.2)


@pytest.fixture
def postgres_pass():
    if os.environ.get("STATESTORE_TEST_DB", "sqlite") != "postgres":
        pytest.skip("runs once, in the STATESTORE_TEST_DB=postgres pass (two servers share one PostgreSQL database)")


def test_two_servers_share_one_database_and_one_redis(tmp_path, postgres_pass):
    limit = 5
    password = uuid.uuid4().hex
    redis_port = free_port()
    with databases() as urls, private_redis(redis_port) as redis_server:
        shared = dict(
            urls,
            SECRET_KEY="scale-out-" + uuid.uuid4().hex,  # the same on every server: sessions, CSRF
            CACHE_URL=f"redis://127.0.0.1:{redis_port}/0",
            TOKEN_FAILURE_LIMIT=str(limit),
            TRUSTED_PROXY_COUNT="1",
            WEB_CONCURRENCY="2",
            GUNICORN_THREADS="4",
        )
        env_a = server_environment(tmp_path / "a", **shared)
        env_b = server_environment(tmp_path / "b", **shared)
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        token = prepare(env_a, password)
        with gunicorn(tmp_path / "a", env_a), gunicorn(tmp_path / "b", env_b):
            bases = [f"http://127.0.0.1:{env['PORT']}" for env in (env_a, env_b)]
            for base in bases:
                assert requests.get(f"{base}/readyz", timeout=30).json()["cache"] == {
                    "backend": "redis",
                    "status": "ok",
                }

            # Wrong tokens taking turns between the two servers: refused at the limit, on both.
            assert statuses_until_429(bases, "203.0.113.1", 3 * limit) == [401] * limit + [429]
            assert [bearer(base, token, "203.0.113.1").status_code for base in bases] == [429, 429]
            # All at once on both servers: each failure counted once.
            with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
                burst = list(
                    pool.map(lambda n: bearer(bases[n % 2], "ssa_wrong", "203.0.113.2").status_code, range(20))
                )
            assert sorted(burst) == [401] * limit + [429] * (20 - limit), burst

            # A session made on one server works on the other (sessions live in the shared database).
            session = sign_in(bases[0], password)
            page = session.get(f"{bases[1]}/", timeout=30, allow_redirects=False)
            assert page.status_code == 200 and "/login/" not in page.headers.get("Location", "")

            # Redis stops: every answer stays below 500, the token throttle fails open (never counts, never
            # refuses), and the servers stay ready, saying the cache does not answer.
            redis_server.terminate()
            redis_server.wait(timeout=30)
            for base in bases:
                for _ in range(limit + 2):
                    assert bearer(base, "ssa_wrong", "203.0.113.3").status_code == 401
                assert bearer(base, token, "203.0.113.4").status_code == 200
                assert session.get(f"{base}/", timeout=30).status_code == 200
                ready = requests.get(f"{base}/readyz", timeout=30)
                assert ready.status_code == 200 and ready.json()["cache"]["status"] == "connection refused"

            # Redis is back (empty): once each worker tries it again, failures count again across both servers.
            with private_redis(redis_port):
                wait_for_cache(bases, ok=True)
                time.sleep(RETRY_SECONDS + 0.5)  # every worker's pause after its last failure is over
                assert statuses_until_429(bases, "203.0.113.5", 3 * limit) == [401] * limit + [429]
