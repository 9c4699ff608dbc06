"""When Airflow's metadata database cannot answer: one exception for the faces, and the GC's longer deadline.

The Airflow alias's PostgreSQL backend (``airflow.backends.postgresql``) raises
``AirflowDatabaseUnavailable`` for every failure that says the database is not there or not answering
(cannot connect, connect timeout, connection lost or closed, our query deadline, the server's
``statement_timeout``, shutdown, too many connections), and the plain Django error for everything else
(a missing grant, a constraint). A lock that is not granted within the connection's ``lock_timeout``
(SQLSTATE 55P03) is "not available" too: while `airflow db migrate` runs, its ALTER TABLEs hold (or queue
for) exclusive locks on the tables the dashboard reads, and the reason names who holds them
(``TablesLocked``). It subclasses Django's ``OperationalError``, so code that catches
``DatabaseError`` keeps working. The pages answer it with a 503 page (``middleware``), the API with 503
JSON in Airflow's shape (``api.errors``). docs/operations.md describes the behaviour and the settings.

A request spends at most one deadline on an unavailable database: once the database has failed it (a wait
ran out, or the connection is gone), the rest of that request gets the same ``AirflowDatabaseUnavailable`` at
once, without connecting again or sending another query (``failed_earlier``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections
from django.db.utils import OperationalError

# SQLSTATE classes that mean "not available": 08 connection exception, 53 insufficient resources
# (too many connections, out of memory, disk full), 57 operator intervention (statement timeout or cancel,
# admin or crash shutdown, cannot connect now). No SQLSTATE at all: a client-side failure (cannot connect,
# connection lost or closed, our deadline).
UNAVAILABLE_SQLSTATE_CLASSES = ("08", "53", "57")
LOCK_NOT_AVAILABLE = "55P03"  # lock_timeout expired
MAX_REASON = 300


class AirflowDatabaseUnavailable(OperationalError):
    """Airflow's metadata database is unreachable, hung, or lost the connection; ``reason`` says how."""

    @property
    def reason(self) -> str:
        return str(self)

    @property
    def detail(self) -> str:
        """The sentence the faces show (the API's ``detail``)."""
        return f"Airflow's metadata database is unavailable: {self.reason}"


class TablesLocked(AirflowDatabaseUnavailable):
    """A lock on Airflow's tables was not granted within ``lock_timeout``: a schema change (`airflow db
    migrate`) or another long transaction holds it; ``reason`` names the holder when it could be found."""


def is_unavailable(exc: BaseException | None) -> bool:
    """Does this driver (psycopg) error say the database is not there or not answering?"""
    import psycopg

    if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    sqlstate = getattr(exc, "sqlstate", None)
    return sqlstate is None or sqlstate[:2] in UNAVAILABLE_SQLSTATE_CLASSES or sqlstate == LOCK_NOT_AVAILABLE


def clean_reason(message: str, password: str = "", limit: int = MAX_REASON) -> str:
    """One line, bounded, never the password (libpq does not print it; this makes sure)."""
    text = re.sub(r"\s+", " ", message).strip()
    if password:
        text = text.replace(password, "***")
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text or "unknown error"


# What failed in this thread's request, by database alias: from request_started to request_finished (the
# receivers are connected in ``apps``). Outside a request (commands, a test calling the connection directly)
# nothing is kept. Per thread, as Django's connections are.
_request = threading.local()


def begin_request(**kwargs) -> None:
    _request.failed = {}


def end_request(**kwargs) -> None:
    _request.failed = None


def fail_request(alias: str, reason: str) -> None:
    """Airflow's database failed this request and its connection is gone: the rest of the request must not
    wait on it again (the first reason is kept)."""
    failed = getattr(_request, "failed", None)
    if failed is not None:
        failed.setdefault(alias, reason)


def failed_earlier(alias: str) -> str | None:
    """Why ``alias`` already failed this request, if it did: a second connection attempt or query would only
    wait out another deadline before the same 503."""
    failed = getattr(_request, "failed", None)
    return failed.get(alias) if failed else None


@contextmanager
def query_timeout(seconds: float | None, using: str | None = None) -> Iterator[None]:
    """Run the block with another query deadline on the Airflow connection (``None`` or 0: none).

    For long jobs such as ``state_store_clean``: the client-side deadline and the server's
    ``statement_timeout`` both change for the block, and are restored afterwards. A no-op on SQLite.
    """
    from statestore_admin.airflow.router import airflow_alias

    connection = connections[using or airflow_alias()]
    if not hasattr(connection, "set_query_timeout"):
        yield
        return
    previous = connection.query_timeout
    connection.set_query_timeout(seconds)
    try:
        yield
    finally:
        connection.set_query_timeout(previous)
