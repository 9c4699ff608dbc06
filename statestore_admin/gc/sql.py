"""Every statement GC runs (only this module holds GC SQL, but for the dry run's capped count) and the
batch executor.

Batch size 0: one ``DELETE`` statement in the database (no ids in Python). N > 0: batches of at most N rows,
each committed on its own. On PostgreSQL batches are optimistic (``_PgBatches``): a plain ``DELETE`` of the
row addresses a batch picked, which re-checks ``expires_at < cutoff`` on the newest row version (a row
re-written with a later expiry while GC runs survives), waiting at most ``OPTIMISTIC_LOCK_TIMEOUT`` on a row
another transaction holds; such a batch is rolled back and run again with ``FOR UPDATE SKIP LOCKED``, which
leaves held rows for the next run. An optimistic batch is one statement in autocommit (one round trip) with
the run's settings on the session, restored when the batches end; a fallback batch is a transaction with
``SET LOCAL``. Batches walk the heap in physical order (a TID range scan from where the previous one
stopped) when the planner expects expired rows on most pages, else the ``expires_at`` index. Every
transaction has a ``lock_timeout`` (batch size 0, a plain DELETE that waits, falls back past it to one
statement that skips held rows); a session advisory lock keeps two runs (from any hosts) from overlapping.
SQLite serialises writers itself: its batches are plain ``DELETE … LIMIT`` subqueries.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial

from django.db import DatabaseError, connections, transaction

from statestore_admin.airflow.router import airflow_alias
from statestore_admin.core import locks
from statestore_admin.gc.plan import GcPlan
from statestore_admin.gc.result import GcResult, Interrupter
from statestore_admin.gc.storage import REF_OF_VALUE, REF_PREFIX

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
    NULL, NULL, the references as an array: the shape of ``_PgBatches``' statements), on SQLite a row per
    deleted row (its reference, or NULL)."""
    returning = f"{delete} RETURNING {REF_OF_VALUE}"
    if vendor != "postgresql":
        return returning, [*params, REF_PREFIX]
    sql = (
        f"WITH gone AS ({returning} AS ref) "
        "SELECT count(*), NULL::bigint, NULL::text, array_agg(ref) FILTER (WHERE ref IS NOT NULL) FROM gone"
    )
    return sql, [*params, REF_PREFIX]


# An optimistic batch waits at most this long (seconds, and never longer than the plan's lock_timeout) on
# a row another transaction holds, then is rolled back and run again the safe way (FOR UPDATE SKIP LOCKED).
OPTIMISTIC_LOCK_TIMEOUT = 0.1
# Batches walk the heap in physical order when the planner expects at least this many expired rows per
# heap page (most pages then hold some: one sequential pass reads fewer pages than the random visits of
# the expires_at index order); fewer expired rows are found through the index.
PHYSICAL_ORDER_ROWS_PER_PAGE = 1.0
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


def estimated_rows(connection, where: str, params: list) -> int | None:
    """PostgreSQL's planner estimate of the rows ``where`` matches (no scan); None elsewhere."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM task_state_store WHERE {where}", params)
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return int(plan[0]["Plan"]["Plan Rows"])


def _batch_order(connection, plan: GcPlan) -> str:
    """Physical (heap) order when expired rows are spread over most pages, else the expires_at index's."""
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute("SELECT relpages FROM pg_class WHERE oid = 'task_state_store'::regclass")
        pages = max(cursor.fetchone()[0], 1)
        expected = estimated_rows(connection, expired_where(plan.dag_ids), expired_params(plan)) or 0
    return PHYSICAL if expected >= pages * PHYSICAL_ORDER_ROWS_PER_PAGE else INDEX


class _PgBatches:
    """PostgreSQL's batches of at most ``plan.batch_size`` rows, optimistic first.

    Each batch statement picks up to N row addresses (ctid) of expired rows, deletes those rows while
    re-checking ``expires_at < cutoff`` (so that a row re-written with a later expiry since the pick
    survives: PostgreSQL re-evaluates the condition on the newest row version before deleting it), and
    returns (rows deleted, rows picked, the last address picked). Optimistic batches lock nothing before
    deleting; one that meets a row another transaction holds waits at most ``OPTIMISTIC_LOCK_TIMEOUT``,
    rolls back and is run again the safe way, whose pick is ``FOR UPDATE SKIP LOCKED``: held rows are
    left for the next run.

    - Physical order: the pick walks the heap from the last address the previous batch picked (a TID
      range scan; the planner is kept to it), so every page is read once, in order. A held row is left
      behind by the safe batch; the next batches are optimistic again.
    - Index order: the pick walks the ``expires_at`` index (``ORDER BY expires_at``). A held row would
      come first again in every following batch, so once one is met the rest of the run is safe batches.
    """

    def __init__(self, plan: GcPlan, order: str):
        self.plan, self.order = plan, order
        self.after = "(0,0)"  # physical order: the last address picked
        self.safe = False  # index order: a held row was met

    def statement(self, safe: bool) -> tuple[str, list]:
        where, params, n = expired_where(self.plan.dag_ids), expired_params(self.plan), int(self.plan.batch_size)
        lock = " FOR UPDATE SKIP LOCKED" if safe else ""
        if self.order == PHYSICAL:
            pick = f"SELECT ctid FROM task_state_store WHERE ctid > %s::tid AND {where} LIMIT {n}{lock}"
            pick_params = [self.after, *params]
        else:
            pick = f"SELECT ctid FROM task_state_store WHERE {where} ORDER BY expires_at LIMIT {n}{lock}"
            pick_params = params
        if self.plan.with_objects:  # the references among the deleted values too, as a fourth column
            gone, refs_params = f"{REF_OF_VALUE} AS ref", [REF_PREFIX]
            refs = ", (SELECT array_agg(ref) FROM gone WHERE ref IS NOT NULL)"
        else:
            gone, refs, refs_params = "1", "", []
        sql = (
            f"WITH batch AS MATERIALIZED ({pick}), gone AS (DELETE FROM task_state_store "
            f"WHERE ctid = ANY(ARRAY(SELECT ctid FROM batch)) AND {where} RETURNING {gone}) "
            "SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM batch), (SELECT max(ctid) FROM batch)::text"
            f"{refs}"
        )
        return sql, [*pick_params, *params, *refs_params]

    def settings(self, safe: bool) -> dict[str, str]:
        """A batch's settings: the optimistic batches' are the session's for the whole run
        (``_session_settings``), a safe batch's are its transaction's (SET LOCAL)."""
        timeout = self.plan.lock_timeout if safe else min(self.plan.lock_timeout, OPTIMISTIC_LOCK_TIMEOUT)
        local = {"lock_timeout": f"{max(int(timeout * 1000), 1)}ms", "synchronous_commit": "off"}
        if self.order == PHYSICAL:
            # Only a TID range scan returns rows in physical order: no index, no (parallel) sequential scan.
            local |= {
                "enable_indexscan": "off",
                "enable_bitmapscan": "off",
                "enable_seqscan": "off",
                "max_parallel_workers_per_gather": "0",
            }
        return local


def _lock_not_available(exc: DatabaseError) -> bool:
    return getattr(exc.__cause__, "sqlstate", None) == "55P03"  # lock_timeout expired


def advisory_lock(connection) -> AbstractContextManager[None]:
    """GC's lock (``locks.advisory_lock``): ``GcLockBusy`` while another run holds it."""
    return locks.advisory_lock(
        connection,
        ADVISORY_LOCK_KEY,
        lambda holder: GcLockBusy(f"Another state_store_clean run is in progress{holder}; not starting a second one."),
    )


def _delete_batch(
    connection, sql: str, params: list, interrupter: Interrupter, local: dict[str, str]
) -> tuple[int, int | None, str | None, list[str] | None]:
    """Run one batch statement in its own transaction with the ``local`` settings (PostgreSQL); return the
    rows it deleted, for ``_PgBatches`` the rows it picked and the last address picked, and with objects the
    references among the deleted values (read before the commit, used after it)."""
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # All for this transaction only. Without a synchronous commit a crash can undo the last
            # batches' deletes: the rows are still expired and the next run deletes them again.
            local = {**local, "synchronous_commit": "off"}
            cursor.execute(
                "SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(local)),
                [item for pair in local.items() for item in pair],
            )
        with interrupter.statement():
            cursor.execute(sql, params)
        if cursor.description is None:
            return cursor.rowcount, None, None, None
        if connection.vendor != "postgresql":  # SQLite's DELETE … RETURNING: a row per deleted row
            rows = cursor.fetchall()
            return len(rows), None, None, [ref for (ref,) in rows if ref is not None]
        return _padded(cursor.fetchone())


def _one_statement(
    connection, plan: GcPlan, result: GcResult, interrupter: Interrupter
) -> tuple[int, bool, list[str] | None]:
    """Batch size 0: every expired row in one statement."""
    local = {"lock_timeout": f"{int(plan.lock_timeout * 1000)}ms"}
    try:
        deleted, _, _, refs = _delete_batch(connection, *_statement(connection.vendor, plan), interrupter, local)
        return deleted, True, refs
    except DatabaseError as exc:
        if not _lock_not_available(exc):  # only PostgreSQL reports 55P03
            raise
    # One plain DELETE (as fast as it gets) waits on rows another transaction holds: `airflow db clean`,
    # Airflow's own GC, a writer. Past lock_timeout it has rolled back; one statement that skips the held
    # rows deletes the rest.
    deleted, _, _, refs = _delete_batch(
        connection, *_statement(connection.vendor, plan, skip_locked=True), interrupter, local
    )
    result.message = (
        f"Rows another transaction held for more than {plan.lock_timeout:g}s were skipped; "
        "the next run deletes those that are still there."
    )
    return deleted, True, refs


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


def _optimistic_batch(
    connection, sql: str, params: list, interrupter: Interrupter
) -> tuple[int, int, str | None, list[str] | None]:
    """One optimistic batch: a single statement in autocommit, its own implicit transaction, with the
    session's settings (``_session_settings``): one round trip, where BEGIN, SET LOCAL, the statement and
    COMMIT took four. Inside a caller's transaction (tests), a savepoint, so that a failed batch rolls back
    alone."""
    in_transaction = connection.in_atomic_block
    with transaction.atomic(using=connection.alias) if in_transaction else nullcontext(), connection.cursor() as cursor:
        with interrupter.statement():
            cursor.execute(sql, params)
        return _padded(cursor.fetchone())


def _padded(row) -> tuple:
    """A batch statement's row with its fourth column (the references, with objects only)."""
    return (*row, None) if len(row) == 3 else tuple(row)


Step = Callable[[], tuple[int, bool, list[str] | None]]  # a batch: rows deleted, last batch, references


def _pg_batch(
    connection, batches: _PgBatches, result: GcResult, interrupter: Interrupter
) -> tuple[int, bool, list[str] | None]:
    """One PostgreSQL batch, optimistic unless a held row was met (``_PgBatches``)."""
    safe = batches.safe
    try:
        if safe:
            deleted, picked, last, refs = _delete_batch(
                connection, *batches.statement(True), interrupter, batches.settings(True)
            )
        else:
            deleted, picked, last, refs = _optimistic_batch(connection, *batches.statement(False), interrupter)
    except DatabaseError as exc:
        if safe or not _lock_not_available(exc):
            raise
        result.safe_batches += 1  # rolled back: the same batch again, skipping the held rows
        deleted, picked, last, refs = _delete_batch(
            connection, *batches.statement(True), interrupter, batches.settings(True)
        )
        batches.safe = batches.order == INDEX
    if last:
        batches.after = last
    return deleted, picked < batches.plan.batch_size, refs


def batch_steps(plan: GcPlan, result: GcResult, interrupter: Interrupter) -> tuple[AbstractContextManager, Step]:
    """The run's batches: the session settings to hold while they run, and the step that runs one batch."""
    connection = connections[airflow_alias()]
    if plan.batch_size == 0:
        result.batch_order = "one statement"
        return nullcontext(), partial(_one_statement, connection, plan, result, interrupter)
    if connection.vendor == "postgresql":
        batches = _PgBatches(plan, _batch_order(connection, plan))
        result.batch_order = batches.order
        session = _session_settings(connection, batches.settings(False))
        return session, partial(_pg_batch, connection, batches, result, interrupter)
    # SQLite: no row locks; it serialises writers
    result.batch_order = INDEX
    sql, params = _statement(connection.vendor, plan)

    def step() -> tuple[int, bool, list[str] | None]:
        deleted, _, _, refs = _delete_batch(connection, sql, params, interrupter, {})
        return deleted, deleted < plan.batch_size, refs

    return nullcontext(), step
