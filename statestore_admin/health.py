"""Health endpoints for load balancers and orchestrators; no login, and nothing in them but a status.

- ``GET /healthz``: the process answers. No database is touched.
- ``GET /readyz``: both databases (the dashboard's own and Airflow's) answer ``SELECT 1`` within
  ``READY_TIMEOUT`` seconds each, probed in parallel on fresh connections, never the request thread's.
  PostgreSQL is probed through libpq's non-blocking API with a deadline of our own, so the bound holds
  even when the server (or a proxy in front of it) accepts the connection and then never answers;
  the probe's connection is closed whatever happens. 503 names the database that failed and a short
  reason (timeout, refused, authentication, ...); the full error goes to the server's log only.
  Once Airflow's database answers, ``airflow_schema`` says which Airflow schema it has (3.3 or 3.4, and its
  alembic revision); a schema the dashboard does not support (or a migration that has not finished) is
  not ready either, and the answer says why. ``cache`` names the shared cache's backend and whether a value
  written to it reads back within the same deadline; a cache that fails does not make the server unready
  (below).
  With ``AIRFLOW_API_URL`` (managed Airflow, no Airflow database) ``airflow_api`` replaces Airflow's database:
  ready when Airflow's API answers with the dashboard's token within the same deadline.
"""

import logging
import selectors
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.cache import caches
from django.db import connections
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from psycopg import pq
from psycopg.conninfo import make_conninfo

from statestore_admin.airflow import rest, versions
from statestore_admin.airflow.router import airflow_alias

log = logging.getLogger(__name__)

READY_TIMEOUT = 2.0  # seconds, per database
OK = "ok"


class ProbeTimeout(Exception):
    pass


@login_not_required
@never_cache
@require_safe
def healthz(request):
    return JsonResponse({"status": "ok"})


@login_not_required
@never_cache
@require_safe
def readyz(request):
    airflow = airflow_alias()
    api_mode = settings.AIRFLOW_API_MODE
    aliases = [alias for alias in connections if not (api_mode and alias == airflow)]
    with ThreadPoolExecutor(max_workers=len(aliases) + 1) as pool:
        api = pool.submit(probe_api) if api_mode else None
        results = dict(zip(aliases, pool.map(probe, aliases), strict=True))
        schema = pool.submit(probe_schema, airflow).result() if results.get(airflow) == OK else None
        cache = probe_cache()
        api_answer = api.result() if api is not None else None
    # The cache is reported, never a reason to take the server out of the load balancer: what it keeps can be
    # recomputed, the token throttle fails open without it (throttling.py), and with a shared Redis down every
    # replica would be unready at once, turning a cache outage into a whole outage.
    ready = all(result == OK for result in results.values()) and (schema is None or "series" in schema)
    ready = ready and (api_answer is None or api_answer["status"] == OK)
    body = {"status": "ok" if ready else "unavailable", "databases": results, "cache": cache}
    if schema is not None:
        body["airflow_schema"] = schema
    if api_answer is not None:
        body["airflow_api"] = api_answer
    return JsonResponse(body, status=200 if ready else 503)


def probe_api(timeout: float = READY_TIMEOUT) -> dict:
    """Managed Airflow (``AIRFLOW_API_URL``): ``{"status": "ok", "version"}`` when Airflow's API answers with the
    dashboard's token within ``timeout`` seconds (one attempt, no retries: a load balancer asks again), else
    ``{"status": reason}``. The reason is Airflow's or ours, never the token."""
    api = rest.AirflowApi(replace(rest.settings_from_django(), timeout=timeout, retries=0))
    api.token = rest.client().token  # the process's token: a token command is not run at every probe
    answer = rest.probe(api)
    if "version" in answer:
        return {"status": OK, "version": answer["version"]}
    log.warning("readyz: Airflow's API is unavailable: %s", answer["error"])
    return {"status": answer["error"]}


def probe_cache(timeout: float = READY_TIMEOUT) -> dict:
    """``{"backend": …, "status": "ok" or a short reason}``: the default cache, written and read back in a
    thread of its own within ``timeout`` seconds (a Redis client has its own, shorter socket deadlines)."""
    backend = settings.CACHES["default"]["BACKEND"]
    name = {"statestore_admin.cache.DatabaseCache": "database", "statestore_admin.cache.RedisCache": "redis"}.get(
        backend, backend.rsplit(".", 1)[-1]
    )

    def write_and_read():
        cache = caches.create_connection("default")
        try:
            cache.probe() if hasattr(cache, "probe") else cache.set("statestore:readyz", 1, 10)
        finally:
            cache.close()
            connections.close_all()  # this thread's connections (the database cache's), not the request's

    pool = ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(write_and_read).result(timeout=timeout)
        status = OK
    except TimeoutError:
        log.warning("readyz: the cache did not answer within %ss", timeout)
        status = f"timeout after {timeout:g}s"
    except Exception as exc:  # reported, not raised: the details stay in the log
        log.warning("readyz: the cache is unavailable: %s", exc)
        status = _reason(str(exc))
    finally:
        pool.shutdown(wait=False)
    return {"backend": name, "status": status}


def probe_schema(alias: str, timeout: float = READY_TIMEOUT) -> dict:
    """Which Airflow schema database ``alias`` has (``AirflowSchema.as_dict`` and ``describe``), on a fresh
    connection with a ``timeout`` deadline where the backend has one; ``{"unsupported": why}`` otherwise."""
    wrapper = connections.create_connection(alias)
    if wrapper.vendor == "sqlite":  # a copy: the alias's own settings keep their longer busy timeout
        wrapper.settings_dict = {
            **wrapper.settings_dict,
            "OPTIONS": {**wrapper.settings_dict["OPTIONS"], "timeout": timeout},
        }
    try:
        if hasattr(wrapper, "set_query_timeout"):
            wrapper.set_query_timeout(timeout)
        schema = versions.detect(wrapper)
        return {**schema.as_dict(), "describe": schema.describe()}
    except versions.UnsupportedAirflowSchema as exc:
        return {"unsupported": exc.reason}
    except Exception as exc:  # the probe answered a moment ago: report, do not raise
        log.warning("readyz: cannot read the Airflow schema of %r: %s", alias, exc)
        return {"unsupported": _reason(str(exc))}
    finally:
        wrapper.close()


def probe(alias: str, timeout: float = READY_TIMEOUT) -> str:
    """``"ok"``, or a short reason why database ``alias`` did not answer ``SELECT 1`` within ``timeout`` s."""
    wrapper = connections.create_connection(alias)  # reads the settings only; never connects
    try:
        if wrapper.vendor == "postgresql":
            _probe_postgresql(wrapper.get_connection_params(), timeout)
        elif wrapper.vendor == "sqlite":
            _probe_sqlite(wrapper.settings_dict["NAME"], timeout)
        else:
            return f"unsupported database vendor {wrapper.vendor}"
    except ProbeTimeout:
        log.warning("readyz: database %r did not answer within %ss", alias, timeout)
        return f"timeout after {timeout:g}s"
    except Exception as exc:  # any failure is "not ready"; the details stay in the log
        log.warning("readyz: database %r is unavailable: %s", alias, exc)
        return _reason(str(exc))
    return OK


def _reason(message: str) -> str:
    text = message.lower()
    for needles, reason in (
        (("connection refused",), "connection refused"),
        (("timeout",), "timeout"),
        (("timed out",), "timeout"),
        (("could not translate host name",), "unknown host"),
        (("no route to host",), "no route to host"),
        (("authentication failed",), "authentication failed"),
        (("no pg_hba.conf entry",), "authentication failed"),
        (('role "', "does not exist"), "role does not exist"),
        (('database "', "does not exist"), "database does not exist"),
        (("too many clients",), "too many connections"),
        (("starting up",), "database is starting up"),
        (("shutting down",), "database is shutting down"),
        (("unable to open database file",), "database file cannot be opened"),
    ):
        if all(needle in text for needle in needles):
            return reason
    return "error (see the server log)"


def _libpq_params(params: dict) -> bytes:
    """The libpq keywords of Django's connection parameters (not psycopg's Python-side ones), as a conninfo."""
    keywords = {option.keyword.decode() for option in pq.Conninfo.get_defaults()}
    libpq = {key: value for key, value in params.items() if key in keywords and value not in (None, "")}
    return make_conninfo("", **libpq).encode()


def _probe_postgresql(params: dict, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    conn = pq.PGconn.connect_start(_libpq_params(params))
    try:
        if conn.status == pq.ConnStatus.BAD:
            raise RuntimeError(conn.get_error_message())
        status = pq.PollingStatus.WRITING
        while status != pq.PollingStatus.OK:
            if status == pq.PollingStatus.FAILED:
                raise RuntimeError(conn.get_error_message())
            _wait(conn, selectors.EVENT_READ if status == pq.PollingStatus.READING else selectors.EVENT_WRITE, deadline)
            status = conn.connect_poll()
        conn.nonblocking = 1
        conn.send_query(b"SELECT 1")  # psycopg's pq raises on libpq's failures (here, flush, consume_input)
        while conn.flush():
            _wait(conn, selectors.EVENT_WRITE, deadline)
        result = None
        while True:
            while conn.is_busy():
                _wait(conn, selectors.EVENT_READ, deadline)
                conn.consume_input()
            current = conn.get_result()
            if current is None:
                break
            result = current
        if result is None or result.status != pq.ExecStatus.TUPLES_OK:
            raise RuntimeError(result.error_message if result is not None else conn.get_error_message())
    finally:
        conn.finish()


def _wait(conn, event: int, deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ProbeTimeout
    with selectors.DefaultSelector() as selector:
        selector.register(conn.socket, event)
        if not selector.select(remaining):
            raise ProbeTimeout


def _probe_sqlite(name, timeout: float) -> None:
    uri = f"{Path(name).resolve().as_uri()}?mode=ro"  # read-only: a missing file is an error, not created
    conn = sqlite3.connect(uri, uri=True, timeout=timeout)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    finally:
        conn.close()
