"""A real run: ``run_gc`` deletes expired task state by a ``GcPlan``, records it and audits it.

Every real run is recorded twice in the dashboard database, both written before anything is deleted: a
``GcRun`` row (operations) and an ``AuditEvent`` (the audit trail, action ``gc``: counts, cutoff, scope and
outcome, never the rows). Dry runs record nothing. Rows only, as Airflow: a plan ``with_objects`` also
deletes the objects of the rows each batch deleted, after the batch commits; a failure is counted and
reported, never rolls a row back (docs/gc.md, Worker-side objects). After a real run that did its work,
``snapshot_after`` records a statistics snapshot.
"""

from __future__ import annotations

import atexit
import gc as python_gc
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from django.db import DatabaseError, connections, router, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.access import policies
from statestore_admin.access.actors import Actor
from statestore_admin.airflow.config import AirflowConfig
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.audit import events as audit
from statestore_admin.core import formatting
from statestore_admin.gc import sql
from statestore_admin.gc.plan import GcPlan
from statestore_admin.gc.result import SNAPSHOT_AFTER, GcInterrupted, GcProgress, GcResult, Interrupter
from statestore_admin.gc.storage import object_storage
from statestore_admin.objects import store as objects
from statestore_admin.objects.backends import backend_status
from statestore_admin.records.models import AuditEvent, GcRun, StatsSnapshot
from statestore_admin.stats import snapshots as stats


class GcNotMigrated(Exception):
    """The dashboard database has no table for GC run records (``migrate`` has not been run)."""


def _loop(
    plan: GcPlan,
    result: GcResult,
    interrupter: Interrupter,
    on_batch: Callable[[GcProgress], None] | None,
    run: sql.Run,
) -> None:
    clock = time.monotonic()

    def committed(deleted: int, refs: list[str] | None) -> None:
        """One batch committed."""
        result.batches += 1
        result.rows_deleted += deleted
        if refs:  # the batch has committed: now its objects (Airflow's order); failures are recorded, not raised
            began = time.monotonic()
            objects.delete_objects(objects.refs_to_delete(refs, result.store), result.store, into=result.object_deletes)
            result.objects_seconds += time.monotonic() - began
        result.delete_seconds = time.monotonic() - clock - result.objects_seconds
        if on_batch:
            on_batch(GcProgress(result.batches, deleted, result.rows_deleted, result.delete_seconds))

    while True:
        most = None if plan.max_batches is None else plan.max_batches - result.batches
        seconds = None if plan.time_limit is None else max(plan.time_limit - (time.monotonic() - clock), 0.0)
        if run(committed, most, seconds):
            result.outcome = GcRun.Outcome.COMPLETED
            return
        if plan.max_batches is not None and result.batches >= plan.max_batches:
            result.outcome = GcRun.Outcome.PARTIAL
            result.message = f"Stopped after --max-batches {plan.max_batches}; expired rows may remain."
            return
        if plan.time_limit is not None and time.monotonic() - clock >= plan.time_limit:
            result.outcome = GcRun.Outcome.PARTIAL
            result.message = f"Stopped at the time limit of {plan.time_limit:g} s; expired rows may remain."
            return
        if plan.sleep:
            interrupter.sleep(plan.sleep)
        if interrupter.stop_requested:
            raise GcInterrupted()


def _audit_details(result: GcResult) -> dict:
    plan = result.plan
    return {
        "gc_run_id": result.record.pk if result.record else None,
        "cutoff": formatting.iso(plan.cutoff),
        "dag_ids": list(plan.dag_ids),
        "batch_size": plan.batch_size,
        "max_batches": plan.max_batches,
        "time_limit": plan.time_limit,
        "backend": result.backend.backend,
        "with_objects": plan.with_objects,
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
                actor=actor.name[:255],
                via=actor.via,
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
            "objects": result.objects_dict(),
        },
    )


@cache
def _quick_exit() -> None:
    """A run is mostly a whole process (a scheduled ``manage.py state_store_clean``): at its exit, let the
    interpreter skip its garbage collector's passes over every object of Django and its apps (0.2 s of a
    2.4 s run, docs/benchmarks/gc.md). Freezing moves them out of the collector's reach; in a long-lived
    process this happens only when it exits. Once per process."""
    atexit.register(python_gc.freeze)


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
    policies.require_run_gc(actor)  # a command acting as the system may; a user needs the GC policy
    store = object_storage(config) if plan.with_objects else None  # GcMisconfigured: nothing recorded or deleted
    _quick_exit()
    interrupter = interrupter or Interrupter()
    status = backend_status(config)
    result = GcResult(plan=plan, backend=status, outcome=GcRun.Outcome.RUNNING, store=store)
    if plan.with_objects:
        result.object_deletes = objects.ObjectDeletes()
    else:
        result.worker_backend_objects = objects.backend_is_object_storage(config)
    _start_records(result, actor)
    try:
        if not status.is_metastore:
            result.outcome = GcRun.Outcome.SKIPPED
            result.message = f"Nothing deleted: [state_store] backend is {status.reason}."
            return result
        try:
            with sql.advisory_lock(connections[airflow_alias()]):
                session, run = sql.batch_steps(plan, result, interrupter)
                with session:
                    _loop(plan, result, interrupter, on_batch, run)
        except sql.GcLockBusy as exc:
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
        if result.objects_failed:
            note = _objects_failed_note(result.object_deletes)
            result.message = f"{result.message} {note}".strip()
        _finish_records(result)


def _objects_failed_note(deletes: objects.ObjectDeletes) -> str:
    n = deletes.failed_count
    ref, error = deletes.failed[0]
    more = f" and {n - 1:,} more" if n > 1 else ""
    return (
        f"{n:,} worker-side object{'s' if n != 1 else ''} could not be deleted and "
        f"{'are' if n != 1 else 'is'} orphaned ({ref}: {error}{more}); the rows stay deleted. "
        "state_store_orphans lists orphans."
    )


@dataclass(frozen=True)
class SnapshotAfter:
    """The statistics snapshot taken after a real run, or why it failed (``error``). Either way the run is
    done: a snapshot never changes its outcome."""

    snapshot: StatsSnapshot | None
    error: str = ""
    skipped: bool = False  # another snapshot was being taken: ``error`` says so, and nothing was recorded

    def describe(self) -> str:
        """What the faces say when no snapshot was taken."""
        if self.skipped:
            message = _("No statistics snapshot after this run (the GC run itself is done): %(error)s")
            return message % {"error": self.error}
        return _("Statistics snapshot failed (the GC run itself is done): %(error)s") % {"error": self.error}

    def as_dict(self) -> dict:
        """What ``state_store_clean --json`` says of it (its ``stats``)."""
        if self.snapshot is None:
            return {"status": "skipped" if self.skipped else "failed", "error": self.error}
        return {
            "id": self.snapshot.pk,
            "status": self.snapshot.status,
            "duration_seconds": self.snapshot.duration_seconds,
        }


def snapshot_after(result: GcResult, *, actor: Actor) -> SnapshotAfter | None:
    """Record a statistics snapshot (trigger "gc", taken by ``actor``, who ran GC) after a real run whose
    outcome is in ``SNAPSHOT_AFTER``, whichever face ran it, so that the figures the pages show follow what GC
    deleted; None after any other outcome. A snapshot that fails is recorded as failed and returned with its
    error, not raised; an interruption (``KeyboardInterrupt``) is raised, for the face to end as it ends on a
    signal."""
    if result.outcome not in SNAPSHOT_AFTER:
        return None
    try:
        return SnapshotAfter(stats.take_snapshot(actor=actor, trigger="gc"))
    except stats.SnapshotInProgress as exc:  # its figures follow this run's deletions as well, or nearly
        return SnapshotAfter(None, str(exc), skipped=True)
    except Exception as exc:
        return SnapshotAfter(None, f"{type(exc).__name__}: {exc}")
