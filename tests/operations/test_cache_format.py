"""What the shared cache holds is data, never code (statestore_admin/cache.py; docs/operations.md, "Several
servers"): values are signed JSON on Redis and on the database cache alike; a value the dashboard did not
write (a planted pickle, unsigned JSON, garbage, another SECRET_KEY's) is a miss, logged once, never run and
never a 500; backends that would unpickle a shared store are refused; `check --deploy` names a Redis without
a password."""

import base64
import json
import os
import pickle
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from django.core.cache import cache
from django.db import connections
from django.test import Client

from statestore_admin import cache as shared_cache
from statestore_admin.access.actors import Actor
from statestore_admin.access.reach import _DAG_IDS_CACHE_KEY
from statestore_admin.dashboard.checks import check_cache, check_cache_password
from statestore_admin.records.models import AccessScope
from tests.conftest import ALL_PERMS, BOTH_DATABASES
from tests.contracts.test_security import ROOT, manage, production_env  # noqa: F401  (a fixture)
from tests.operations.test_cache import redis_cache
from tests.operations.test_scale_out import private_redis
from tests.ports import free_port

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

STATS = "/api/statestore/v1/stats"
THROTTLE_TICKET = "statestore:token-failure:127.0.0.1:0"  # the first ticket of the test client's address


class Gadget:
    """Unpickling this creates ``path``: what a planted value could do if it were unpickled."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.fixture(params=["redis", "database"])
def store(request, settings):
    """The cache (a private Redis, or the dashboard database's table) and a way to write and read its raw
    entries as another writer would: ``plant(key, bytes_or_text)``, ``raw(key)``."""
    shared_cache._down_until.clear()
    if request.param == "redis":
        import redis

        port = free_port()
        with private_redis(port):
            settings.CACHES = redis_cache(port)
            client = redis.Redis(port=port)
            yield {
                "plant": lambda key, value: client.set(cache.make_key(key), value, ex=300),
                "raw": lambda key: client.get(cache.make_key(key)),
                "pickled": pickle.dumps,  # what Django's Redis backend stores
            }
    else:
        connection = connections["default"]
        quote = connection.ops.quote_name

        def plant(key, value):
            with connection.cursor() as cursor:
                cursor.execute(
                    f"DELETE FROM {quote('statestore_cache')} WHERE {quote('cache_key')} = %s", [cache.make_key(key)]
                )
                cursor.execute(
                    f"INSERT INTO {quote('statestore_cache')} ({quote('cache_key')}, {quote('value')}, "
                    f"{quote('expires')}) VALUES (%s, %s, %s)",
                    [
                        cache.make_key(key),
                        value.decode("latin-1") if isinstance(value, bytes) else value,
                        connection.ops.adapt_datetimefield_value(datetime(2999, 1, 1, tzinfo=UTC)),
                    ],
                )

        def raw(key):
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT {quote('value')} FROM {quote('statestore_cache')} WHERE {quote('cache_key')} = %s",
                    [cache.make_key(key)],
                )
                row = cursor.fetchone()
            return None if row is None else row[0].encode()

        yield {
            "plant": plant,
            "raw": raw,
            "pickled": lambda value: base64.b64encode(pickle.dumps(value)),  # what Django's database cache stores
        }
    shared_cache._down_until.clear()


def cache_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "statestore_admin.cache" and r.levelname == "WARNING"]


def assert_signed_json(raw: bytes, key: str, expected):
    """Compact JSON of the key and the value, ``:``, its signature: no pickle opcode anywhere."""
    assert raw is not None and not raw.startswith(b"\x80") and b"\x80" not in raw
    text, signature = raw.decode().rsplit(":", 1)
    assert json.loads(text) == [cache.make_key(key), expected] and len(signature) >= 40


def test_a_planted_pickle_under_the_token_throttle_is_a_miss_not_code(store, tmp_path, caplog):
    """The throttle reads its tickets before anyone is authenticated: a pickle there is not run, the wrong
    token is still a 401, and the ticket the failure takes is written as signed JSON."""
    created = tmp_path / "owned"
    store["plant"](THROTTLE_TICKET, store["pickled"](Gadget(created)))
    response = Client().get(STATS, HTTP_AUTHORIZATION="Bearer ssa_wrong")
    assert response.status_code == 401
    assert not created.exists()
    (warning,) = cache_warnings(caplog)
    assert THROTTLE_TICKET in warning and "read as missing" in warning
    key, ticket = json.loads(store["raw"](THROTTLE_TICKET).decode().rsplit(":", 1)[0])
    assert key == cache.make_key(THROTTLE_TICKET) and isinstance(
        ticket, float
    )  # the planted value was dropped; this failure took the ticket


def test_a_planted_pickle_under_the_dag_ids_with_state_is_a_miss_not_code(
    store, tmp_path, caplog, user_factory, dag_run_factory, task_key_factory
):
    """A scoped user's pages read the cached list of DAGs with state: a pickle there is not run, the page
    answers from Airflow's table, and the list is written again as signed JSON."""
    task_key_factory(dag_run_factory(dag_id="etl_a"), key="watermark")
    task_key_factory(dag_run_factory(dag_id="ml_x"), key="cursor")
    user = user_factory("etl-op", perms=ALL_PERMS, unscoped=False)
    AccessScope.objects.create(user=user, kind="dag", pattern="etl_*")
    client = Client()
    client.force_login(user)
    created = tmp_path / "owned"
    store["plant"](_DAG_IDS_CACHE_KEY, store["pickled"](Gadget(created)))

    response = client.get("/dags/?q=_")  # the DAG list's filter: matched on the list
    page = response.content.decode()
    assert response.status_code == 200 and "etl_a" in page and "ml_x" not in page
    assert not created.exists()
    (warning,) = cache_warnings(caplog)
    assert _DAG_IDS_CACHE_KEY in warning
    assert_signed_json(store["raw"](_DAG_IDS_CACHE_KEY), _DAG_IDS_CACHE_KEY, ["etl_a", "ml_x"])


@pytest.mark.parametrize(
    "planted",
    [
        b"garbage \xff\xfe",
        b'"not a number"',  # JSON, but unsigned: read as a string it would break the throttle's comparison
        b'"x":AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',  # a wrong signature
    ],
    ids=["garbage", "unsigned-json", "wrong-signature"],
)
def test_any_value_the_dashboard_did_not_sign_is_a_miss(store, planted, caplog):
    store["plant"](THROTTLE_TICKET, planted)
    assert Client().get(STATS, HTTP_AUTHORIZATION="Bearer ssa_wrong").status_code == 401
    assert len(cache_warnings(caplog)) == 1


def test_a_value_signed_under_another_secret_key_is_a_miss(store, settings, caplog):
    cache.set("figure", [1, 2])
    settings.SECRET_KEY = "another-deployment-" + "x" * 40
    assert cache.get("figure", "missing") == "missing"
    assert len(cache_warnings(caplog)) == 1
    assert cache.get("figure", "missing") == "missing" and len(cache_warnings(caplog)) == 1  # deleted: once


def test_a_rotated_secret_key_still_reads_what_the_old_one_signed(store, settings):
    cache.set("figure", {"keys": 3})
    old = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "the-new-key-" + "y" * 40, [old]
    assert cache.get("figure") == {"keys": 3}


def test_what_the_cache_stores_is_signed_json(store):
    values = {"ticket": 1764950400.25, "dag-ids": ["etl_a", "ml_x"], "sums": {"keys": 3, "bytes": 40}, "n": 7}
    for key, value in values.items():
        assert cache.set(key, value) is not False
        assert_signed_json(store["raw"](key), key, value)
        assert cache.get(key) == value
    assert cache.add("new", 1.5, 60) is True
    assert_signed_json(store["raw"]("new"), "new", 1.5)
    assert cache.get_many(["n", "sums", "absent"]) == {"n": 7, "sums": {"keys": 3, "bytes": 40}}
    assert cache.set_many({"a": 1, "b": ["x"]}) == []
    assert_signed_json(store["raw"]("b"), "b", ["x"])
    assert cache.get_many(["a", "b"]) == {"a": 1, "b": ["x"]}
    assert cache.incr("a", 2) == 3 and cache.get("a") == 3


def test_a_value_that_is_not_json_is_refused_when_written(store):
    """What the dashboard caches must be JSON: a datetime (say) fails in the tests, at the write."""
    with pytest.raises(TypeError):
        cache.set("when", datetime.now(tz=UTC))


def test_sessions_are_in_the_database_as_json(settings):
    assert settings.SESSION_ENGINE == "django.contrib.sessions.backends.db"
    assert settings.SESSION_SERIALIZER == "django.contrib.sessions.serializers.JSONSerializer"


@pytest.mark.parametrize(
    "backend",
    [
        "django.core.cache.backends.redis.RedisCache",
        "django.core.cache.backends.db.DatabaseCache",
        "django.core.cache.backends.filebased.FileBasedCache",
        "django.core.cache.backends.memcached.PyMemcacheCache",
    ],
)
def test_a_backend_that_would_unpickle_a_shared_store_is_an_error(settings, backend):
    settings.CACHES = {**settings.CACHES, "other": {"BACKEND": backend, "LOCATION": "x"}}
    (error,) = check_cache()
    assert error.id == "statestore.E012" and "'other'" in error.msg and "redis://" in error.hint


@pytest.mark.parametrize(
    "url, warned",
    [
        ("redis://statestore-redis:6379/0", True),
        ("rediss://statestore-redis:6380/0", True),  # TLS hides the traffic, and anyone may still write
        ("redis://:s3cret@statestore-redis:6379/0", False),
        ("rediss://dashboard:s3cret@statestore-redis:6380/0", False),
        ("redis://statestore-redis:6379/0?password=s3cret", False),
        ("redis://dashboard:@statestore-redis:6379/0", True),  # a user name, and an empty password
        ("redis://statestore-redis:6379/0?password=", True),
        ("redis://statestore-redis:port/0", True),  # named as written, not a traceback
    ],
)
def test_check_deploy_warns_of_a_redis_without_a_password(settings, url, warned):
    settings.CACHES = redis_cache(6379)  # never connected to
    settings.CACHES["default"]["LOCATION"] = url
    ids = [w.id for w in check_cache_password()]
    assert ids == (["statestore.W012"] if warned else [])
    assert all("s3cret" not in w.msg for w in check_cache_password())
    settings.DEBUG = True
    assert check_cache_password() == []


def test_check_deploy_names_a_redis_without_a_password_in_a_fresh_process(production_env):  # noqa: F811
    result = manage("check", "--deploy", env={**production_env, "CACHE_URL": "redis://127.0.0.1:9/0"})
    output = result.stdout + result.stderr
    assert "statestore.W012" in output and "redis://127.0.0.1:9" in output, output
    result = manage("check", "--deploy", env={**production_env, "CACHE_URL": "redis://:pw@127.0.0.1:9/0"})
    assert result.returncode == 0 and "statestore.W012" not in result.stdout + result.stderr


def test_check_refuses_a_pickling_cache_url_in_a_fresh_process(production_env, tmp_path):  # noqa: F811
    result = manage("check", env={**production_env, "CACHE_URL": f"filecache://{tmp_path}/cache"})
    assert result.returncode != 0 and "statestore.E012" in result.stderr, result.stdout + result.stderr


def test_a_server_started_without_manage_py_refuses_a_pickling_cache_too(production_env, tmp_path):  # noqa: F811
    """gunicorn alone (no `migrate` and its checks first): each worker's wsgi module stops."""
    result = subprocess.run(
        [sys.executable, "-c", "import statestore_admin.wsgi"],
        cwd=ROOT,
        env={**production_env, "CACHE_URL": f"filecache://{tmp_path}/cache"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "ImproperlyConfigured" in result.stderr
    assert "stores pickles in a store others may write" in result.stderr, result.stderr


def test_a_value_signed_for_one_key_is_a_miss_under_another(store, caplog):
    """Whoever can write to the cache can copy what the dashboard signed from one key to another (the list of
    DAGs with state into a token-failure ticket, one scope's kept sums into another scope's): the signature
    covers the key too, so the copy is a miss like any value the dashboard did not sign there."""
    cache.set(_DAG_IDS_CACHE_KEY, ["etl_a", "ml_x"])
    store["plant"](THROTTLE_TICKET, store["raw"](_DAG_IDS_CACHE_KEY))
    assert Client().get(STATS, HTTP_AUTHORIZATION="Bearer ssa_wrong").status_code == 401  # no 500
    (warning,) = cache_warnings(caplog)
    assert THROTTLE_TICKET in warning
    cache.set("statestore:snapshot:team-a", {"keys": 7})
    store["plant"]("statestore:snapshot:team-b", store["raw"]("statestore:snapshot:team-a"))
    assert cache.get("statestore:snapshot:team-b", "missing") == "missing"


@pytest.mark.parametrize("planted", ["not a number", ["etl_a"], {"t": 1}, True, None])
def test_a_ticket_of_the_wrong_type_is_not_counted(store, planted):
    """A value of the wrong JSON type under a ticket (written by another release, say) counts as no ticket:
    the wrong token is a 401, never a 500."""
    cache.set(THROTTLE_TICKET, planted, 300)
    assert Client().get(STATS, HTTP_AUTHORIZATION="Bearer ssa_wrong").status_code == 401


@pytest.mark.parametrize("planted", [7, "etl_a", [["etl_a"]], {"etl_a": 1}, [1, 2]])
def test_a_list_of_dags_of_the_wrong_type_is_read_afresh(
    store, planted, user_factory, dag_run_factory, task_key_factory
):
    task_key_factory(dag_run_factory(dag_id="etl_a"), key="watermark")
    user = user_factory("etl-op", perms=ALL_PERMS, unscoped=False)
    AccessScope.objects.create(user=user, kind="dag", pattern="etl_*")
    client = Client()
    client.force_login(user)
    cache.set(_DAG_IDS_CACHE_KEY, planted, 300)
    response = client.get("/dags/?q=_")
    assert response.status_code == 200 and "etl_a" in response.content.decode()


KEPT_READS = [
    "/",
    "/dags/?q=_",
    STATS,
    "/insights/",
    "/api/statestore/v1/insights/series?days=30",
    "/api/statestore/v1/insights/top?by=keys",
    "/api/statestore/v1/insights/top?by=bytes",
]


@pytest.mark.parametrize("planted", ["text", 7, [["etl_a", "x"]], {"keys": "many"}, [1, [["etl_a"]]], None])
def test_every_key_the_dashboard_reads_holding_the_wrong_type_is_read_afresh(
    settings, monkeypatch, planted, user_factory, dag_run_factory, task_key_factory, asset_factory, asset_key_factory
):
    """Whatever JSON holds a key the dashboard reads (another release's shape, say, signed for that key), the
    pages and the API that read it compute afresh instead of answering 500: the list of DAGs with state, a
    scoped user's sums of snapshots and count of asset keys, the GC preview's DAGs, the token tickets."""
    import redis

    from statestore_admin.core import counting
    from statestore_admin.stats import snapshots as stats

    monkeypatch.setattr(counting, "ESTIMATE_ABOVE", 1)  # "a large table": a scope's asset keys are counted, kept
    task_key_factory(dag_run_factory(dag_id="etl_a"), key="watermark")
    task_key_factory(dag_run_factory(dag_id="ml_x"), key="cursor")
    asset_key_factory(asset_factory(name="etl.orders"), key="offset")
    asset_key_factory(asset_factory(name="ml.features"), key="offset")
    port = free_port()
    with private_redis(port):
        settings.CACHES = redis_cache(port)
        shared_cache._down_until.clear()
        stats.take_snapshot(actor=Actor.command())
        scoped = Client()
        user = user_factory("etl-op", perms=ALL_PERMS, unscoped=False)
        AccessScope.objects.create(user=user, kind="dag", pattern="etl_*")
        AccessScope.objects.create(user=user, kind="asset", pattern="etl.*")
        scoped.force_login(user)
        admin = Client()
        admin.force_login(user_factory("admin", perms=ALL_PERMS))
        reads = [(scoped, url) for url in KEPT_READS] + [(admin, "/api/statestore/v1/gc/dry-run")]
        for client, url in reads:
            assert client.get(url).status_code == 200, url
        assert Client().get(STATS, HTTP_AUTHORIZATION="Bearer ssa_wrong").status_code == 401  # takes a ticket
        prefix = cache.make_key("")
        written = [k.decode().removeprefix(prefix) for k in redis.Redis(port=port).keys(prefix + "statestore:*")]
        for kind in ("snapshot:", "scoped-asset-keys:", "dag-ids-with-state", "token-failure:"):
            assert any(key.startswith("statestore:" + kind) for key in written), (kind, written)
        for key in written:
            cache.set(key, planted, 300)
        for client, url in reads:
            assert client.get(url).status_code == 200, url
        assert Client().get(STATS, HTTP_AUTHORIZATION="Bearer ssa_wrong").status_code == 401
    shared_cache._down_until.clear()


SHOW_CACHE = (
    "from django.conf import settings; from django.core.cache import cache; "
    "print(settings.CACHES['default']['BACKEND']); cache.set('probe', [1]); print(cache.get('probe'))"
)


@pytest.mark.parametrize("scheme", ["unix", "UNIX", "REDIS"])
def test_redis_over_a_unix_socket_or_an_upper_case_scheme_is_the_signed_json_cache(
    production_env,  # noqa: F811
    tmp_path,
    scheme,
):
    """`CACHE_URL=unix:///path/redis.sock` (Redis on the same host) and a scheme in capitals (URL schemes are
    case-insensitive) are Redis like redis://, with the dashboard's backend: not a start refused by
    django-environ nor Django's pickling backend (statestore.E012). A socket is not named by W012: its file
    permissions decide who connects."""
    import redis

    socket = tmp_path / "redis.sock"
    port = free_port()
    process = subprocess.Popen(
        [
            "/usr/bin/redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--unixsocket",
            str(socket),
            "--unixsocketperm",
            "700",
            "--requirepass",
            "s3cret",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(unix_socket_path=str(socket), password="s3cret", socket_connect_timeout=1)
        for _ in range(300):
            try:
                client.ping()
                break
            except redis.RedisError:
                import time

                time.sleep(0.1)
        url = (
            f"{scheme}://:s3cret@{socket}?db=1"
            if scheme.lower() == "unix"
            else f"{scheme}://:s3cret@127.0.0.1:{port}/1"
        )
        env = {**production_env, "CACHE_URL": url}
        result = manage("shell", "-v", "0", "-c", SHOW_CACHE, env=env)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["statestore_admin.cache.RedisCache", "[1]"]
        raw = redis.Redis(unix_socket_path=str(socket), password="s3cret", db=1).get(":1:probe")
        assert raw is not None and raw.startswith(b'[":1:probe",[1]]:')  # signed JSON, the key with it
        if scheme == "unix":
            result = manage("check", "--deploy", env=env)
            assert "statestore.W012" not in result.stdout + result.stderr and "s3cret" not in result.stderr
    finally:
        process.terminate()
        process.wait(timeout=30)
