"""What a run did (``GcResult``; ``run_as_dict``, a recorded run's shape for every face) and which of its
outcomes count as what (the outcome sets every face uses), its progress after each batch (``GcProgress``)
and the ``Interrupter`` a signal handler uses to stop it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from statestore_admin.core import formatting
from statestore_admin.gc.plan import GcPlan
from statestore_admin.gc.storage import OBJECTS_LEFT_BEHIND
from statestore_admin.objects import store as objects
from statestore_admin.objects.backends import BackendStatus
from statestore_admin.records.models import AuditEvent, GcRun

# The outcome sets, one home for every face (the command's exit codes and text, the page's messages, the
# GC page's health). Successful: it deleted what it was asked to (all of it, or up to its batch or time
# limit). A statistics snapshot follows a real run that did its work or had none to do (skipped: a backend
# GC does not clean), not one that another run held off (locked: that run takes one), interrupted or failed.
# Without deleting: the message says why nothing was deleted. Stopped: the run did not do its work (the
# command says so on stderr and exits non-zero).
SUCCESSFUL = (GcRun.Outcome.COMPLETED, GcRun.Outcome.PARTIAL)
SNAPSHOT_AFTER = (*SUCCESSFUL, GcRun.Outcome.SKIPPED)
WITHOUT_DELETING = (GcRun.Outcome.SKIPPED, GcRun.Outcome.LOCKED)
STOPPED = (GcRun.Outcome.LOCKED, GcRun.Outcome.INTERRUPTED)


class GcInterrupted(KeyboardInterrupt):
    """Raised inside a batch when SIGINT/SIGTERM arrives; psycopg cancels the query, the batch rolls back."""


@dataclass
class Interrupter:
    """Shared with a signal handler: asks the run to stop. While a batch statement runs it raises, or, for a
    statement given a ``cancel``, only cancels it: the statement then fails and the caller (``sql``) reads
    that failure as the interrupt."""

    signum: int | None = None
    _in_statement: bool = False
    _cancel: Callable[[], None] | None = None

    @property
    def stop_requested(self) -> bool:
        return self.signum is not None

    def request(self, signum: int) -> None:
        self.signum = signum
        if not self._in_statement:
            return
        if self._cancel is None:
            raise GcInterrupted()
        self._cancel()

    @contextmanager
    def statement(self, cancel: Callable[[], None] | None = None) -> Iterator[None]:
        if self.stop_requested:
            raise GcInterrupted()
        self._in_statement, self._cancel = True, cancel
        try:
            yield
        finally:
            self._in_statement, self._cancel = False, None

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
    batch_order: str = ""
    safe_batches: int = 0
    record: GcRun | None = None
    event: AuditEvent | None = None
    # with_objects: the storage, what deleting the deleted rows' objects did, and how long it took
    store: objects.Storage | None = None
    object_deletes: objects.ObjectDeletes | None = None
    objects_seconds: float = 0.0
    # Without with_objects: common.io's backend is configured, so the rows deleted may have left objects behind
    # (not counted: that would cost the default path a look at every deleted value)
    worker_backend_objects: bool = False

    @property
    def duration(self) -> float:
        return ((self.finished_at or timezone.now()) - self.started_at).total_seconds()

    @property
    def objects_failed(self) -> int:
        return self.object_deletes.failed_count if self.object_deletes else 0

    @property
    def objects_left_behind(self) -> bool:
        """Rows were deleted without their objects while common.io's backend is configured."""
        return self.worker_backend_objects and self.rows_deleted > 0

    def objects_dict(self) -> dict | None:
        """What became of the deleted rows' worker-side objects (``as_dict``, the audit event)."""
        if self.object_deletes is not None:
            return {**self.object_deletes.details(), "seconds": round(self.objects_seconds, 3)}
        if self.objects_left_behind:
            return {"left_behind": True, "note": OBJECTS_LEFT_BEHIND}
        return None

    def as_dict(self) -> dict:
        """This run as ``state_store_clean --json`` prints it: its record's figures and what only the process
        that ran it knows (timings, batch order, the audit event, the objects)."""
        return {
            "outcome": self.outcome,
            "rows_deleted": self.rows_deleted,
            "batches": self.batches,
            "cutoff": formatting.iso(self.plan.cutoff),
            "dag_ids": list(self.plan.dag_ids),
            "batch_size": self.plan.batch_size,
            "started_at": formatting.iso(self.started_at),
            "finished_at": formatting.iso(self.finished_at),
            "duration_seconds": round(self.duration, 3),
            "delete_seconds": round(self.delete_seconds, 3),
            "backend": self.backend.backend,
            "batch_order": self.batch_order,
            "safe_batches": self.safe_batches,
            "message": self.message,
            "run_id": self.record.pk if self.record else None,
            "audit_event_id": self.event.pk if self.event else None,
            "with_objects": self.plan.with_objects,
            "objects": self.objects_dict(),
        }


def run_as_dict(run: GcRun) -> dict:
    """A recorded run as every face shows it (the API's GC history and the overview's latest runs)."""
    return {
        "started_at": formatting.iso(run.started_at),
        "finished_at": formatting.iso(run.finished_at),
        "duration_seconds": run.duration_seconds,
        "outcome": run.outcome,
        "rows_deleted": run.rows_deleted,
        "batches": run.batches,
        "batch_size": run.batch_size,
        "cutoff": formatting.iso(run.cutoff),
        "dag_ids": run.dag_ids,
        "message": run.message,
        "host": run.host,
    }
