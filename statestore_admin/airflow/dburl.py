"""Which Airflow metadata database the dashboard uses, as Django ``DATABASES`` settings.

The first found of: ``AIRFLOW_DATABASE_URL``; ``AIRFLOW_API_URL`` (no database: Airflow's REST API);
Airflow's own ``[database] sql_alchemy_conn`` (``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN``, its ``_CMD``, then
``airflow.cfg``); else the embedded demo SQLite file. SQLAlchemy URLs are translated to Django settings.

No Django models here: the settings module imports this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from statestore_admin.airflow.config import AirflowConfig, AirflowConfigError

POSTGRES_DIALECTS = {"postgresql", "postgres"}
APPLICATION_NAME = "statestore-admin"
DJANGO_POSTGRESQL = "django.db.backends.postgresql"
# Django's PostgreSQL backend with a client-side deadline on every query (docs/operations.md).
AIRFLOW_POSTGRESQL = "statestore_admin.airflow.backends.postgresql"
# No Airflow database: the dashboard reaches Airflow through its REST API (AIRFLOW_API_URL).
NO_DATABASE = "statestore_admin.airflow.backends.none"
# libpq's TCP keepalives: a peer that vanished (host down, network cut) is noticed on an idle connection
# after about 30 + 3 x 10 s instead of the kernel's two hours.
# SQLite: a writer waits up to 20 s for another's lock, and takes the write lock when its transaction begins
# (``BEGIN IMMEDIATE``). A transaction that reads first and writes later would otherwise fail at once with
# "database is locked" when another writer committed meanwhile; taking turns, each write reads what the
# one before it committed (docs/writes.md, "Parallel writes").
SQLITE_OPTIONS = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
KEEPALIVES = {"keepalives": "1", "keepalives_idle": "30", "keepalives_interval": "10", "keepalives_count": "3"}


def sqlalchemy_url_to_django(url: str) -> dict[str, Any]:
    """Translate a SQLAlchemy (or plain libpq-style) URL into a Django database dict.

    Supported: ``postgresql[+driver]://user:password@host:port/db?libpq_option=value``
    (``?host=/socket/dir`` included) and ``sqlite:////absolute/path`` or ``sqlite:///relative``.
    """
    parts = urlsplit(url.strip())
    dialect, _, _driver = parts.scheme.lower().partition("+")
    if dialect in POSTGRES_DIALECTS:
        options = dict(parse_qsl(parts.query, keep_blank_values=True))
        host = options.pop("host", None) or unquote(parts.hostname or "")
        port = options.pop("port", None) or (str(parts.port) if parts.port else "")
        options.setdefault("application_name", APPLICATION_NAME)
        name = unquote(parts.path.lstrip("/"))
        if not name:
            raise AirflowConfigError(f"The database URL {mask_url(url)} names no database.")
        return {
            "ENGINE": DJANGO_POSTGRESQL,
            "NAME": name,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": host,
            "PORT": port,
            "OPTIONS": options,
        }
    if dialect == "sqlite":
        if parts.netloc:
            raise AirflowConfigError(f"A SQLite URL has no host: {url!r}. Use sqlite:////absolute/path.db.")
        # SQLAlchemy: everything after "sqlite:///" is the path; four slashes make it absolute.
        path = unquote(parts.path[1:]) if parts.path.startswith("/") else unquote(parts.path)
        if path in ("", ":memory:"):
            raise AirflowConfigError("An in-memory SQLite database cannot be an Airflow metadata database.")
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path, "OPTIONS": dict(SQLITE_OPTIONS)}
    raise AirflowConfigError(
        f"Unsupported Airflow database URL scheme {parts.scheme!r} in {mask_url(url)}: "
        "statestore-admin supports PostgreSQL and SQLite."
    )


def with_timeouts(settings: dict[str, Any], connect_timeout: int, query_timeout: float) -> dict[str, Any]:
    """The Airflow alias's settings with its timeouts: PostgreSQL gets the deadline backend, libpq's
    ``connect_timeout`` and keepalives (options given in the URL win) and ``query_timeout`` (0: none).
    SQLite is returned unchanged."""
    if settings["ENGINE"] not in (DJANGO_POSTGRESQL, AIRFLOW_POSTGRESQL):
        return settings
    options = {"connect_timeout": str(connect_timeout), **KEEPALIVES, **settings.get("OPTIONS", {})}
    options["query_timeout"] = query_timeout
    return {**settings, "ENGINE": AIRFLOW_POSTGRESQL, "OPTIONS": options}


def mask_url(url: str) -> str:
    """The URL with its password replaced by ``***``, for display."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


@dataclass(frozen=True)
class AirflowDatabase:
    settings: dict[str, Any]
    source: str
    display_url: str
    embedded: bool = False


def resolve_airflow_database(environ: Mapping[str, str], embedded_path: Path, demo: bool = False) -> AirflowDatabase:
    """The Airflow database to use; ``demo`` forces the embedded file whatever Airflow's configuration says."""
    if demo:
        return _embedded(embedded_path)
    api = environ.get("AIRFLOW_API_URL", "").strip()
    if api and not environ.get("AIRFLOW_DATABASE_URL", "").strip():
        # Managed Airflow: its REST API instead of a database (airflow/rest.py). Airflow's own configuration,
        # if the host has one, is not read for a database then: the API is what the operator named.
        return AirflowDatabase({"ENGINE": NO_DATABASE, "NAME": ""}, "environment variable AIRFLOW_API_URL", "none")
    url = environ.get("AIRFLOW_DATABASE_URL", "").strip()
    if url:
        return AirflowDatabase(
            sqlalchemy_url_to_django(url), "environment variable AIRFLOW_DATABASE_URL", mask_url(url)
        )
    conn = AirflowConfig(environ).sql_alchemy_conn
    if conn.value:
        return AirflowDatabase(sqlalchemy_url_to_django(conn.value), conn.source, mask_url(conn.value))
    return _embedded(embedded_path)


def _embedded(path: Path) -> AirflowDatabase:
    settings = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path), "OPTIONS": dict(SQLITE_OPTIONS)}
    return AirflowDatabase(settings, "embedded demo database", f"sqlite:///{path}", embedded=True)
