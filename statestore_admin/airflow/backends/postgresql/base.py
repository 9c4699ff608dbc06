"""Django's PostgreSQL backend (psycopg 3) with a deadline on every query, for Airflow's metadata database.

The deadline is client-side: psycopg waits for the server on the socket in ``Connection.wait``; here
that wait is given ``OPTIONS["query_timeout"]`` seconds. When nothing completes in time the connection
is closed (its state is unknown) and the query fails with "no answer within N s". This holds when the
server, or the network in front of it, stops answering mid-session, which the server-side
``statement_timeout`` cannot do; that one is also set, a little shorter, so that a live server gives up
first and the connection stays usable. A connection that has been closed so is discarded before the
next query, so nothing needs a restart when the database is back. Within one request, though, a
connection found dead is not replaced: the rest of the request answers 503 at once with the same reason
(``availability.failed_earlier``), so that a request waits out one deadline at most, never two.

Failures that mean "the database is not available" become ``AirflowDatabaseUnavailable``
(``airflow.availability``); the others stay Django's usual errors.

Each connection also waits at most ``LOCK_TIMEOUT`` for a lock (``lock_timeout``). While `airflow db
migrate` runs, its ALTER TABLEs hold, or queue for, exclusive locks on the very tables the pages read, and
every query queues behind them: without it, each would wait out the query deadline and answer "no answer
within 30 s". With it, the query gives up after a few seconds and the answer says what holds the tables
(``TablesLocked``: the session, its statement and Airflow's alembic revision, read on a connection of its
own), so a page says "a schema change is running" while it is.
"""

from __future__ import annotations

import logging

import psycopg
from django.db.backends.postgresql import base
from django.db.utils import DatabaseErrorWrapper, InterfaceError, OperationalError, ProgrammingError
from psycopg import errors as pg_errors
from psycopg import pq

from statestore_admin.airflow import versions
from statestore_admin.airflow.availability import (
    LOCK_NOT_AVAILABLE,
    MAX_REASON,
    AirflowDatabaseUnavailable,
    TablesLocked,
    clean_reason,
    fail_request,
    failed_earlier,
    is_unavailable,
)
from statestore_admin.airflow.versions import AirflowSchemaChanged

log = logging.getLogger(__name__)

_WAIT_INTERVAL = 0.1  # psycopg's own (psycopg.connection._WAIT_INTERVAL)
SCHEMA_CHANGED_SQLSTATES = ("42703", "42P01")  # undefined_column, undefined_table
LOCK_TIMEOUT = 3.0  # seconds a query waits for a lock (at most half the statement_timeout)
# The tables the dashboard reads: an ACCESS EXCLUSIVE lock on one of them is a schema change (or LOCK
# TABLE, VACUUM FULL), and every query of them queues behind it.
READ_TABLES = (
    "task_state_store",
    "asset_state_store",
    "task_instance",
    "dag_run",
    "asset",
    "asset_active",
    "dynamic_region",
)
_HOLDERS = (
    "SELECT a.pid, a.application_name, l.granted, c.relname, left(regexp_replace(a.query, '\\s+', ' ', 'g'), 120) "
    "FROM pg_locks l JOIN pg_class c ON c.oid = l.relation JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock' AND c.relname = ANY(%s) "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND a.pid <> pg_backend_pid() ORDER BY l.granted DESC, a.xact_start LIMIT 1"
)


def lock_timeout_ms(query_timeout: float | None) -> int:
    """The session's ``lock_timeout``: ``LOCK_TIMEOUT``, or half the ``statement_timeout`` if that is
    shorter, so that a lock wait is reported as one rather than as a statement timeout."""
    ms = int(LOCK_TIMEOUT * 1000)
    return min(ms, max(1, statement_timeout_ms(query_timeout) // 2)) if query_timeout else ms


def statement_timeout_ms(query_timeout: float) -> int:
    """The server's ``statement_timeout`` for a deadline: 1 s shorter (10 % under 10 s)."""
    return max(1, int((query_timeout - min(1.0, query_timeout / 10)) * 1000))


MIN_MARGIN = 0.2  # seconds the client waits, at least, past the server's statement_timeout


def client_deadline(query_timeout: float | None) -> float | None:
    """How long the client waits for an answer: the deadline, but never less than ``MIN_MARGIN`` past the
    server's ``statement_timeout``. A short budget (the count budget, 50 ms in tests) would otherwise leave
    the server's cancel a few milliseconds to arrive, and a busy machine would close a live connection
    instead of the statement being cancelled; inside a transaction that fails everything after it."""
    if not query_timeout:
        return None
    return round(max(query_timeout, statement_timeout_ms(query_timeout) / 1000 + MIN_MARGIN), 3)


class QueryDeadlineExceeded(psycopg.OperationalError):
    """No answer from the server within the query deadline (``seconds``); the connection has been closed."""

    seconds: float = 0.0


class DeadlineConnection(psycopg.Connection):
    query_timeout: float | None = None  # seconds; None: wait as long as it takes

    def wait(self, gen, interval: float = _WAIT_INTERVAL, timeout: float | None = None):
        deadline = self.query_timeout if timeout is None else None
        try:
            return super().wait(gen, interval=interval, timeout=timeout if deadline is None else deadline)
        except pg_errors._WaitTimeout:
            if deadline is None:  # a timeout psycopg asked for itself (e.g. notifies()): its business
                raise
            # The server's answer may still arrive: the connection's state is unknown. Never reuse it.
            self.close()
            exc = QueryDeadlineExceeded(
                f"no answer within {deadline:g} s (query deadline, AIRFLOW_DATABASE_QUERY_TIMEOUT); "
                "the connection was closed"
            )
            exc.seconds = deadline
            raise exc from None


class _Driver:
    """psycopg as Django's backend sees it (``DatabaseWrapper.Database``), with connections that have a deadline."""

    connect = staticmethod(DeadlineConnection.connect)

    def __getattr__(self, name):
        return getattr(psycopg, name)


class _ErrorWrapper(DatabaseErrorWrapper):
    """Django's translation of driver errors, plus: "not available" errors become AirflowDatabaseUnavailable."""

    def __exit__(self, exc_type, exc_value, traceback):
        try:
            super().__exit__(exc_type, exc_value, traceback)
        except ProgrammingError as exc:
            # A column or table that was there when the schema was read is gone: `airflow db migrate` ran
            # under us (3.3 → 3.4). Read the schema again on the next query; this one answers 503.
            cause = exc.__cause__
            if getattr(cause, "sqlstate", None) not in SCHEMA_CHANGED_SQLSTATES or not versions.forget(self.wrapper):
                raise
            log.warning("Airflow's schema changed under the dashboard: %s", cause)
            # The first line names the column; the page shows the reason alone, so it says what happened too.
            column = clean_reason(str(cause).splitlines()[0])
            reason = f"{column}: a schema change (`airflow db migrate`?) altered Airflow's tables under a query"
            raise AirflowSchemaChanged(reason).with_traceback(traceback) from cause
        except (OperationalError, InterfaceError) as exc:
            cause = exc.__cause__
            if not is_unavailable(cause):
                raise
            if getattr(cause, "sqlstate", None) == LOCK_NOT_AVAILABLE:
                reason = self.wrapper.locked_reason()
                log.warning("Airflow's tables are locked: %s", reason)
                raise TablesLocked(reason).with_traceback(traceback) from cause
            reason = self.wrapper.unavailable_reason(cause)
            log.warning("Airflow's metadata database is unavailable: %s", reason)
            connection = self.wrapper.connection
            if (connection is None or connection.closed) and not self.wrapper.budget_ran_out(cause):
                fail_request(self.wrapper.alias, reason)  # not connected, or the connection is gone
            raise AirflowDatabaseUnavailable(reason).with_traceback(traceback) from cause


class DatabaseWrapper(base.DatabaseWrapper):
    Database = _Driver()

    def __init__(self, settings_dict, alias="default"):
        super().__init__(settings_dict, alias)
        self.query_timeout = float(settings_dict["OPTIONS"].get("query_timeout") or 0) or None

    @property
    def wrap_database_errors(self):
        return _ErrorWrapper(self)

    def get_connection_params(self):
        params = super().get_connection_params()
        params.pop("query_timeout", None)
        options = params.get("options", "")
        if self.query_timeout and "statement_timeout" not in options:
            params["options"] = f"{options} -c statement_timeout={statement_timeout_ms(self.query_timeout)}".strip()
        return params

    def _configure_connection(self, connection):
        # lock_timeout is set after connecting rather than in the startup options, unless the URL's
        # options name one (then theirs wins): one statement per new connection, kept CONN_MAX_AGE.
        commit = super()._configure_connection(connection)
        if "lock_timeout" in self.settings_dict["OPTIONS"].get("options", ""):
            return commit
        with connection.cursor() as cursor:
            cursor.execute(f"SET lock_timeout = {lock_timeout_ms(self.query_timeout)}")
        return True

    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        connection.query_timeout = client_deadline(self.query_timeout)
        return connection

    def ensure_connection(self):
        # A connection closed under us (our deadline, the server gone) is discarded, not reused: the
        # next request connects again. Inside a transaction the failure must surface instead.
        if self.connection is not None and self.connection.closed and not self.in_atomic_block:
            self.close()
        if self.connection is None:
            # Not within the request that found the database unavailable: that took its deadline already.
            reason = failed_earlier(self.alias)
            if reason is not None:
                raise AirflowDatabaseUnavailable(reason)
        super().ensure_connection()

    def close_if_unusable_or_obsolete(self):
        # At the end of a request (and the start of the next): a connection closed under us is dropped as
        # it is; Django would first ask it for its autocommit, which means connecting again.
        if self.connection is not None and self.connection.closed and not self.in_atomic_block:
            self.close()
        super().close_if_unusable_or_obsolete()

    def is_usable(self):
        # Django's health check (CONN_HEALTH_CHECKS) pings a kept connection before a request uses it
        # (with the alembic revision: _check_kept). An answer to it needs no more than a connection does:
        # it waits the connect timeout at most, rather than the full query deadline. A connection that
        # fails at once (a restart closed it) is replaced by a new one; one that did not answer in time
        # took the request's one deadline, and the request answers 503 without connecting again.
        connection = self.connection
        if connection is None or connection.closed:
            return False
        previous = connection.query_timeout
        deadline = "query deadline, AIRFLOW_DATABASE_QUERY_TIMEOUT"
        connect_timeout = float(self.settings_dict["OPTIONS"].get("connect_timeout") or 0)
        if connect_timeout and (previous is None or connect_timeout < previous):
            connection.query_timeout = connect_timeout
            deadline = "connect timeout, AIRFLOW_DATABASE_CONNECT_TIMEOUT"
        try:
            self._check_kept(connection)
        except QueryDeadlineExceeded:
            reason = (
                f"no answer within {connection.query_timeout:g} s to the check of a kept connection ({deadline}); "
                "the connection was closed"
            )
            log.warning("Airflow's metadata database is unavailable: %s", reason)
            fail_request(self.alias, reason)
            return False
        except psycopg.Error:  # connection gone, or no alembic_version any more: a new connection decides
            return False
        finally:
            connection.query_timeout = previous
        return True

    def _check_kept(self, connection) -> None:
        """Django's ``SELECT 1``, or where the schema is known, the alembic revision instead (as cheap): a
        revision that moved (`airflow db migrate` ran since) makes ``schema_of`` read the schema again
        before this request's first query, rather than that query failing on a renamed column."""
        known = versions.cached_schema(self)
        if known is None or known.revision is None:
            connection.execute("SELECT 1")
            return
        row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
        if (row[0] if row else None) != known.revision:
            log.info("Airflow's alembic revision moved from %s: reading its schema again", known.revision)
            versions.forget(self)

    def budget_ran_out(self, exc: BaseException) -> bool:
        """Did a block's budget shorter than the query deadline run out (``query_timeout``: the count budget,
        COUNT_BUDGET_SECONDS)? Its server-side cancel may simply have come late, so it does not spend the
        request's deadline: the next query may connect again."""
        configured = client_deadline(float(self.settings_dict["OPTIONS"].get("query_timeout") or 0))
        return isinstance(exc, QueryDeadlineExceeded) and (not configured or exc.seconds < configured)

    def set_query_timeout(self, seconds: float | None) -> None:
        """Another deadline for this connection (``airflow.availability.query_timeout``)."""
        self.query_timeout = seconds or None
        connection = self.connection
        if connection is None or connection.closed:
            return  # the next connection gets it from get_connection_params()
        connection.query_timeout = client_deadline(self.query_timeout)
        if connection.info.transaction_status == pq.TransactionStatus.INERROR:
            return  # cannot run anything now; the transaction's rollback ends its settings anyway
        value = f"{statement_timeout_ms(self.query_timeout)}ms" if self.query_timeout else "0"
        with self.cursor() as cursor:
            cursor.execute("SELECT set_config('statement_timeout', %s, false)", [value])

    def locked_reason(self) -> str:
        """Why a lock was not granted: the session holding (or queueing for) an exclusive lock on a table
        the dashboard reads, and Airflow's alembic revision, read on a short connection of its own (this
        one may be inside a failed transaction). Best effort: a plain sentence when they cannot be read."""
        waited = f"{lock_timeout_ms(self.query_timeout) / 1000:g} s"
        holder = revision = None
        params = {
            **self.get_connection_params(),
            "connect_timeout": 2,
            "options": "-c statement_timeout=2000 -c lock_timeout=1000",
        }
        params.pop("cursor_factory", None)
        params.pop("context", None)
        try:
            with psycopg.connect(autocommit=True, **params) as side:
                holder = side.execute(_HOLDERS, [list(READ_TABLES)]).fetchone()
                if side.execute("SELECT to_regclass('alembic_version')").fetchone()[0]:
                    row = side.execute("SELECT version_num FROM alembic_version").fetchone()
                    revision = versions.revision_phrase(row[0] if row else None)
        except psycopg.Error as exc:
            log.info("Could not read who holds Airflow's tables: %s", exc)
        at = f"; the database is at {revision}" if revision else ""
        if holder is None:
            message = (
                f"a lock on Airflow's tables was not granted within {waited} (lock_timeout): another "
                f"transaction holds it; try again{at}"
            )
        else:
            pid, application, granted, table, statement = holder
            message = (
                "a schema change holds Airflow's tables and queries wait behind it (`airflow db migrate` "
                f"running?): pages answer again once it has finished{at}; session {pid} "
                f"({application or 'no application name'}) {'holds' if granted else 'waits for'} an exclusive "
                f"lock on {table}: {statement}"
            )
        # longer than other reasons: the holder's statement is what tells a migration from anything else
        return clean_reason(message, self.settings_dict.get("PASSWORD") or "", limit=2 * MAX_REASON)

    def unavailable_reason(self, exc: BaseException) -> str:
        if isinstance(exc, pg_errors.ConnectionTimeout):
            seconds = self.settings_dict["OPTIONS"].get("connect_timeout")
            message = f"no connection within {seconds} s (connect timeout)" if seconds else str(exc)
        else:
            message = str(exc)
        return clean_reason(message, self.settings_dict.get("PASSWORD") or "")
