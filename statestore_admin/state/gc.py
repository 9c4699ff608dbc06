"""Garbage collection of expired task state, with Airflow 3.3.2's rules (docs/airflow.md).

- Deletes ``task_state_store`` rows with ``expires_at < cutoff``; the cutoff is one instant taken at
  the start of the run (or an earlier one given by the operator). ``expires_at IS NULL`` is never
  deleted; ``asset_state_store`` is never touched.
- Only for the metastore backend (``airflow.state.metastore.MetastoreBackend`` or a subclass).
- Batch size 0: one ``DELETE`` statement in the database (no ids in Python). N > 0: batches of at
  most N rows, each committed on its own.
- Rows only, as Airflow: the worker-side objects of expired references stay behind. A plan
  ``with_objects`` (our extension, ``state_store_clean --with-objects``) also deletes the objects of the
  rows each batch deleted, after the batch commits; a failure is counted and reported, never rolls a row
  back (docs/gc.md, Worker-side objects).

Operational behaviour beyond Airflow's (PostgreSQL): batches are optimistic (``_PgBatches``): a plain
``DELETE`` of the row addresses a batch picked, which re-checks ``expires_at < cutoff`` on the newest row
version (a row re-written with a later expiry while GC runs survives), waiting at most
``OPTIMISTIC_LOCK_TIMEOUT`` on a row another transaction holds; such a batch is rolled back and run again
with ``FOR UPDATE SKIP LOCKED``, which leaves held rows for the next run. An optimistic batch is one
statement in autocommit (one round trip) with the run's settings on the session, restored when the
batches end; a fallback batch is a transaction with ``SET LOCAL``. Batches walk the heap in
physical order (a TID range scan from where the previous one stopped) when the planner expects expired
rows on most pages, else the ``expires_at`` index. Every transaction has a ``lock_timeout`` (batch size
0, a plain DELETE that waits, falls back past it to one statement that skips held rows); a session
advisory lock keeps two runs (from any hosts) from overlapping.

Every real run is recorded twice in the dashboard database, both written before anything is deleted:
a ``GcRun`` row (operations) and an ``AuditEvent`` (the audit trail, action ``gc``: counts, cutoff,
scope and outcome, never the rows). Dry runs record nothing. The rules both faces share live here too:
``parse_cutoff`` (the ``--before`` / ``?before=`` instant), the bounds of a ``GcPlan`` and the dry-run
summary (``DryRunSummary.as_dict`` and ``.lines()``), so that the command and the API cannot drift apart.
The dry run costs the same at any table size: exact up to ``DRY_RUN_EXACT_CAP`` expired rows, past it
the planner's estimate and the latest statistics snapshot's figures by DAG, labelled as such.
"""

from __future__ import annotations

import atexit
import gc as python_gc
import json
import math
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache, partial

from django.conf import settings
from django.db import DatabaseError, connections, router, transaction
from django.db.models import Count, Max, Min
from django.utils import timezone
from django.utils.module_loading import import_string

from statestore_admin.airflow.config import METASTORE_BACKEND, AirflowConfig, AirflowConfigError, airflow_config
from statestore_admin.airflow.models import JsonValueMixin, TaskStateStore, worker_ref_of
from statestore_admin.airflow.router import airflow_alias

from . import audit, objects, permissions, stats
from .actors import Actor
from .errors import Forbidden, Invalid
from .models import AuditEvent, GcRun, StatsSnapshotDag
from .pagination import Page, paginate
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


class GcMisconfigured(Exception):
    """A run that also deletes worker-side objects, without an object storage the dashboard can open: nothing
    is deleted (the command's exit code 2)."""


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
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - ImportError, or whatever the module's code raises
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
    time_limit: float | None = None  # seconds: no batch starts after this (the dashboard's bounded run)
    # Also delete the worker-side objects of the rows deleted, after each committed batch (our extension:
    # Airflow's GC deletes rows only). Needs ``object_storage()``.
    with_objects: bool = False

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
        if self.time_limit is not None and (not _is_number(self.time_limit) or self.time_limit <= 0):
            errors["time_limit"] = "The time limit must be more than 0 seconds (or none)."
        if not isinstance(self.dag_ids, tuple) or not all(isinstance(d, str) and d for d in self.dag_ids):
            errors["dag_ids"] = "DAG ids must be non-empty strings."
        if not isinstance(self.with_objects, bool):
            errors["with_objects"] = "Whether to delete worker-side objects is true or false."
        if errors:
            raise Invalid(errors)


def expired_rows(cutoff: datetime, dag_ids: tuple[str, ...] = ()):
    rows = TaskStateStore.objects.filter(expires_at__lt=cutoff)
    return rows.filter(dag_id__in=dag_ids) if dag_ids else rows


# Worker-side objects ---------------------------------------------------------------------------------
# Like Airflow's, GC deletes rows only: the objects of expired references stay behind (orphans, which
# ``state_store_orphans`` lists). A plan ``with_objects`` also deletes them, in Airflow's order: a batch's rows,
# its commit, then its objects; a failed object delete is counted and reported, never rolls a row back.
OBJECTS_LEFT_BEHIND = (
    "Objects of expired references are left behind (like Airflow's GC): --with-objects deletes them, "
    "state_store_orphans lists them."
)


def object_storage(config: AirflowConfig | None = None) -> objects.Storage:
    """The object storage a run ``with_objects`` deletes from; ``GcMisconfigured`` when the Airflow
    configuration names none, names an invalid one, or one this environment cannot open."""
    try:
        store = objects.Storage.from_config(config)
    except AirflowConfigError as exc:
        raise GcMisconfigured(f"Cannot delete worker-side objects: {exc} Nothing was deleted.") from exc
    if store is None:
        raise GcMisconfigured(
            "Cannot delete worker-side objects: the Airflow configuration has no [common.io] "
            "state_store_objectstorage_path (AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_PATH). "
            "Nothing was deleted."
        )
    try:
        store.filesystem()
    except objects.StorageError as exc:
        raise GcMisconfigured(f"Cannot delete worker-side objects: {exc} Nothing was deleted.") from exc
    return store


def can_delete_objects(config: AirflowConfig | None = None) -> bool:
    """Whether a run may be ``with_objects`` here (the GC page offers it only then)."""
    try:
        object_storage(config)
    except GcMisconfigured:
        return False
    return True


# SQL: a deleted row's value when it holds a worker-side reference (its text starts with the marker the SDK
# writes), else NULL; one parameter, ``REF_PREFIX``. Only runs with_objects return values at all.
REF_PREFIX = JsonValueMixin.REF_PREFIX
REF_OF_VALUE = f"CASE WHEN substr(value, 1, {len(REF_PREFIX)}) = %s THEN value END"


@dataclass(frozen=True)
class ExpiredReferences:
    """The dry run's look at the references among expired rows (with_objects only): of ``rows`` expired rows
    (all of them when ``exact``, else the first ones the expires_at condition meets), how many reference an
    object under the base path (deleted after their rows), hold the value inline (no object) or name a URL
    outside the base path (never deleted: counted as failed)."""

    rows: int
    exact: bool
    objects: int
    inline: int
    unreachable: int

    def as_dict(self) -> dict:
        return {
            "rows_looked_at": self.rows,
            "exact": self.exact,
            "objects": self.objects,
            "inline": self.inline,
            "unreachable": self.unreachable,
        }

    def line(self) -> str:
        among = "the expired rows" if self.exact else f"the first {self.rows:,} expired rows"
        text = (
            f"Worker-side objects (--with-objects), among {among}: {self.objects:,} reference(s) to objects, "
            f"deleted after their rows; {self.inline:,} inline value(s), no object"
        )
        if self.unreachable:
            text += f"; {self.unreachable:,} URL(s) outside the configured base path, never deleted (counted as failed)"
        return text + "."


def _expired_references(plan: GcPlan, store: objects.Storage, cap: int, rows: int) -> ExpiredReferences:
    """Classify the references among at most ``cap + 1`` expired rows (bounded, whatever the table size);
    ``rows`` is ``_capped_count``'s answer."""
    connection = connections[airflow_alias()]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT value FROM (SELECT value FROM task_state_store WHERE {_where(plan.dag_ids)} LIMIT %s) "
            f"AS expired WHERE substr(value, 1, {len(REF_PREFIX)}) = %s",
            [*_params(plan), cap + 1, REF_PREFIX],
        )
        values = [value for (value,) in cursor.fetchall()]
    kinds = [objects.classify(ref, store).kind for v in values if isinstance(ref := worker_ref_of(v), str)]
    inline = kinds.count(objects.INLINE)
    found = kinds.count(objects.OBJECT)
    return ExpiredReferences(rows, rows <= cap, found, inline, len(kinds) - inline - found)


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value else None


def _decoded(text: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text  # not JSON (written outside Airflow): shown as it is


# The dry run counts expired rows exactly up to this many (a count of at most DRY_RUN_EXACT_CAP + 1 rows read
# through the expires_at index); beyond it the rows are the planner's estimate and the DAGs come from the
# latest statistics snapshot, so that the answer costs the same at 20 thousand keys and at 10 million.
DRY_RUN_EXACT_CAP = 10_000


def _human(n: int) -> str:
    for size, unit in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _age(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 1:
        return "less than a minute"
    if minutes < 120:
        return f"{minutes} min"
    hours = minutes // 60
    return f"{hours} h {minutes % 60} min" if hours < 48 else f"{hours // 24} days"


@dataclass(frozen=True)
class DryRunSummary:
    """What a run would delete. ``rows`` is exact unless ``rows_more_than`` is set (the exact count stopped
    past that cap): then ``rows`` is the planner's estimate (``rows_estimated``, PostgreSQL) or None (SQLite).
    ``by_dag`` and ``dags`` come from the expired rows (``by_dag_source`` "exact"), or past the cap from the
    latest statistics snapshot ("snapshot": its ``expired`` figures as of ``snapshot_taken_at``), or are
    unknown (None: no snapshot)."""

    plan: GcPlan
    backend: BackendStatus
    rows: int | None
    dags: int | None
    by_dag: list[tuple[str, int]]
    oldest: datetime | None
    newest: datetime | None
    sample: list[TaskStateStore]
    rows_estimated: bool = False
    rows_more_than: int | None = None
    by_dag_source: str | None = "exact"
    snapshot_taken_at: datetime | None = None
    answered_at: datetime = field(default_factory=timezone.now)
    references: ExpiredReferences | None = None  # the plan is with_objects

    @property
    def cutoff(self) -> datetime:
        return self.plan.cutoff

    @property
    def message(self) -> str:
        if self.backend.is_metastore:
            return ""
        return f"Nothing would be deleted: [state_store] backend is {self.backend.reason}."

    @property
    def snapshot_age_seconds(self) -> float | None:
        if self.snapshot_taken_at is None:
            return None
        return max((self.answered_at - self.snapshot_taken_at).total_seconds(), 0.0)

    def as_dict(self) -> dict:
        """The summary as the API (``gc/dry-run``) and ``state_store_clean --dry-run --json`` print it."""
        age = self.snapshot_age_seconds
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
            "rows_estimated": self.rows_estimated,
            "rows_more_than": self.rows_more_than,
            "dags": self.dags,
            "by_dag": [{"dag_id": dag_id, "rows": rows} for dag_id, rows in self.by_dag],
            "by_dag_source": self.by_dag_source,
            "snapshot_taken_at": _iso(self.snapshot_taken_at),
            "snapshot_age_seconds": round(age, 1) if age is not None else None,
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
        } | ({"objects": self.references.as_dict()} if self.references else {})

    def lines(self) -> list[str]:
        """The summary as ``state_store_clean --dry-run`` prints it (text)."""
        if self.message:
            return [self.message]
        before = self.plan.cutoff.isoformat()
        if self.rows_more_than is None:
            lines = [f"Dry run: {self.rows} task state row(s) expired before {before} would be deleted."]
        else:
            estimate = f"≈ {_human(self.rows)} by the planner's estimate" if self.rows_estimated else "no estimate here"
            lines = [
                f"Dry run: more than {self.rows_more_than:,} task state rows expired before {before} would be "
                f"deleted ({estimate}; counted exactly up to {self.rows_more_than:,})."
            ]
        if self.rows == 0:
            return lines
        lines.append(f"Expiry range: {_when(self.oldest)} (oldest) to {_when(self.newest)} (newest).")
        of = f" of {self.dags}" if self.dags is not None else ""
        if self.by_dag_source == "exact":
            lines.append(f"By DAG (top {len(self.by_dag)}{of}):")
        elif self.by_dag_source == "snapshot":
            lines.append(
                f"By DAG (top {len(self.by_dag)}{of}), expired at the statistics snapshot of "
                f"{_when(self.snapshot_taken_at)} ({_age(self.snapshot_age_seconds)} ago):"
            )
        else:
            lines.append("By DAG: not counted (too many rows and no statistics snapshot; run state_store_stats).")
        width = max((len(d) for d, _ in self.by_dag), default=0)
        lines += [f"  {dag_id:<{width}}  {rows:>10}" for dag_id, rows in self.by_dag]
        counted = f"{len(self.sample)} of {self.rows}" if self.rows_more_than is None else f"the {len(self.sample)}"
        lines.append(f"Sample ({counted}, oldest first):")
        lines += [
            f"  dag {r.dag_id!r} run {r.run_id!r} task {r.task_id!r} map_index {r.map_index} "
            f"key {r.key[:80]!r}{'…' if len(r.key) > 80 else ''} expired {_when(r.expires_at)}"
            for r in self.sample
        ]
        lines.append("Asset state and keys without expiry (NEVER_EXPIRE) are never deleted.")
        if self.references:
            lines.append(self.references.line())
        return lines


def _when(value) -> str:
    return value.isoformat() if value else "-"


def _capped_count(plan: GcPlan, cap: int) -> int:
    """The expired rows, counted up to ``cap + 1`` (an index-only walk of the expires_at index at most)."""
    connection = connections[airflow_alias()]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM task_state_store WHERE {_where(plan.dag_ids)} LIMIT %s) AS capped",
            [*_params(plan), cap + 1],
        )
        return cursor.fetchone()[0]


def _snapshot_by_dag(plan: GcPlan, top: int) -> tuple[datetime | None, int | None, list[tuple[str, int]]]:
    """The latest snapshot's expired rows by DAG: (taken_at, DAGs with expired rows, the top ones), read once
    per snapshot (``stats.kept``: a snapshot never changes, and it has a row per DAG)."""
    latest = stats.latest_snapshot_id()
    if latest is None:
        return None, None, []
    pk, taken_at = latest

    def compute():
        dags = StatsSnapshotDag.objects.filter(snapshot_id=pk, expired__gt=0)
        if plan.dag_ids:
            dags = dags.filter(dag_id__in=plan.dag_ids)
        return dags.count(), list(dags.order_by("-expired", "dag_id").values_list("dag_id", "expired")[:top])

    dags, top_dags = stats.kept("gc-by-dag", (pk, plan.dag_ids, top), compute)
    return taken_at, dags, top_dags


def dry_run(
    plan: GcPlan, top: int = 10, sample: int = 5, config: AirflowConfig | None = None, *, scope: Scope
) -> DryRunSummary:
    """What a run would delete, in a bounded number of bounded queries whatever the table size. GC spans
    every DAG: a user with a ``scope`` may not preview it (Forbidden).

    Up to ``DRY_RUN_EXACT_CAP`` expired rows everything is exact. Past it: the rows are the planner's
    estimate (PostgreSQL; at least the cap + 1), the DAGs come from the latest statistics snapshot (or are
    not counted), the oldest and newest expiry are the two ends of the expires_at index range, and the
    sample its first rows. With a backend other than the metastore's nothing would be deleted: the summary
    says so and counts nothing.
    """
    scope.require_unrestricted("Garbage collection")
    store = object_storage(config) if plan.with_objects else None  # GcMisconfigured
    status = backend_status(config)
    if not status.is_metastore:
        return DryRunSummary(plan, status, 0, 0, [], None, None, [])
    rows = expired_rows(plan.cutoff, plan.dag_ids)
    examples = list(rows.order_by("expires_at", "id")[:sample])
    cap = DRY_RUN_EXACT_CAP
    counted = _capped_count(plan, cap)
    references = _expired_references(plan, store, cap, counted) if store else None
    if counted <= cap:
        stats = rows.aggregate(dags=Count("dag_id", distinct=True), oldest=Min("expires_at"), newest=Max("expires_at"))
        by_dag = list(
            rows.values("dag_id").annotate(n=Count("id")).order_by("-n", "dag_id").values_list("dag_id", "n")[:top]
        )
        return DryRunSummary(
            plan,
            status,
            counted,
            stats["dags"],
            by_dag,
            stats["oldest"],
            stats["newest"],
            examples,
            references=references,
        )
    ends = rows.aggregate(oldest=Min("expires_at"), newest=Max("expires_at"))  # two index lookups
    connection = connections[airflow_alias()]
    estimate = _estimated_rows(connection, _where(plan.dag_ids), _params(plan))
    taken_at, dags, by_dag = _snapshot_by_dag(plan, top)
    return DryRunSummary(
        plan,
        status,
        max(estimate, cap + 1) if estimate is not None else None,
        dags,
        by_dag,
        ends["oldest"],
        ends["newest"],
        examples,
        rows_estimated=estimate is not None,
        rows_more_than=cap,
        by_dag_source="snapshot" if taken_at else None,
        snapshot_taken_at=taken_at,
        references=references,
    )


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
            "batch_order": self.batch_order,
            "safe_batches": self.safe_batches,
            "message": self.message,
            "run_id": self.record.pk if self.record else None,
            "audit_event_id": self.event.pk if self.event else None,
            "with_objects": self.plan.with_objects,
            "objects": self.objects_dict(),
        }


# The batch statements. Only this module holds GC SQL.
def _where(dag_ids: tuple[str, ...]) -> str:
    if not dag_ids:
        return "expires_at < %s"
    placeholders = ", ".join(["%s"] * len(dag_ids))
    return f"expires_at < %s AND dag_id IN ({placeholders})"


def _params(plan: GcPlan) -> list:
    return [connections[airflow_alias()].ops.adapt_datetimefield_value(plan.cutoff), *plan.dag_ids]


def _statement(vendor: str, plan: GcPlan, skip_locked: bool = False) -> tuple[str, list]:
    """Batch size 0's one DELETE (``skip_locked``: its fallback, one statement that skips held rows), and
    SQLite's batches. PostgreSQL's batches are ``_PgBatches``. With objects, the same DELETE returns the
    references among the deleted values (``_returning_refs``)."""
    where = _where(plan.dag_ids)
    params = _params(plan)
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


def _estimated_rows(connection, where: str, params: list) -> int | None:
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
        expected = _estimated_rows(connection, _where(plan.dag_ids), _params(plan)) or 0
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
        where, params, n = _where(self.plan.dag_ids), _params(self.plan), int(self.plan.batch_size)
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


def _run_batches(
    plan: GcPlan,
    result: GcResult,
    interrupter: Interrupter,
    on_batch: Callable[[GcProgress], None] | None,
) -> None:
    connection = connections[airflow_alias()]
    session = nullcontext()
    if plan.batch_size == 0:
        result.batch_order = "one statement"
        step = partial(_one_statement, connection, plan, result, interrupter)
    elif connection.vendor == "postgresql":
        batches = _PgBatches(plan, _batch_order(connection, plan))
        result.batch_order = batches.order
        session = _session_settings(connection, batches.settings(False))
        step = partial(_pg_batch, connection, batches, result, interrupter)
    else:  # SQLite: no row locks; it serialises writers
        result.batch_order = INDEX
        sql, params = _statement(connection.vendor, plan)

        def step() -> tuple[int, bool, list[str] | None]:
            deleted, _, _, refs = _delete_batch(connection, sql, params, interrupter, {})
            return deleted, deleted < plan.batch_size, refs

    with session:
        _loop(plan, result, interrupter, on_batch, step)


def _loop(
    plan: GcPlan,
    result: GcResult,
    interrupter: Interrupter,
    on_batch: Callable[[GcProgress], None] | None,
    step: Step,
) -> None:
    clock = time.monotonic()
    while True:
        deleted, finished, refs = step()
        result.batches += 1
        result.rows_deleted += deleted
        if refs:  # the batch has committed: now its objects (Airflow's order); failures are recorded, not raised
            began = time.monotonic()
            objects.delete_objects(objects.refs_to_delete(refs, result.store), result.store, into=result.object_deletes)
            result.objects_seconds += time.monotonic() - began
        elapsed = time.monotonic() - clock
        result.delete_seconds = elapsed - result.objects_seconds
        if on_batch:
            on_batch(GcProgress(result.batches, deleted, result.rows_deleted, result.delete_seconds))
        if finished:
            result.outcome = GcRun.Outcome.COMPLETED
            return
        if plan.max_batches is not None and result.batches >= plan.max_batches:
            result.outcome = GcRun.Outcome.PARTIAL
            result.message = f"Stopped after --max-batches {plan.max_batches}; expired rows may remain."
            return
        if plan.time_limit is not None and elapsed >= plan.time_limit:
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
        "cutoff": plan.cutoff.isoformat(),
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
    scope_of(actor).require_unrestricted("Garbage collection")
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


# The GC page (dashboard) -----------------------------------------------------------------------------
# Running GC from the page needs this permission (the Admin role has it) and delete on task state. GC spans
# every DAG, so the page, like the API's dry run, is for users with view on task state and no scope.
RUN_PERMISSION = "state.add_gcrun"
# A run from the page must end within one request: at most this many rows a batch, batches and seconds.
PAGE_MAX_BATCH_SIZE = 10_000
PAGE_MAX_BATCHES = 1_000
PAGE_MAX_SECONDS = 20
# The outcomes that count as a successful run for "last successful run": it deleted what it was asked to
# (all of it, or up to its batch or time limit).
SUCCESSFUL = (GcRun.Outcome.COMPLETED, GcRun.Outcome.PARTIAL)
HISTORY_PAGE_SIZE = 25
CUTOFF_KINDS = {"now": "now", "age": "an age", "date": "a date"}
AGE_UNITS = {"hours": timedelta(hours=1), "days": timedelta(days=1)}


@dataclass(frozen=True)
class GcAccess:
    """What ``user`` may do on the GC page: see it (the preview, the history, the recipes), run GC now."""

    view: bool
    run: bool


def access(user) -> GcAccess:
    if not permissions.can(user, permissions.TASK, "view") or scope_of(user).restricted:
        return GcAccess(False, False)
    run = permissions.can(user, permissions.TASK, "delete") and user.has_perm(RUN_PERMISSION)
    return GcAccess(True, run)


def require_view(user) -> None:
    permissions.require(user, permissions.TASK, "view")
    scope_of(user).require_unrestricted("Garbage collection")


def require_run(user) -> None:
    require_view(user)
    if not access(user).run:
        raise Forbidden("Running garbage collection needs delete on task state and “Can add gc run” (the Admin role).")


def page_cutoff(kind: str | None, *, age: str | None, unit: str | None, before: str | None, now: datetime) -> datetime:
    """The GC page's cutoff: ``now`` (every key past its own expiry), an ``age`` (keys that expired more than
    ``age`` hours or days ago) or a ``date`` (``parse_cutoff``'s rules: ISO 8601 with a time zone, not in the
    future). ``Invalid`` on field cutoff, age or before."""
    kind = kind or "now"
    if kind not in CUTOFF_KINDS:
        raise Invalid({"cutoff": f"Unknown cutoff {kind!r}: choose now, an age or a date."})
    if kind == "now":
        return now
    if kind == "date":
        if not before:
            raise Invalid({"before": "Give a date and time with a time zone, e.g. 2026-11-01T00:00:00Z."})
        return parse_cutoff(before, now)
    try:
        amount = float(age or "")
    except ValueError:
        amount = None
    if amount is None or not math.isfinite(amount) or amount <= 0:
        raise Invalid({"age": "The age must be a number above 0."})
    if unit not in AGE_UNITS:
        raise Invalid({"age": "The age is in hours or days."})
    try:
        return now - AGE_UNITS[unit] * amount
    except OverflowError:
        raise Invalid({"age": "This age reaches before the year 1."}) from None


def history(cursor: str | None, *, scope: Scope, size: int = HISTORY_PAGE_SIZE) -> Page:
    """The recorded runs, newest first, a page after ``cursor``. Unscoped users only (GC spans every DAG)."""
    scope.require_unrestricted("Garbage collection")
    return paginate(GcRun.objects.all(), ["-started_at", "-id"], cursor, size)


@dataclass(frozen=True)
class GcHealth:
    """Is GC keeping up? ``stale``: no successful run, or the last one finished more than
    ``GC_STALE_AFTER_HOURS`` ago; ``backlog_large``: at least ``GC_BACKLOG_WARN_ROWS`` rows have expired (the
    dry run's figure, estimated past its exact cap). Neither applies with a backend GC does not clean."""

    last_success: GcRun | None
    since_seconds: float | None
    stale_after_hours: float
    backlog: DryRunSummary
    backlog_warn_rows: int

    @property
    def backlog_rows_at_least(self) -> int:
        """The expired rows now: exact, the planner's estimate, or past the cap with no estimate the cap + 1."""
        if self.backlog.rows is not None:
            return self.backlog.rows
        return (self.backlog.rows_more_than or 0) + 1

    @property
    def stale(self) -> bool:
        if not self.backlog.backend.is_metastore:
            return False
        return self.since_seconds is None or self.since_seconds > self.stale_after_hours * 3600

    @property
    def backlog_large(self) -> bool:
        return self.backlog.backend.is_metastore and self.backlog_rows_at_least >= self.backlog_warn_rows


def health(now: datetime, *, scope: Scope, backlog: DryRunSummary | None = None) -> GcHealth:
    """``backlog``: a dry run at ``now`` over every DAG, when the caller has one already."""
    backlog = backlog or dry_run(GcPlan(cutoff=now), scope=scope)
    last = GcRun.objects.filter(outcome__in=SUCCESSFUL).order_by("-started_at", "-id").first()
    since = max((now - (last.finished_at or last.started_at)).total_seconds(), 0.0) if last else None
    return GcHealth(last, since, settings.GC_STALE_AFTER_HOURS, backlog, settings.GC_BACKLOG_WARN_ROWS)
