"""Every statement GC runs (only this module holds GC SQL, but for the dry run's capped count) and the
batch executor.

Batch size 0: one ``DELETE`` statement in the database (no ids in Python). N > 0: batches of at most N rows,
each committed on its own. On PostgreSQL batches are optimistic (``_PgBatches``): a plain ``DELETE`` of the
range of addresses or expiries the batch's first N expired rows span, which re-checks ``expires_at < cutoff``
on the newest row version (a row re-written with a later expiry while GC runs survives), waiting at most
``OPTIMISTIC_LOCK_TIMEOUT`` on a row another transaction holds; such a batch is rolled back and run again with
``FOR UPDATE SKIP LOCKED``, which leaves held rows for the next run. Optimistic batches are looped inside the
server (a DO block per second of them, each batch committed on its own and reported in a notice), or one
statement each in autocommit where they cannot be (with objects, inside a caller's transaction), with the
run's settings on the session, restored when the batches end; a fallback batch is a transaction with
``SET LOCAL``. Batches take the walk the planner prices lower (``_batch_order``): the heap in physical order
(a TID range scan from where the previous one stopped) when expired rows are spread over most pages, else
the ``expires_at`` index (few expired rows, or rows that expired together stored together). Every
transaction has a ``lock_timeout`` (batch size 0, a plain DELETE that waits, falls back past it to one
statement that skips held rows); a session advisory lock keeps two runs (from any hosts) from overlapping.
SQLite serialises writers itself: its batches are plain ``DELETE … LIMIT`` subqueries.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from typing import NamedTuple

from django.db import DatabaseError, connections, transaction
from psycopg import pq

from statestore_admin.airflow.router import airflow_alias
from statestore_admin.core import locks
from statestore_admin.gc.plan import GcPlan
from statestore_admin.gc.result import GcInterrupted, GcResult, Interrupter
from statestore_admin.gc.storage import REF_OF_VALUE, REF_PREFIX

log = logging.getLogger(__name__)

# pg_try_advisory_lock key: the bytes "ssadm-gc" as a big-endian int64.
ADVISORY_LOCK_KEY = int.from_bytes(b"ssadm-gc", "big")


class GcLockBusy(Exception):
    """Another run holds the advisory lock."""


# The batch statements.
def expired_where(dag_ids: tuple[str, ...]) -> str:
    if not dag_ids:
        return "expires_at < %s"
    placeholders = ", ".join(["%s"] * len(dag_ids))
    return f"expires_at < %s AND dag_id IN ({placeholders})"


def expired_params(plan: GcPlan) -> list:
    return [connections[airflow_alias()].ops.adapt_datetimefield_value(plan.cutoff), *plan.dag_ids]


def _statement(vendor: str, plan: GcPlan, skip_locked: bool = False) -> tuple[str, list]:
    """Batch size 0's one DELETE (``skip_locked``: its fallback, one statement that skips held rows), and
    SQLite's batches. PostgreSQL's batches are ``_PgBatches``. With objects, the same DELETE returns the
    references among the deleted values (``_returning_refs``)."""
    where = expired_where(plan.dag_ids)
    params = expired_params(plan)
    if plan.batch_size == 0 and not skip_locked:
        sql = f"DELETE FROM task_state_store WHERE {where}"
    elif vendor == "postgresql":
        # The rows are locked by the subquery, so their physical addresses (ctid) cannot change before the
        # DELETE; deleting by ctid is a TID scan instead of one primary-key lookup per row (2x faster).
        sql = (
            "DELETE FROM task_state_store WHERE ctid = ANY(ARRAY(SELECT ctid FROM task_state_store "
            f"WHERE {where} FOR UPDATE SKIP LOCKED))"
        )
    else:
        sql = (
            f"DELETE FROM task_state_store WHERE id IN (SELECT id FROM task_state_store WHERE {where} "
            f"ORDER BY expires_at LIMIT {int(plan.batch_size)})"
        )
    return _returning_refs(vendor, sql, params) if plan.with_objects else (sql, params)


def _returning_refs(vendor: str, delete: str, params: list) -> tuple[str, list]:
    """``delete`` returning the references among the values it deletes: on PostgreSQL one row (rows deleted,
    NULL, NULL, false, the references as an array: the shape of ``_PgBatches``' statements), on SQLite a row
    per deleted row (its reference, or NULL)."""
    returning = f"{delete} RETURNING {REF_OF_VALUE}"
    if vendor != "postgresql":
        return returning, [*params, REF_PREFIX]
    sql = (
        f"WITH gone AS ({returning} AS ref) "
        "SELECT count(*), NULL::boolean, NULL::text, false, array_agg(ref) FILTER (WHERE ref IS NOT NULL) FROM gone"
    )
    return sql, [*params, REF_PREFIX]


# An optimistic batch waits at most this long (seconds, and never longer than the plan's lock_timeout) on
# a row another transaction holds, then is rolled back and run again the safe way (FOR UPDATE SKIP LOCKED).
OPTIMISTIC_LOCK_TIMEOUT = 0.1
PHYSICAL, INDEX = "physical", "index"


def expired_reference_values(plan: GcPlan, cap: int) -> list[str]:
    """The values among at most ``cap + 1`` expired rows that start with the reference marker (bounded,
    whatever the table size)."""
    connection = connections[airflow_alias()]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT value FROM (SELECT value FROM task_state_store WHERE {expired_where(plan.dag_ids)} LIMIT %s) "
            f"AS expired WHERE substr(value, 1, {len(REF_PREFIX)}) = %s",
            [*expired_params(plan), cap + 1, REF_PREFIX],
        )
        return [value for (value,) in cursor.fetchall()]


def _explained(cursor, sql: str, params: list) -> dict:
    cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
    plan = cursor.fetchone()[0]
    return (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]


def estimated_rows(connection, where: str, params: list) -> int | None:
    """PostgreSQL's planner estimate of the rows ``where`` matches (no scan); None elsewhere."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        return int(_explained(cursor, f"SELECT 1 FROM task_state_store WHERE {where}", params)["Plan Rows"])


# The planner's settings that price each walk over every expired row (``_batch_order``), for the length of
# one transaction: the expires_at index in its order, or the whole heap once.
_WALK_PRICED = {
    INDEX: {"enable_seqscan": "off", "enable_bitmapscan": "off", "enable_indexscan": "on"},
    PHYSICAL: {
        "enable_seqscan": "on",
        "enable_bitmapscan": "off",
        "enable_indexscan": "off",
        "max_parallel_workers_per_gather": "0",
    },
}


def _batch_order(connection, plan: GcPlan) -> str:
    """The walk over the expired rows that the planner prices lower (``EXPLAIN``, no scan): the
    ``expires_at`` index when few rows have expired, or when those that have are stored together (rows
    written together expire together: whole old runs), so that the index visits their pages in order and
    stops at the last; physical order when they are spread over most pages, where one pass over the heap
    reads fewer pages than the index's visits."""
    where, params = expired_where(plan.dag_ids), expired_params(plan)
    walks = {
        INDEX: f"SELECT ctid FROM task_state_store WHERE {where} ORDER BY expires_at",
        PHYSICAL: f"SELECT ctid FROM task_state_store WHERE {where}",
    }
    costs = {}
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        for order, sql in walks.items():
            settings = _WALK_PRICED[order]
            cursor.execute(
                "SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(settings)),
                [item for pair in settings.items() for item in pair],
            )
            costs[order] = float(_explained(cursor, sql, params)["Total Cost"])
    return INDEX if costs[INDEX] <= costs[PHYSICAL] else PHYSICAL


class _Batch(NamedTuple):
    """What one batch statement did: the rows it deleted; for PostgreSQL's batches whether it was the last
    (it found fewer than N rows), where the next batch starts and whether that start is inclusive; with
    objects the references among the deleted values."""

    deleted: int
    finished: bool | None = None
    start: str | None = None
    inclusive: bool = False
    refs: list[str] | None = None


class _PgBatches:
    """PostgreSQL's batches of at most ``plan.batch_size`` (N) rows, optimistic first.

    An optimistic batch is one statement that finds the first N expired rows after where the previous batch
    stopped and deletes them with a plain ``DELETE`` of the range they span, which re-checks
    ``expires_at < cutoff`` on the newest row version (so a row re-written with a later expiry since survives:
    PostgreSQL re-evaluates the condition before deleting it). It locks nothing before deleting and reads each
    row twice at most, in order, where a list of addresses had the ``DELETE`` fetch each row again, one by one.
    A batch that meets a row another transaction holds waits at most ``OPTIMISTIC_LOCK_TIMEOUT``, rolls back
    and is run again the safe way: its pick is ``FOR UPDATE SKIP LOCKED`` and it deletes the addresses it
    locked, leaving held rows for the next run. Every statement returns a ``_Batch``: rows deleted, whether
    it was the last, where the next batch starts and whether that start is inclusive, and with objects the
    references among the deleted values.

    - Physical order: the pick walks the heap after the last address the previous batch reached (a TID range
      scan; the planner is kept to it) and counts the first N expired rows up to an address; the ``DELETE``
      takes the expired rows between the two addresses: exactly those N. Every page is read once by the
      picks, in order. A held row is left behind by the safe batch; the next batches are optimistic again.
    - Index order: keyset on ``expires_at``: the pick skips to the N-th expired row after the previous
      batch's edge in the index and reads its expiry and the next one's (an index-only scan where the pages
      are all-visible); the ``DELETE`` takes the expiry range up to the N-th: exactly the first N, unless the
      N-th and the next expire at the same instant, when it deletes the first N by address instead and the
      next batch starts at that instant again. Nothing already deleted is walked again, and the last batch
      stops at the last expired entry. A held row would come first again in the following batches, so once
      one is met the rest of the run is safe batches.
    """

    def __init__(self, plan: GcPlan, order: str):
        self.plan, self.order = plan, order
        # where the next batch starts: physical order, after an address; index order, after (or, when
        # ``inclusive``, at) an expiry
        self.start = "(0,0)" if order == PHYSICAL else "-infinity"
        self.inclusive = False
        self.safe = False  # index order: a held row was met

    def statement(self, safe: bool) -> tuple[str, list]:
        """One batch as one statement: a safe batch, or an optimistic one where its rows cannot be looped in
        the server (``run_in_server``), whose ``DELETE`` returns what it deleted."""
        where, params, n = expired_where(self.plan.dag_ids), expired_params(self.plan), int(self.plan.batch_size)
        after, after_params = self._after(where)
        after_params = [*after_params, *params]
        # With objects, each DELETE returns the references among its values, aggregated as a fifth column.
        returning, ref_params = (f"{REF_OF_VALUE} AS ref", [REF_PREFIX]) if self.plan.with_objects else ("1", [])
        if safe:
            if self.order == INDEX:  # from the start's instant on: at worst the rows deleted at it are walked again
                after, after_params = f"expires_at >= %s::timestamptz AND {where}", [self.start, *params]
            edge, inclusive = ("max(ctid)", "false") if self.order == PHYSICAL else ("max(expires_at)", "true")
            # index order: rows of the last expiry picked may remain (skipped, or after the batch): inclusive
            sql = (
                f"WITH batch AS MATERIALIZED (SELECT ctid, expires_at FROM task_state_store WHERE {after}"
                f"{' ORDER BY expires_at' if self.order == INDEX else ''} LIMIT {n} FOR UPDATE SKIP LOCKED), "
                "gone AS (DELETE FROM task_state_store WHERE ctid = ANY(ARRAY(SELECT ctid FROM batch)) "
                f"AND {where} RETURNING {returning}) "
                f"SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM batch) < {n}, "
                f"(SELECT {edge} FROM batch)::text, {inclusive}{self._refs(['gone'])}"
            )
            return sql, [*after_params, *params, *ref_params]
        if self.order == PHYSICAL:
            sql = (
                "WITH pick AS MATERIALIZED (SELECT count(*) AS n, max(ctid) AS edge "
                f"FROM (SELECT ctid FROM task_state_store WHERE {after} LIMIT {n}) AS picked), "
                "gone AS (DELETE FROM task_state_store WHERE ctid <= (SELECT edge FROM pick) "
                f"AND {after} RETURNING {returning}) "
                f"SELECT (SELECT count(*) FROM gone), n < {n}, edge::text, false{self._refs(['gone'])} FROM pick"
            )
            return sql, [*after_params, *after_params, *ref_params]
        tie = "(SELECT k = 2 AND edge = beyond FROM pick)"
        sql = (
            # the N-th expiry (the edge) and the next one, skipped to in the index; none: fewer than N are left
            "WITH pick AS MATERIALIZED (SELECT count(*) AS k, min(expires_at) AS edge, max(expires_at) AS beyond "
            f"FROM (SELECT expires_at FROM task_state_store WHERE {after} ORDER BY expires_at "
            f"OFFSET {n - 1} LIMIT 2) AS edges), "
            # no tie at the edge: the range of expiries up to the edge holds exactly the first N (all that are
            # left when there is no edge)
            f"gone AS (DELETE FROM task_state_store WHERE NOT {tie} "
            f"AND expires_at <= coalesce((SELECT edge FROM pick), 'infinity') AND {after} RETURNING {returning}), "
            # the N-th and the next expire at the same instant: the first N by address instead
            f"tied AS MATERIALIZED (SELECT ctid FROM task_state_store WHERE {tie} "
            f"AND {after} ORDER BY expires_at LIMIT {n}), "
            "gone_tied AS (DELETE FROM task_state_store WHERE ctid = ANY(ARRAY(SELECT ctid FROM tied)) "
            f"AND {where} RETURNING {returning}) "
            f"SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM gone_tied), k = 0, edge::text, {tie}"
            f"{self._refs(['gone', 'gone_tied'])} FROM pick"
        )
        return sql, [*after_params, *after_params, *ref_params, *after_params, *params, *ref_params]

    def _after(self, where: str, start: str = "%s", inclusive: str = "%s") -> tuple[str, list]:
        """The rows after where the next batch starts: ``start`` and ``inclusive`` are placeholders (with their
        values) or the names of a server loop's variables (then no values)."""
        values = [self.start, self.inclusive] if start == "%s" else []
        if self.order == PHYSICAL:
            return f"ctid > {start}::tid AND {where}", values[:1]
        # Before an exclusive start lie only the rows the previous batch deleted at that instant.
        sql = f"expires_at >= {start}::timestamptz AND (expires_at > {start}::timestamptz OR {inclusive}) AND {where}"
        return sql, [*values[:1], *values]

    @property
    def start_type(self) -> str:
        return "tid" if self.order == PHYSICAL else "timestamptz"

    def run_in_server(self, connection, most: int | None, seconds: float) -> str:
        """Optimistic batches from where the next one starts, looped inside the server (a DO block, no
        client between them): each a pick of the first N expired rows' edge and a plain ``DELETE`` of the
        range up to it, whose row count needs no ``RETURNING`` (which cost as much as the deletes
        themselves), committed on its own and reported in a notice (``RUN_NOTICE``). The loop ends after
        the last batch, after ``most`` batches, or after a batch that ends ``seconds`` past the start. The
        pick and the ``DELETE`` are two statements: a row committed between them with an expiry inside the
        range (a writer giving a past expiry) is deleted with the batch."""
        n = int(self.plan.batch_size)
        where = connection.ops.compose_sql(expired_where(self.plan.dag_ids), expired_params(self.plan))
        after, _ = self._after(where, start="v_start", inclusive="v_inclusive")
        if self.order == PHYSICAL:
            batch = (
                "SELECT count(*), max(ctid) INTO v_picked, v_edge "
                f"FROM (SELECT ctid FROM task_state_store WHERE {after} LIMIT {n}) AS picked; "
                f"DELETE FROM task_state_store WHERE ctid <= v_edge AND {after}; "
                f"GET DIAGNOSTICS v_deleted = ROW_COUNT; v_finished := v_picked < {n}; v_tie := false; "
            )
        else:
            batch = (
                # the N-th expiry (the edge) and the next one; none: fewer than N are left
                "SELECT count(*), min(expires_at), max(expires_at) INTO v_picked, v_edge, v_beyond FROM "
                f"(SELECT expires_at FROM task_state_store WHERE {after} ORDER BY expires_at "
                f"OFFSET {n - 1} LIMIT 2) AS edges; "
                "v_tie := v_picked = 2 AND v_edge = v_beyond; v_finished := v_picked = 0; "
                # a tie at the edge: the first N by address; else the range of expiries up to the edge
                "IF v_tie THEN DELETE FROM task_state_store WHERE ctid = ANY(ARRAY(SELECT ctid FROM task_state_store "
                f"WHERE {after} ORDER BY expires_at LIMIT {n})) AND {where}; "
                "ELSE DELETE FROM task_state_store WHERE expires_at <= coalesce(v_edge, 'infinity') "
                f"AND {after}; END IF; GET DIAGNOSTICS v_deleted = ROW_COUNT; "
            )
        batch = batch.replace("%", "%%")  # its literals, as text in the block composed below
        block = (
            f"DECLARE v_start {self.start_type} := %s; v_inclusive boolean := %s; v_edge {self.start_type}; "
            f"v_beyond {self.start_type}; v_picked bigint; v_deleted bigint; v_finished boolean; v_tie boolean; "
            "v_batches integer := 0; v_until timestamptz := clock_timestamp() + %s * interval '1 second'; "
            f"BEGIN LOOP {batch}COMMIT; v_batches := v_batches + 1; "
            f"RAISE NOTICE '{RUN_NOTICE}|%%|%%|%%|%%', v_deleted, v_finished, v_tie, v_edge; "
            "EXIT WHEN v_finished OR v_batches >= %s OR clock_timestamp() >= v_until; "
            "v_start := v_edge; v_inclusive := v_tie; END LOOP; END"
        )
        block = connection.ops.compose_sql(block, [self.start, self.inclusive, seconds, most or 2**31 - 1])
        return connection.ops.compose_sql("DO %s", [block])

    def _refs(self, gones: list[str]) -> str:
        """With objects: the column of the references among the values the ``gones`` deleted."""
        if not self.plan.with_objects:
            return ""
        union = " UNION ALL ".join(f"SELECT ref FROM {gone}" for gone in gones)
        return f", (SELECT array_agg(ref) FROM ({union}) AS refs WHERE ref IS NOT NULL)"

    def settings(self, safe: bool) -> dict[str, str]:
        """A batch's settings: the optimistic batches' are the session's for the whole run
        (``_session_settings``), a safe batch's are its transaction's (SET LOCAL)."""
        timeout = self.plan.lock_timeout if safe else min(self.plan.lock_timeout, OPTIMISTIC_LOCK_TIMEOUT)
        local = {
            "lock_timeout": f"{max(int(timeout * 1000), 1)}ms",
            "synchronous_commit": "off",
            "plan_cache_mode": "force_generic_plan",  # the server loop's statements: planned once per loop
            "client_min_messages": "notice",  # a run of batches in the server reports each in a notice
            "max_parallel_workers_per_gather": "0",
            "enable_bitmapscan": "off",
            "enable_seqscan": "off",
        }
        if self.order == PHYSICAL:
            # Only a TID range scan returns rows in physical order: no index, no (parallel) sequential scan.
            local["enable_indexscan"] = "off"
        # Index order: the index, whatever the planner guesses of a range whose edge the statement computes
        # (a sequential scan of the table for each batch otherwise).
        return local

    def advance(self, batch: _Batch) -> None:
        """Where the next batch starts, after ``batch``."""
        if batch.start is not None:
            self.start, self.inclusive = batch.start, bool(batch.inclusive)


def _lock_not_available(exc: DatabaseError) -> bool:
    return getattr(exc.__cause__, "sqlstate", None) == "55P03"  # lock_timeout expired


def advisory_lock(connection) -> AbstractContextManager[None]:
    """GC's lock (``locks.advisory_lock``): ``GcLockBusy`` while another run holds it."""
    return locks.advisory_lock(
        connection,
        ADVISORY_LOCK_KEY,
        lambda holder: GcLockBusy(f"Another state_store_clean run is in progress{holder}; not starting a second one."),
    )


@contextmanager
def _interruptible(connection, interrupter: Interrupter, *, notices: bool = False) -> Iterator[None]:
    """A batch statement that a signal may interrupt (``Interrupter.statement``). Landing while psycopg waits
    for the result, the interrupt cancels the query and the session is usable again; landing a moment earlier,
    once the query is sent but before psycopg waits, it leaves the query running and the session busy with a
    result that nobody reads, so that every later statement fails ("another command is already in progress"):
    GC's unlock, the session settings put back, the next run on that connection. ``_settle`` does what psycopg
    would have done.

    With ``notices`` (batches looped in the server, each reported in a notice) the signal only cancels the
    query: raised, the interrupt could land inside psycopg's notice callback, which prints and drops it, and
    the loop would go on (its batch unheard, uncounted); cancelled, the query fails, and a failure once a stop
    is requested is the interrupt. A cancel that reaches the server before the query does is lost: the loop
    then ends at its own time limit (``RUN_SECONDS``) and the run stops before the next one."""
    cancel = partial(_cancel, connection.connection) if notices and connection.vendor == "postgresql" else None
    try:
        with interrupter.statement(cancel):
            yield
    except (GcInterrupted, DatabaseError) as exc:
        if not isinstance(exc, GcInterrupted) and not interrupter.stop_requested:
            raise
        if connection.vendor == "postgresql" and connection.connection is not None:
            _settle(connection)
        if isinstance(exc, GcInterrupted):
            raise
        raise GcInterrupted() from exc


def _cancel(raw) -> None:
    """From a signal handler: ask the server to cancel ``raw``'s query, over a connection of the cancel's own
    (no lock of ``raw``'s), for at most 5 s, as psycopg itself does on Ctrl-C. Failing, the query runs on to
    its end (``RUN_SECONDS``, a lock timeout), and the run stops after it."""
    try:
        raw.cancel_safe(timeout=5)
    except Exception as exc:  # noqa: BLE001 - a signal handler that raises would be the interrupt lost again
        log.warning("GC: cancelling the batches in flight failed (%s); the run stops after them", exc)


def _settle(connection) -> None:
    """Cancel the query still running on ``connection`` and read its results (a batch looped in the server
    reports its committed batches on the way); if that fails, close the session: the server then ends the
    query, its transaction and GC's advisory lock. Closing alone would leave the query running until the
    server next writes to the socket, batches committing that the run does not count."""
    raw = connection.connection
    if raw.info.transaction_status != pq.TransactionStatus.ACTIVE:
        return
    try:
        raw.cancel_safe(timeout=5)
        while raw.pgconn.get_result() is not None:
            pass
        settled = raw.info.transaction_status != pq.TransactionStatus.ACTIVE
    except Exception:  # noqa: BLE001 - whatever failed, a closed session is the safe end
        settled = False
    if not settled:
        connection.close()


def _delete_batch(connection, sql: str, params: list, interrupter: Interrupter, local: dict[str, str]) -> _Batch:
    """Run one batch statement in its own transaction with the ``local`` settings (PostgreSQL); with objects
    the references among the deleted values are read before the commit and used after it."""
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # All for this transaction only. Without a synchronous commit a crash can undo the last
            # batches' deletes: the rows are still expired and the next run deletes them again.
            local = {**local, "synchronous_commit": "off"}
            cursor.execute(
                "SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(local)),
                [item for pair in local.items() for item in pair],
            )
        with _interruptible(connection, interrupter):
            cursor.execute(sql, params)
        if cursor.description is None:
            return _Batch(cursor.rowcount)
        if connection.vendor != "postgresql":  # SQLite's DELETE … RETURNING: a row per deleted row
            rows = cursor.fetchall()
            return _Batch(len(rows), refs=[ref for (ref,) in rows if ref is not None])
        return _Batch(*cursor.fetchone())


def _one_statement(
    connection, plan: GcPlan, result: GcResult, interrupter: Interrupter
) -> tuple[int, bool, list[str] | None]:
    """Batch size 0: every expired row in one statement."""
    local = {"lock_timeout": f"{int(plan.lock_timeout * 1000)}ms"}
    try:
        batch = _delete_batch(connection, *_statement(connection.vendor, plan), interrupter, local)
        return batch.deleted, True, batch.refs
    except DatabaseError as exc:
        if not _lock_not_available(exc):  # only PostgreSQL reports 55P03
            raise
    # One plain DELETE (as fast as it gets) waits on rows another transaction holds: `airflow db clean`,
    # Airflow's own GC, a writer. Past lock_timeout it has rolled back; one statement that skips the held
    # rows deletes the rest.
    batch = _delete_batch(connection, *_statement(connection.vendor, plan, skip_locked=True), interrupter, local)
    result.message = (
        f"Rows another transaction held for more than {plan.lock_timeout:g}s were skipped; "
        "the next run deletes those that are still there."
    )
    return batch.deleted, True, batch.refs


@contextmanager
def _session_settings(connection, values: dict[str, str]) -> Iterator[None]:
    """``values`` for this database session until the block ends, then the previous values again."""
    names = list(values)
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(["current_setting(%s)"] * len(names)), names)
        before = dict(zip(names, cursor.fetchone(), strict=True))
    _set_session(connection, values)
    try:
        yield
    finally:
        if not connection.needs_rollback and connection.is_usable():  # else the session ends with the process
            _set_session(connection, before)


def _set_session(connection, values: dict[str, str]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT " + ", ".join(["set_config(%s, %s, false)"] * len(values)),
            [item for pair in values.items() for item in pair],
        )


def _optimistic_batch(connection, sql: str, params: list, interrupter: Interrupter) -> _Batch:
    """One optimistic batch: a single statement in autocommit, its own implicit transaction, with the
    session's settings (``_session_settings``): one round trip, where BEGIN, SET LOCAL, the statement and
    COMMIT took four. Inside a caller's transaction (tests), a savepoint, so that a failed batch rolls back
    alone."""
    in_transaction = connection.in_atomic_block
    with transaction.atomic(using=connection.alias) if in_transaction else nullcontext(), connection.cursor() as cursor:
        with _interruptible(connection, interrupter):
            cursor.execute(sql, params)
        return _Batch(*cursor.fetchone())


# One batch committed: the rows it deleted, and with objects the references among their values.
Committed = Callable[[int, list[str] | None], None]
# Runs one batch or more (at most ``most``; none started past ``seconds``), reporting each one committed;
# True when nothing is left.
Run = Callable[[Committed, int | None, float | None], bool]
# Optimistic batches are looped inside the server for at most this long per round trip: between two batches
# the client only passed the next one's start back (a round trip and two wake-ups on a busy machine: a third
# of the time at 1,000 rows a batch).
RUN_SECONDS = 1.0
RUN_NOTICE = "statestore_admin_gc_batch"


def _pg_run(
    connection,
    batches: _PgBatches,
    result: GcResult,
    interrupter: Interrupter,
    in_server: bool,
    committed: Committed,
    most: int | None,
    seconds: float | None,
) -> bool:
    """PostgreSQL's batches: optimistic ones looped inside the server when ``in_server`` (and not inside a
    caller's transaction: a DO block commits each batch), else one per statement; a safe batch after one
    met a held row (``_PgBatches``). With a pause between batches, one batch per loop."""
    if batches.safe or not in_server or connection.in_atomic_block:
        return _pg_batch(connection, batches, result, interrupter, committed)
    most = 1 if batches.plan.sleep else most
    notices: list[str] = []

    def heard(diagnostic) -> None:
        if (diagnostic.message_primary or "").startswith(RUN_NOTICE + "|"):
            notices.append(diagnostic.message_primary)

    finished = False
    raw = connection.connection  # closed by _interruptible if a signal leaves the session unusable
    raw.add_notice_handler(heard)
    try:
        with connection.cursor() as cursor, _interruptible(connection, interrupter, notices=True):
            seconds = RUN_SECONDS if seconds is None else min(seconds, RUN_SECONDS)
            cursor.execute(batches.run_in_server(connection, most, seconds))
    except DatabaseError as exc:
        if not _lock_not_available(exc):
            raise
        held = True  # the batch in flight met a held row and was rolled back; those before it committed
    else:
        held = False
    finally:  # also when interrupted: the batches committed before count
        raw.remove_notice_handler(heard)
        for notice in notices:
            _, deleted, finished, tie, edge = notice.split("|", 4)
            finished = finished in ("t", "true")
            batches.advance(_Batch(int(deleted), finished, None if edge == "<NULL>" else edge, tie in ("t", "true")))
            committed(int(deleted), None)
    if held:
        return _pg_batch(connection, batches, result, interrupter, committed, held=True)
    if not notices:  # the loop runs one batch at least: unreported, the run would never learn where it is
        raise DatabaseError("PostgreSQL ran GC batches without reporting them: are its notices filtered out?")
    return finished


def _pg_batch(
    connection,
    batches: _PgBatches,
    result: GcResult,
    interrupter: Interrupter,
    committed: Committed,
    held: bool = False,
) -> bool:
    """One PostgreSQL batch: optimistic unless a held row was met before (in index order the rest of the run
    is safe batches), or ``held``: the optimistic batch from here just met one and was rolled back."""
    batch = None
    if not (held or batches.safe):
        try:
            batch = _optimistic_batch(connection, *batches.statement(False), interrupter)
        except DatabaseError as exc:
            if not _lock_not_available(exc):
                raise
            held = True
    if held:  # the same batch again, the safe way: skipping the held rows
        result.safe_batches += 1
        batches.safe = batches.order == INDEX
    if batch is None:
        batch = _delete_batch(connection, *batches.statement(True), interrupter, batches.settings(True))
    batches.advance(batch)
    committed(batch.deleted, batch.refs)
    return batch.finished


def batch_steps(plan: GcPlan, result: GcResult, interrupter: Interrupter) -> tuple[AbstractContextManager, Run]:
    """The run's batches: the session settings to hold while they run, and what runs them."""
    connection = connections[airflow_alias()]
    if plan.batch_size == 0:
        result.batch_order = "one statement"

        def one(committed: Committed, most: int | None, seconds: float | None) -> bool:
            deleted, _, refs = _one_statement(connection, plan, result, interrupter)
            committed(deleted, refs)
            return True

        return nullcontext(), one
    if connection.vendor == "postgresql":
        batches = _PgBatches(plan, _batch_order(connection, plan))
        result.batch_order = batches.order
        session = _session_settings(connection, batches.settings(False))
        # A batch's objects are deleted after it commits, before the next starts: by the command.
        in_server = not plan.with_objects
        return session, partial(_pg_run, connection, batches, result, interrupter, in_server)
    # SQLite: no row locks; it serialises writers
    result.batch_order = INDEX
    sql, params = _statement(connection.vendor, plan)

    def step(committed: Committed, most: int | None, seconds: float | None) -> bool:
        batch = _delete_batch(connection, sql, params, interrupter, {})
        committed(batch.deleted, batch.refs)
        return batch.deleted < plan.batch_size

    return nullcontext(), step
