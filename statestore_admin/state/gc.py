"""Garbage collection of expired task state, with Airflow 3.3.2's rules (docs/airflow.md).

- Deletes ``task_state_store`` rows with ``expires_at < cutoff``; the cutoff is one instant taken at
  the start of the run (or an earlier one given by the operator). ``expires_at IS NULL`` is never
  deleted; ``asset_state_store`` is never touched.
- Only for the metastore backend (``airflow.state.metastore.MetastoreBackend`` or a subclass).
- Batch size 0: one ``DELETE`` statement in the database (no ids in Python). N > 0: batches of at
  most N rows, each committed on its own.

Operational behaviour beyond Airflow's (PostgreSQL): batches pick rows through the ``expires_at``
index with ``FOR UPDATE SKIP LOCKED``, so rows a writer or another GC holds are left for the next
run instead of waited on; every transaction has a ``lock_timeout`` (batch size 0, a plain DELETE that
waits, falls back past it to one statement that skips held rows); a session advisory lock keeps two
runs (from any hosts) from overlapping. A row re-written with a later expiry while GC runs is
re-checked by PostgreSQL under its lock and survives.

Every real run is recorded twice in the dashboard database, both written before anything is deleted:
a ``GcRun`` row (operations) and an ``AuditEvent`` (the audit trail, action ``gc``: counts, cutoff,
scope and outcome, never the rows). Dry runs record nothing. The rules both faces share live here too:
``parse_cutoff`` (the ``--before`` / ``?before=`` instant), the bounds of a ``GcPlan`` and the dry-run
summary (``DryRunSummary.as_dict``), so that the command and the API cannot drift apart.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.db import DatabaseError, connections, router, transaction
from django.db.models import Count, Max, Min
from django.utils import timezone
from django.utils.module_loading import import_string

from statestore_admin.airflow.config import METASTORE_BACKEND, AirflowConfig, airflow_config
from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.airflow.router import airflow_alias

from . import audit
from .actors import Actor
from .errors import Invalid
from .models import AuditEvent, GcRun
from .scopes import Scope, scope_of
from .values import parse_datetime_aware

# pg_try_advisory_lock key: the bytes "ssadm-gc" as a big-endian int64.
ADVISORY_LOCK_KEY = int.from_bytes(b"ssadm-gc", "big")


class GcInterrupted(KeyboardInterrupt):
    """Raised inside a batch when SIGINT/SIGTERM arrives; psycopg cancels the query, the batch rolls back."""


class GcLockBusy(Exception):
    """Another run holds the advisory lock."""


class GcNotMigrated(Exception):
    """The dashboard database has no table for GC run records (``migrate`` has not been run)."""


@dataclass(frozen=True)
class BackendStatus:
    backend: str
    is_metastore: bool
    reason: str


def backend_status(config: AirflowConfig | None = None) -> BackendStatus:
    """Is ``[state_store] backend`` the metastore backend, whose rows GC may delete?

    The default dotted path is the metastore backend. Another path counts when it is listed in the
    ``STATESTORE_METASTORE_BACKENDS`` setting, or when both it and Airflow's ``MetastoreBackend`` can be
    imported here and it is a subclass. Anything else is a custom backend: nothing is deleted.
    """
    backend = (config or airflow_config()).backend
    if backend == METASTORE_BACKEND:
        return BackendStatus(backend, True, "the default metastore backend")
    if backend in settings.STATESTORE_METASTORE_BACKENDS:
        return BackendStatus(backend, True, "declared a MetastoreBackend subclass in STATESTORE_METASTORE_BACKENDS")
    try:
        backend_class = import_string(backend)
        metastore_class = import_string(METASTORE_BACKEND)
    except ImportError as exc:
        return BackendStatus(
            backend,
            False,
            f"a custom backend ({backend}); it cannot be imported here to check whether it subclasses "
            f"MetastoreBackend ({exc}). If it does, list it in STATESTORE_METASTORE_BACKENDS",
        )
    if isinstance(backend_class, type) and issubclass(backend_class, metastore_class):
        return BackendStatus(backend, True, "a subclass of MetastoreBackend")
    return BackendStatus(backend, False, f"a custom backend ({backend}), not a MetastoreBackend subclass")


def parse_cutoff(text: str | None, now: datetime) -> datetime:
    """The cutoff an operator gives (``--before``, ``?before=``): ISO 8601 with a time zone, not after
    ``now``. Empty or None: ``now``. ``Invalid`` on field ``before`` otherwise."""
    if not text:
        return now
    if text != text.strip():
        raise Invalid({"before": "A date and time without surrounding spaces."})
    cutoff = parse_datetime_aware(text, "before")
    if cutoff > now:
        raise Invalid({"before": "This is in the future; garbage collection only deletes what has expired."})
    return cutoff


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class GcPlan:
    """What one run deletes and how. Its bounds are checked here, whichever face builds it (``Invalid``)."""

    cutoff: datetime
    dag_ids: tuple[str, ...] = ()
    batch_size: int = 0
    sleep: float = 0.0
    max_batches: int | None = None
    lock_timeout: float = 5.0

    def __post_init__(self):
        errors = {}
        if not isinstance(self.cutoff, datetime) or timezone.is_naive(self.cutoff):
            errors["cutoff"] = "The cutoff must be a timezone-aware date and time."
        if not isinstance(self.batch_size, int) or isinstance(self.batch_size, bool) or self.batch_size < 0:
            errors["batch_size"] = "The batch size must be a whole number, 0 or more (0: one statement)."
        if not _is_number(self.sleep) or self.sleep < 0:
            errors["sleep"] = "The pause between batches must be 0 seconds or more."
        if self.max_batches is not None and (
            not isinstance(self.max_batches, int) or isinstance(self.max_batches, bool) or self.max_batches < 1
        ):
            errors["max_batches"] = "The maximum number of batches must be 1 or more (or none)."
        if not _is_number(self.lock_timeout) or self.lock_timeout <= 0:
            errors["lock_timeout"] = "The lock timeout must be more than 0 seconds."
        if not isinstance(self.dag_ids, tuple) or not all(isinstance(d, str) and d for d in self.dag_ids):
            errors["dag_ids"] = "DAG ids must be non-empty strings."
        if errors:
            raise Invalid(errors)


def expired_rows(cutoff: datetime, dag_ids: tuple[str, ...] = ()):
    rows = TaskStateStore.objects.filter(expires_at__lt=cutoff)
    return rows.filter(dag_id__in=dag_ids) if dag_ids else rows


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value else None


def _decoded(text: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text  # not JSON (written outside Airflow): shown as it is


@dataclass(frozen=True)
class DryRunSummary:
    plan: GcPlan
    backend: BackendStatus
    rows: int
    dags: int
    by_dag: list[tuple[str, int]]
    oldest: datetime | None
    newest: datetime | None
    sample: list[TaskStateStore]

    @property
    def cutoff(self) -> datetime:
        return self.plan.cutoff

    @property
    def message(self) -> str:
        if self.backend.is_metastore:
            return ""
        return f"Nothing would be deleted: [state_store] backend is {self.backend.reason}."

    def as_dict(self) -> dict:
        """The summary as the API (``gc/dry-run``) and ``state_store_clean --dry-run --json`` print it."""
        return {
            "dry_run": True,
            "outcome": "dry_run" if self.backend.is_metastore else GcRun.Outcome.SKIPPED.value,
            "message": self.message,
            "backend": self.backend.backend,
            "backend_is_metastore": self.backend.is_metastore,
            "reason": self.backend.reason,
            "cutoff": _iso(self.plan.cutoff),
            "dag_ids": list(self.plan.dag_ids),
            "rows": self.rows,
            "dags": self.dags,
            "by_dag": [{"dag_id": dag_id, "rows": rows} for dag_id, rows in self.by_dag],
            "oldest_expiry": _iso(self.oldest),
            "newest_expiry": _iso(self.newest),
            "sample": [
                {
                    "key": r.key,
                    "value": _decoded(r.value),
                    "updated_at": _iso(r.updated_at),
                    "expires_at": _iso(r.expires_at),
                    "dag_id": r.dag_id,
                    "run_id": r.run_id,
                    "task_id": r.task_id,
                    "map_index": r.map_index,
                }
                for r in self.sample
            ],
        }


def dry_run(
    plan: GcPlan, top: int = 10, sample: int = 5, config: AirflowConfig | None = None, *, scope: Scope
) -> DryRunSummary:
    """What a run would delete, in a bounded number of bounded queries whatever the table size. GC spans
    every DAG: a user with a ``scope`` may not preview it (Forbidden).

    With a backend other than the metastore's nothing would be deleted: the summary says so and counts nothing.
    """
    scope.require_unrestricted("Garbage collection")
    status = backend_status(config)
    if not status.is_metastore:
        return DryRunSummary(plan, status, 0, 0, [], None, None, [])
    rows = expired_rows(plan.cutoff, plan.dag_ids)
    stats = rows.aggregate(
        rows=Count("id"), dags=Count("dag_id", distinct=True), oldest=Min("expires_at"), newest=Max("expires_at")
    )
    by_dag = list(
        rows.values("dag_id").annotate(n=Count("id")).order_by("-n", "dag_id").values_list("dag_id", "n")[:top]
    )
    examples = list(rows.order_by("expires_at", "id")[:sample])
    return DryRunSummary(plan, status, stats["rows"], stats["dags"], by_dag, stats["oldest"], stats["newest"], examples)


@dataclass
class Interrupter:
    """Shared with a signal handler: asks the run to stop; raises only while a batch statement runs."""

    signum: int | None = None
    _in_statement: bool = False

    @property
    def stop_requested(self) -> bool:
        return self.signum is not None

    def request(self, signum: int) -> None:
        self.signum = signum
        if self._in_statement:
            raise GcInterrupted()

    @contextmanager
    def statement(self) -> Iterator[None]:
        if self.stop_requested:
            raise GcInterrupted()
        self._in_statement = True
        try:
            yield
        finally:
            self._in_statement = False

    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stop_requested and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))


@dataclass
class GcProgress:
    batch: int
    rows: int
    total_rows: int
    elapsed: float


@dataclass
class GcResult:
    plan: GcPlan
    backend: BackendStatus
    outcome: str
    rows_deleted: int = 0
    batches: int = 0
    delete_seconds: float = 0.0
    started_at: datetime = field(default_factory=timezone.now)
    finished_at: datetime | None = None
    message: str = ""
    record: GcRun | None = None
    event: AuditEvent | None = None

    @property
    def duration(self) -> float:
        return ((self.finished_at or timezone.now()) - self.started_at).total_seconds()

    def as_dict(self) -> dict:
        return {
            "outcome": self.outcome,
            "rows_deleted": self.rows_deleted,
            "batches": self.batches,
            "cutoff": self.plan.cutoff.isoformat(),
            "dag_ids": list(self.plan.dag_ids),
            "batch_size": self.plan.batch_size,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "duration_seconds": round(self.duration, 3),
            "delete_seconds": round(self.delete_seconds, 3),
            "backend": self.backend.backend,
            "message": self.message,
            "run_id": self.record.pk if self.record else None,
            "audit_event_id": self.event.pk if self.event else None,
        }


# The batch statements. Only this module holds GC SQL.
def _where(dag_ids: tuple[str, ...]) -> str:
    if not dag_ids:
        return "expires_at < %s"
    placeholders = ", ".join(["%s"] * len(dag_ids))
    return f"expires_at < %s AND dag_id IN ({placeholders})"


def _statement(vendor: str, plan: GcPlan, skip_locked: bool = False) -> tuple[str, list]:
    """The DELETE of one batch. ``skip_locked``: batch size 0's fallback, one statement that skips held rows."""
    where = _where(plan.dag_ids)
    params = [connections[airflow_alias()].ops.adapt_datetimefield_value(plan.cutoff), *plan.dag_ids]
    if plan.batch_size == 0 and not skip_locked:
        return f"DELETE FROM task_state_store WHERE {where}", params
    if vendor == "postgresql":
        # The rows are locked by the subquery, so their physical addresses (ctid) cannot change before the
        # DELETE; deleting by ctid is a TID scan instead of one primary-key lookup per row (2x faster).
        limit = f"ORDER BY expires_at LIMIT {int(plan.batch_size)} " if plan.batch_size else ""
        sql = (
            "DELETE FROM task_state_store WHERE ctid = ANY(ARRAY(SELECT ctid FROM task_state_store "
            f"WHERE {where} {limit}FOR UPDATE SKIP LOCKED))"
        )
        return sql, params
    sql = (
        f"DELETE FROM task_state_store WHERE id IN (SELECT id FROM task_state_store WHERE {where} "
        f"ORDER BY expires_at LIMIT {int(plan.batch_size)})"
    )
    return sql, params


def _lock_not_available(exc: DatabaseError) -> bool:
    return getattr(exc.__cause__, "sqlstate", None) == "55P03"  # lock_timeout expired


@contextmanager
def _advisory_lock(connection) -> Iterator[None]:
    if connection.vendor != "postgresql":
        yield  # SQLite serialises writers itself; runs on one host only
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [ADVISORY_LOCK_KEY])
        if not cursor.fetchone()[0]:
            cursor.execute(
                "SELECT a.pid, host(a.client_addr), a.application_name, a.backend_start FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                "AND ((l.classid::bigint << 32) | l.objid::bigint) = %s",
                [ADVISORY_LOCK_KEY],
            )
            holder = cursor.fetchone()
            detail = (
                f" (database session pid {holder[0]}, client {holder[1] or 'local'}, "
                f"{holder[2] or 'no application_name'}, connected {holder[3]:%Y-%m-%d %H:%M:%S %Z})"
                if holder
                else ""
            )
            raise GcLockBusy(f"Another state_store_clean run is in progress{detail}; not starting a second one.")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [ADVISORY_LOCK_KEY])


def _delete_batch(connection, sql: str, params: list, plan: GcPlan, interrupter: Interrupter) -> int:
    """Run one batch in its own transaction; return the rows it deleted."""
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Both for this transaction only. Without a synchronous commit a crash can undo the last
            # batches' deletes: the rows are still expired and the next run deletes them again.
            cursor.execute(
                "SELECT set_config('lock_timeout', %s, true), set_config('synchronous_commit', 'off', true)",
                [f"{int(plan.lock_timeout * 1000)}ms"],
            )
        with interrupter.statement():
            cursor.execute(sql, params)
        return cursor.rowcount


def _run_batches(
    plan: GcPlan,
    result: GcResult,
    interrupter: Interrupter,
    on_batch: Callable[[GcProgress], None] | None,
) -> None:
    connection = connections[airflow_alias()]
    sql, params = _statement(connection.vendor, plan)
    clock = time.monotonic()
    while True:
        try:
            deleted = _delete_batch(connection, sql, params, plan, interrupter)
        except DatabaseError as exc:
            if plan.batch_size or not _lock_not_available(exc):  # only PostgreSQL reports 55P03
                raise
            # Batch size 0 is one plain DELETE (as fast as it gets), which waits on rows another transaction
            # holds: `airflow db clean`, Airflow's own GC, a writer. Past lock_timeout it has rolled back;
            # one statement that skips the held rows deletes the rest.
            fallback_sql, fallback_params = _statement(connection.vendor, plan, skip_locked=True)
            deleted = _delete_batch(connection, fallback_sql, fallback_params, plan, interrupter)
            result.message = (
                f"Rows another transaction held for more than {plan.lock_timeout:g}s were skipped; "
                "the next run deletes those that are still there."
            )
        result.batches += 1
        result.rows_deleted += deleted
        result.delete_seconds = time.monotonic() - clock
        if on_batch:
            on_batch(GcProgress(result.batches, deleted, result.rows_deleted, result.delete_seconds))
        if plan.batch_size == 0 or deleted < plan.batch_size:
            result.outcome = GcRun.Outcome.COMPLETED
            return
        if plan.max_batches is not None and result.batches >= plan.max_batches:
            result.outcome = GcRun.Outcome.PARTIAL
            result.message = f"Stopped after --max-batches {plan.max_batches}; expired rows may remain."
            return
        if plan.sleep:
            interrupter.sleep(plan.sleep)
        if interrupter.stop_requested:
            raise GcInterrupted()


def _audit_details(result: GcResult) -> dict:
    plan = result.plan
    return {
        "gc_run_id": result.record.pk if result.record else None,
        "cutoff": plan.cutoff.isoformat(),
        "dag_ids": list(plan.dag_ids),
        "batch_size": plan.batch_size,
        "max_batches": plan.max_batches,
        "backend": result.backend.backend,
    }


def _start_records(result: GcResult, actor: Actor) -> None:
    """The run's ``GcRun`` and its pending ``AuditEvent``, committed together before anything is deleted:
    no record, no deletion."""
    alias = router.db_for_write(GcRun)
    try:
        with transaction.atomic(using=alias):  # a savepoint when called inside a transaction
            result.record = GcRun.objects.create(
                started_at=result.started_at,
                cutoff=result.plan.cutoff,
                dag_ids=list(result.plan.dag_ids),
                batch_size=result.plan.batch_size,
                host=socket.gethostname()[:255],
                pid=os.getpid(),
            )
            result.event = audit.gc_started(actor, _audit_details(result), result.plan.dag_ids)
    except DatabaseError:
        result.record = result.event = None
        connection = connections[alias]
        tables = connection.introspection.table_names()
        missing = [m._meta.db_table for m in (GcRun, AuditEvent) if m._meta.db_table not in tables]
        if missing:
            raise GcNotMigrated(
                f"The dashboard database ({connection.alias}) has no {' or '.join(missing)} table for GC run "
                "records: run `python manage.py migrate` first. Nothing was deleted."
            ) from None
        raise


def _finish_records(result: GcResult) -> None:
    result.finished_at = timezone.now()
    GcRun.objects.filter(pk=result.record.pk).update(
        finished_at=result.finished_at,
        rows_deleted=result.rows_deleted,
        batches=result.batches,
        outcome=result.outcome,
        message=result.message,
    )
    audit.gc_finished(
        result.event,
        rows_deleted=result.rows_deleted,
        outcome=result.outcome,
        details={
            "batches": result.batches,
            "duration_seconds": round(result.duration, 3),
            "delete_seconds": round(result.delete_seconds, 3),
            "message": result.message,
        },
    )


def run_gc(
    plan: GcPlan,
    *,
    actor: Actor,
    interrupter: Interrupter | None = None,
    on_batch: Callable[[GcProgress], None] | None = None,
    config: AirflowConfig | None = None,
) -> GcResult:
    """Delete expired task state per ``plan``; record the run (``GcRun``) and audit it (one ``AuditEvent``
    by ``actor``, pending at the start, finished with counts and outcome at the end).

    Never raises for the outcomes an operator schedules around: the result's ``outcome`` says
    completed, partial, skipped, locked, interrupted or failed (database errors are re-raised after
    the record and the event are updated).
    """
    scope_of(actor).require_unrestricted("Garbage collection")
    interrupter = interrupter or Interrupter()
    status = backend_status(config)
    result = GcResult(plan=plan, backend=status, outcome=GcRun.Outcome.RUNNING)
    _start_records(result, actor)
    try:
        if not status.is_metastore:
            result.outcome = GcRun.Outcome.SKIPPED
            result.message = f"Nothing deleted: [state_store] backend is {status.reason}."
            return result
        try:
            with _advisory_lock(connections[airflow_alias()]):
                _run_batches(plan, result, interrupter, on_batch)
        except GcLockBusy as exc:
            result.outcome = GcRun.Outcome.LOCKED
            result.message = str(exc)
        except GcInterrupted:
            result.outcome = GcRun.Outcome.INTERRUPTED
            result.message = (
                f"Interrupted by signal {interrupter.signum}: the batch in flight was rolled back; "
                f"{result.batches} committed batch(es) kept. Run again to finish."
            )
        except BaseException as exc:
            result.outcome = GcRun.Outcome.FAILED
            result.message = f"{type(exc).__name__}: {exc}".strip()
            raise
        return result
    finally:
        _finish_records(result)
