"""Garbage collection of expired task state, with Airflow 3.3.2's rules (docs/airflow.md), for every face:
``plan`` (what a run deletes: ``GcPlan``, ``parse_cutoff``, ``backend_status``), ``preview`` (the dry run:
``dry_run``, ``DryRunSummary``), ``run`` (``run_gc``: the run, its ``GcRun`` record and audit event, the
statistics snapshot after it), ``result`` (``GcResult``, a recorded run's shape ``run_as_dict``, the
outcome sets, progress, the ``Interrupter``), ``sql`` (every GC statement and the batch executor:
PostgreSQL's optimistic batches, advisory lock and session settings), ``storage`` (worker-side objects:
``with_objects`` runs) and ``page`` (the GC page's policy: access, cutoff, history, health). The names the
faces use are importable from here.
"""

from statestore_admin.gc.page import (
    AGE_UNITS,
    CUTOFF_KINDS,
    HISTORY_PAGE_SIZE,
    PAGE_MAX_BATCH_SIZE,
    PAGE_MAX_BATCHES,
    PAGE_MAX_SECONDS,
    GcAccess,
    GcHealth,
    access,
    health,
    history,
    page_cutoff,
)
from statestore_admin.gc.plan import GcPlan, expired_rows, parse_cutoff
from statestore_admin.gc.preview import DRY_RUN_EXACT_CAP, DryRunSummary, dry_run
from statestore_admin.gc.result import (
    SNAPSHOT_AFTER,
    STOPPED,
    SUCCESSFUL,
    WITHOUT_DELETING,
    GcInterrupted,
    GcProgress,
    GcResult,
    Interrupter,
    run_as_dict,
)
from statestore_admin.gc.run import GcNotMigrated, SnapshotAfter, run_gc, snapshot_after
from statestore_admin.gc.sql import ADVISORY_LOCK_KEY, INDEX, OPTIMISTIC_LOCK_TIMEOUT, PHYSICAL, GcLockBusy
from statestore_admin.gc.storage import (
    OBJECTS_LEFT_BEHIND,
    REF_PREFIX,
    ExpiredReferences,
    GcMisconfigured,
    can_delete_objects,
    object_storage,
)
from statestore_admin.objects.backends import BackendStatus, backend_status  # whether GC may delete: the backend's rule

__all__ = [
    "ADVISORY_LOCK_KEY",
    "AGE_UNITS",
    "CUTOFF_KINDS",
    "DRY_RUN_EXACT_CAP",
    "HISTORY_PAGE_SIZE",
    "INDEX",
    "OBJECTS_LEFT_BEHIND",
    "OPTIMISTIC_LOCK_TIMEOUT",
    "PAGE_MAX_BATCHES",
    "PAGE_MAX_BATCH_SIZE",
    "PAGE_MAX_SECONDS",
    "PHYSICAL",
    "REF_PREFIX",
    "SNAPSHOT_AFTER",
    "STOPPED",
    "SUCCESSFUL",
    "WITHOUT_DELETING",
    "BackendStatus",
    "DryRunSummary",
    "ExpiredReferences",
    "GcAccess",
    "GcHealth",
    "GcInterrupted",
    "GcLockBusy",
    "GcMisconfigured",
    "GcNotMigrated",
    "GcPlan",
    "GcProgress",
    "GcResult",
    "Interrupter",
    "SnapshotAfter",
    "access",
    "backend_status",
    "can_delete_objects",
    "dry_run",
    "expired_rows",
    "health",
    "history",
    "object_storage",
    "page_cutoff",
    "parse_cutoff",
    "run_as_dict",
    "run_gc",
    "snapshot_after",
]
