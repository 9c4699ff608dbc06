"""The shared cache (statestore_admin/cache.py, settings.CACHES): the checks that name a cache unfit for the
server, /readyz's report, and a cache that does not answer: no 500, the token throttle fails open."""

import concurrent.futures
import sys

import pytest
from django.core.cache import cache
from django.db import connections
from django.test import Client

from statestore_admin import cache as shared_cache
from statestore_admin.dashboard.checks import check_cache
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES
from tests.faults import TcpProxy
from tests.ports import free_port

LOCMEM = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


def redis_cache(port):
    return {
        "default": {
            "BACKEND": "statestore_admin.cache.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/0",
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }


@pytest.fixture
def fresh_caches():
    """No breaker left open by another test (Django builds new backends when a test changes CACHES)."""
    shared_cache._down_until.clear()
    yield
    shared_cache._down_until.clear()


def test_the_default_cache_is_the_dashboard_database():
    from django.conf import settings

    assert settings.CACHES["default"]["BACKEND"] == "statestore_admin.cache.DatabaseCache"
    assert check_cache() == []


def test_a_per_process_cache_under_several_workers_is_a_warning(settings, monkeypatch):
    settings.CACHES = LOCMEM
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    (warning,) = check_cache()
    assert warning.id == "statestore.W004" and "3 workers" in warning.msg and "CACHE_URL" in warning.hint
    monkeypatch.setenv("WEB_CONCURRENCY", "1")  # one process: its memory is shared by all its threads
    assert check_cache() == []


def test_redis_without_the_redis_package_is_an_error(settings, monkeypatch):
    settings.CACHES = redis_cache(6379)  # never connected to: the check only imports
    monkeypatch.setitem(sys.modules, "redis", None)  # as if it were not installed
    (error,) = check_cache()
    assert error.id == "statestore.E011" and "requirements.txt" in error.hint


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_a_redis_that_refuses_answers_as_an_empty_cache_and_the_throttle_fails_open(
    settings, fresh_caches, operator, caplog
):
    settings.CACHES = redis_cache(free_port())  # nothing listens there
    settings.TOKEN_FAILURE_LIMIT = 2
    assert cache.get("anything", "default") == "default"
    assert cache.set("anything", 1) is False and cache.add("anything", 1) is False
    assert cache.get_many(["a", "b"]) == {}
    warnings = [r for r in caplog.records if r.name == "statestore_admin.cache"]
    assert len(warnings) == 1 and "connection refused" in warnings[0].getMessage().lower()  # logged once

    client = Client()
    for _ in range(5):  # fails open: never counted, never refused
        response = client.get("/api/statestore/v1/stats", HTTP_AUTHORIZATION="Bearer ssa_wrong")
        assert response.status_code == 401
    token = ApiToken.issue(operator, "tests")[1]
    response = client.get("/api/statestore/v1/stats", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200

    ready = client.get("/readyz")  # reported, not unready
    assert ready.status_code == 200
    assert ready.json()["cache"] == {"backend": "redis", "status": "connection refused"}


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_add_takes_an_expired_entry_once(fresh_caches):
    """The database cache's add: an expired row is replaced, an unexpired one is not."""
    assert cache.add("ticket", 1, 1) is True
    assert cache.add("ticket", 2, 1) is False
    from statestore_admin.records.models import CacheEntry

    CacheEntry.objects.update(expires="2000-01-01T00:00:00Z")
    assert cache.add("ticket", 3, 60) is True and cache.get("ticket") == 3


@pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True)  # the requests run in a thread of their own
def test_a_redis_that_never_answers_costs_its_short_deadline_not_a_hang(settings, fresh_caches, operator):
    """A Redis (or a network) that accepts connections and then says nothing: the socket deadline
    (CACHE_TIMEOUT) ends each try, the answers are those of an empty cache, and /readyz says "timeout"."""
    token = ApiToken.issue(operator, "tests")[1]

    def requests_with_a_hung_cache():
        client = Client()
        wrong = [
            client.get("/api/statestore/v1/stats", HTTP_AUTHORIZATION="Bearer ssa_wrong").status_code for _ in range(4)
        ]
        valid = client.get("/api/statestore/v1/stats", HTTP_AUTHORIZATION=f"Bearer {token}").status_code
        ready = client.get("/readyz")
        connections.close_all()  # this thread's
        return wrong, valid, ready.status_code, ready.json()["cache"]

    with TcpProxy(free_port()) as proxy:
        proxy.black_hole()
        settings.CACHES = redis_cache(proxy.port)
        settings.TOKEN_FAILURE_LIMIT = 2
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            wrong, valid, ready, cache_state = pool.submit(requests_with_a_hung_cache).result(timeout=60)  # no hang
    assert wrong == [401] * 4 and valid == 200  # fails open: never counted, never refused
    assert ready == 200 and cache_state == {"backend": "redis", "status": "timeout"}
