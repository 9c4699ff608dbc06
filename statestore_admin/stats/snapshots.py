"""Statistics snapshots: the exact figures of the state store at one time, in the dashboard database.

``take_snapshot`` (``manage.py state_store_stats``, and the end of every ``state_store_clean``) reads the
Airflow database in one bounded pass and records a ``StatsSnapshot`` with its ``StatsSnapshotDag`` rows;
pages read them back through ``latest_snapshot``, ``snapshot_series`` and ``scoped_totals`` (``reads``), and
show them with their age where exact figures would cost a scan of a large table.

The pass, all aggregated in the database (no value is ever loaded into Python; sizes are
``octet_length``, bytes, which PostgreSQL reads from a value's header without decompressing it):

1. ``task_state_store`` grouped by ``(dag_id, task_id)``, one parallel sequential scan: keys, bytes,
   the largest value's size, expired / expiring within 24 h / never-expiring keys as of ``taken_at``,
   cumulative size-bucket counts and the last update. Ordered by DAG: each DAG's row is folded from its
   tasks and bulk-inserted in chunks, the top tasks kept in bounded heaps.
2. The expiry histogram: keys and bytes by UTC day of ``expires_at`` in ``[taken_at, taken_at + 30 d)``,
   a second scan (folding 31 days into the first one's groups made it slower: docs/benchmarks/stats.md).
3. Runs with state per DAG: ``dag_run`` with an ``EXISTS`` probe of the unique key (dag_run_id, …).
4. The 50 largest values: only the 50 (dag_id, task_id) groups with the largest maxima can hold them,
   so those groups are read again through the lookup index, not the whole table (a plain
   ``ORDER BY … LIMIT 50`` when they hold too many keys, e.g. many equal sizes).
5. ``asset_state_store`` grouped by asset (its primary key order): totals, sizes, top assets.

On PostgreSQL the reads share one ``REPEATABLE READ READ ONLY`` transaction, so the figures are
consistent with each other; every query runs under the GC's long deadline
(``AIRFLOW_DATABASE_GC_QUERY_TIMEOUT``), not a page's. Python holds aggregates only, whatever the number
of keys: step 1's result (one row per task, read through a plain cursor so that PostgreSQL may use
parallel workers, which it never does for a server-side cursor), a chunk of per-DAG rows, the heaps of
50, the runs per DAG (one integer a DAG); step 5 is streamed (one row per asset).

A snapshot row is written ``running`` before the pass starts, then ``done`` with its figures, or
``failed`` with the error (its partial per-DAG rows deleted). Pages read only ``done`` snapshots.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connections, router, transaction
from django.db.models import Count, Exists, Func, IntegerField, Max, OuterRef, Q, Sum
from django.db.models.functions import TruncDay
from django.db.models.lookups import LessThanOrEqual
from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.access.actors import Actor
from statestore_admin.airflow.availability import query_timeout
from statestore_admin.airflow.models import Asset, AssetStateStore, DagRun, TaskStateStore
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.core.errors import Conflict, Invalid
from statestore_admin.core.locks import advisory_lock
from statestore_admin.core.status import EXPIRED, EXPIRING, NEVER, status_filter
from statestore_admin.records.models import StatsSnapshot, StatsSnapshotDag
from statestore_admin.stats.reads import (  # noqa: F401 (the readers, by the name the faces import)
    as_dict,
    for_dag_patterns,
    is_count,
    is_rows,
    kept,
    latest_snapshot,
    latest_snapshot_id,
    scoped_totals,
    snapshot_series,
    visible_figures,
)

HISTOGRAM_DAYS = 30
SIZE_BUCKETS = (64, 256, 1024, 4096, 16384, 65536)  # bytes, "up to"; then larger
TOP = 50
CHUNK = 1000  # per-DAG rows per INSERT, and rows per fetch of a streamed query
RESCAN_MAX_KEYS = 500_000  # largest values: above this many keys in the candidate groups, one plain scan
ABANDONED_AFTER = timedelta(hours=24)  # a "running" snapshot this old was left by a killed process
DEFAULT_KEEP_DAYS = 90


class OctetLength(Func):
    """A value's size in bytes: ``octet_length`` (PostgreSQL reads it from the varlena header, no detoasting);
    on SQLite the length of the text's UTF-8 bytes."""

    function = "OCTET_LENGTH"
    output_field = IntegerField()

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection, template="LENGTH(CAST(%(expressions)s AS BLOB))", **extra)


def _size_columns(size) -> dict:
    """Cumulative counts ``size <= bound`` per bucket bound (one comparison per row each)."""
    return {f"le_{bound}": Count("key", filter=LessThanOrEqual(size, bound)) for bound in SIZE_BUCKETS}


def _buckets(store: str, keys: int, cumulative: dict[int, int]) -> list[dict]:
    rows, below = [], 0
    for bound in SIZE_BUCKETS:
        rows.append({"store": store, "up_to": bound, "keys": cumulative[bound] - below})
        below = cumulative[bound]
    rows.append({"store": store, "up_to": None, "keys": keys - below})
    return rows


class _Top:
    """The ``n`` largest items by a key, in bounded memory; among equals the first seen wins."""

    def __init__(self, n: int | None = None):
        self.n, self.heap, self.seq = n or TOP, [], itertools.count()

    def add(self, rank, item) -> None:
        entry = (rank, -next(self.seq), item)
        if len(self.heap) < self.n:
            heapq.heappush(self.heap, entry)
        elif entry[:2] > self.heap[0][:2]:
            heapq.heapreplace(self.heap, entry)

    def items(self) -> list:
        return [item for _, _, item in sorted(self.heap, key=lambda e: e[:2], reverse=True)]

    def min_rank(self):
        return self.heap[0][0] if self.heap else None


# Taking a snapshot ----------------------------------------------------------------------------------
@dataclass
class _Pass:
    """What the pass accumulates (bounded)."""

    taken_at: datetime
    snapshot: StatsSnapshot
    totals: dict = field(default_factory=lambda: dict.fromkeys(("keys", "bytes", "expired", "expiring", "never"), 0))
    cumulative: dict = field(default_factory=lambda: dict.fromkeys(SIZE_BUCKETS, 0))
    dags: int = 0
    tasks_by_keys: _Top = field(default_factory=_Top)
    tasks_by_bytes: _Top = field(default_factory=_Top)
    largest_groups: _Top = field(default_factory=_Top)


def _task_groups(p: _Pass) -> Iterator[dict]:
    """Step 1: task_state_store by (dag_id, task_id), ordered by DAG. Read through a plain cursor, not
    ``iterator()``'s server-side one, on which PostgreSQL never plans parallel workers (twice the time at
    10M keys): the result is one row per task (about 1 KB each in Python), not per key."""
    size = OctetLength("value")
    t = p.taken_at
    rows = (
        TaskStateStore.objects.order_by()
        .values("dag_id", "task_id")
        .annotate(
            keys=Count("key"),
            bytes=Sum(size),
            max_size=Max(size),
            expired=Count("key", filter=status_filter(EXPIRED, t)),
            expiring=Count("key", filter=status_filter(EXPIRING, t)),
            never=Count("key", filter=status_filter(NEVER, t)),
            last_updated=Max("updated_at"),
            **_size_columns(size),
        )
        .order_by("dag_id", "task_id")
    )
    return iter(rows)


def _runs_per_dag() -> dict[str, int]:
    """Step 3: DAG runs that have task state, per DAG: one index probe a run, in parallel workers (a plain
    cursor, as step 1); one integer a DAG in memory."""
    has_state = Exists(TaskStateStore.objects.filter(dag_run=OuterRef("pk")))
    rows = DagRun.objects.order_by().filter(has_state).values_list("dag_id").annotate(n=Count("pk"))
    return dict(rows)


def _dag_rows(p: _Pass, runs: dict[str, int]) -> Iterator[StatsSnapshotDag]:
    """Fold the streamed task groups into one row per DAG; feed the totals and the heaps on the way."""
    for dag_id, groups in itertools.groupby(_task_groups(p), key=lambda g: g["dag_id"]):
        row = StatsSnapshotDag(snapshot=p.snapshot, dag_id=dag_id, runs=runs.get(dag_id, 0))
        for g in groups:
            for name in ("keys", "bytes", "expired", "expiring", "never"):
                value = g[name] or 0
                setattr(row, name, getattr(row, name) + value)
                p.totals[name] += value
            for bound in SIZE_BUCKETS:
                p.cumulative[bound] += g[f"le_{bound}"]
            if g["last_updated"] and (row.last_updated is None or g["last_updated"] > row.last_updated):
                row.last_updated = g["last_updated"]
            task = {"dag_id": dag_id, "task_id": g["task_id"], "keys": g["keys"], "bytes": g["bytes"] or 0}
            p.tasks_by_keys.add(task["keys"], task)
            p.tasks_by_bytes.add(task["bytes"], task)
            p.largest_groups.add(g["max_size"] or 0, (dag_id, g["task_id"], g["keys"]))
        p.dags += 1
        yield row


def _insert_in_chunks(rows: Iterable[StatsSnapshotDag]) -> None:
    """Each chunk in its own short transaction: the dashboard database is never locked for the whole pass."""
    alias = router.db_for_write(StatsSnapshotDag)
    iterator = iter(rows)
    while chunk := list(itertools.islice(iterator, CHUNK)):
        StatsSnapshotDag.objects.using(alias).bulk_create(chunk)


def _expiry_histogram(taken_at: datetime) -> list[dict]:
    """Step 2: keys and bytes by UTC day of expiry over the next 30 days; every day listed, zeros too."""
    end = taken_at + timedelta(days=HISTOGRAM_DAYS)
    rows = (
        TaskStateStore.objects.order_by()
        .filter(expires_at__gte=taken_at, expires_at__lt=end)
        .annotate(day=TruncDay("expires_at", tzinfo=UTC))
        .values("day")
        .annotate(keys=Count("key"), bytes=Sum(OctetLength("value")))
    )
    found = {row["day"].astimezone(UTC).date(): row for row in rows}
    first, last = taken_at.astimezone(UTC).date(), (end - timedelta(microseconds=1)).astimezone(UTC).date()
    days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    return [
        {
            "day": day.isoformat(),
            "keys": found.get(day, {}).get("keys", 0),
            "bytes": found.get(day, {}).get("bytes") or 0,
        }
        for day in days
    ]


def _largest_task_values(p: _Pass) -> list[dict]:
    """Step 4. The candidate groups are the ``TOP`` with the largest maxima (T the smallest of those): every
    value larger than T is in one of them, and they hold at least ``TOP`` values of size T or more."""
    groups = p.largest_groups.items()
    threshold = p.largest_groups.min_rank()
    rows = TaskStateStore.objects.order_by()
    if groups and sum(keys for _, _, keys in groups) <= RESCAN_MAX_KEYS:
        condition = Q(pk__in=[])
        for dag_id, task_id, _ in groups:
            condition |= Q(dag_id=dag_id, task_id=task_id)
        rows = rows.filter(condition).annotate(size=OctetLength("value")).filter(size__gte=threshold)
    else:
        rows = rows.annotate(size=OctetLength("value"))
    rows = rows.order_by("-size", "pk").values("pk", "dag_id", "run_id", "task_id", "map_index", "key", "size")[:TOP]
    return [
        {
            "store": "task",
            "key": r["key"],
            "size": r["size"],
            "key_id": r["pk"],
            "dag_id": r["dag_id"],
            "run_id": r["run_id"],
            "task_id": r["task_id"],
            "map_index": r["map_index"],
            "asset_id": None,
            "asset_name": None,
            "asset_uri": None,
        }
        for r in rows
    ]


def _asset_pass(p: _Pass) -> tuple[dict, list[dict], list[dict], list[dict]]:
    """Step 5: asset_state_store by asset (primary-key order), streamed; its largest values; names of the top."""
    size = OctetLength("value")
    rows = (
        AssetStateStore.objects.order_by()
        .values("asset_id")
        .annotate(keys=Count("key"), bytes=Sum(size), max_size=Max(size), **_size_columns(size))
        .order_by("asset_id")
    )
    totals = {"keys": 0, "bytes": 0, "assets": 0}
    cumulative = dict.fromkeys(SIZE_BUCKETS, 0)
    by_keys, by_bytes, largest_groups = _Top(), _Top(), _Top()
    for g in rows.iterator(chunk_size=CHUNK):
        item = {"asset_id": g["asset_id"], "keys": g["keys"], "bytes": g["bytes"] or 0}
        totals["keys"] += item["keys"]
        totals["bytes"] += item["bytes"]
        totals["assets"] += 1
        for bound in SIZE_BUCKETS:
            cumulative[bound] += g[f"le_{bound}"]
        by_keys.add(item["keys"], item)
        by_bytes.add(item["bytes"], item)
        largest_groups.add(g["max_size"] or 0, g["asset_id"])
    largest = []
    if largest_groups.heap:
        largest = list(
            AssetStateStore.objects.order_by()
            .filter(asset_id__in=largest_groups.items())
            .annotate(size=OctetLength("value"))
            .filter(size__gte=largest_groups.min_rank())
            .order_by("-size", "asset_id", "key")
            .values("asset_id", "key", "size")[:TOP]
        )
    top = _union(by_keys.items(), by_bytes.items(), ("asset_id",))
    names = {
        a["id"]: a
        for a in Asset.objects.filter(pk__in={r["asset_id"] for r in [*top, *largest]}).values("id", "name", "uri")
    }
    top_assets = [
        {
            "asset_id": r["asset_id"],
            "name": names.get(r["asset_id"], {}).get("name"),
            "uri": names.get(r["asset_id"], {}).get("uri"),
            "keys": r["keys"],
            "bytes": r["bytes"],
        }
        for r in top
    ]
    largest_values = [
        {
            "store": "asset",
            "key": r["key"],
            "size": r["size"],
            "key_id": None,
            "dag_id": None,
            "run_id": None,
            "task_id": None,
            "map_index": None,
            "asset_id": r["asset_id"],
            "asset_name": names.get(r["asset_id"], {}).get("name"),
            "asset_uri": names.get(r["asset_id"], {}).get("uri"),
        }
        for r in largest
    ]
    return totals, _buckets("asset", totals["keys"], cumulative), top_assets, largest_values


def _union(by_keys: list[dict], by_bytes: list[dict], identity: tuple[str, ...]) -> list[dict]:
    """The first ``TOP`` by keys and the first ``TOP`` by bytes, once each, by keys then bytes (descending):
    sorting this list by either figure and keeping ``TOP`` gives that ranking."""
    seen, rows = set(), []
    for row in [*by_keys, *by_bytes]:
        ident = tuple(row[name] for name in identity)
        if ident not in seen:
            seen.add(ident)
            rows.append(row)
    return sorted(rows, key=lambda r: (-r["keys"], -r["bytes"], *(r[name] for name in identity)))


@contextmanager
def _consistent_reads() -> Iterator[None]:
    """On PostgreSQL, one REPEATABLE READ READ ONLY transaction for every read of the pass (when not already
    inside a transaction, where it could no longer be set); on SQLite, plain reads."""
    connection = connections[airflow_alias()]
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        yield
        return
    with transaction.atomic(using=connection.alias):
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def _abandon_stale_runs(now: datetime) -> None:
    StatsSnapshot.objects.filter(status=StatsSnapshot.Status.RUNNING, taken_at__lt=now - ABANDONED_AFTER).update(
        status=StatsSnapshot.Status.FAILED,
        finished_at=now,
        error="Abandoned: the process taking it ended without recording an outcome.",
    )


# The lock one snapshot holds while it is taken (locks.advisory_lock): GC's key, with "st" for "stats".
SNAPSHOT_LOCK_KEY = int.from_bytes(b"ssadm-st", "big")


class SnapshotInProgress(Conflict):
    """Another process (a command, a page, the end of a GC run, on any server) is taking a snapshot."""


def take_snapshot(*, actor: Actor, trigger: str = "command") -> StatsSnapshot:
    """Record the state store's exact figures as of now (``taken_at``), taken by ``actor`` (its name on the row);
    return the ``done`` snapshot.

    One at a time across the deployment: ``SnapshotInProgress`` at once, recording nothing, while another is
    being taken (two passes would only double the load on Airflow's database for the same figures). The row
    is committed ``running`` first; a failure (a database error, an interruption) marks it ``failed`` with
    the error, deletes its partial per-DAG rows, and is re-raised.
    """
    with advisory_lock(connections[airflow_alias()], SNAPSHOT_LOCK_KEY, _in_progress):
        return _take_snapshot(trigger, actor)


def _in_progress(holder: str) -> SnapshotInProgress:
    if holder:
        message = _("Another statistics snapshot is being taken %(holder)s; not starting a second one.")
        return SnapshotInProgress(message % {"holder": holder.strip()})
    return SnapshotInProgress(_("Another statistics snapshot is being taken; not starting a second one."))


def _take_snapshot(trigger: str, actor: Actor) -> StatsSnapshot:
    taken_at = timezone.now()
    _abandon_stale_runs(taken_at)
    snapshot = StatsSnapshot.objects.create(
        taken_at=taken_at, trigger=trigger, actor=actor.name[:255], status=StatsSnapshot.Status.RUNNING
    )
    p = _Pass(taken_at=taken_at, snapshot=snapshot)
    try:
        with query_timeout(settings.AIRFLOW_DATABASE_GC_QUERY_TIMEOUT), _consistent_reads():
            runs = _runs_per_dag()
            _insert_in_chunks(_dag_rows(p, runs))
            del runs
            histogram = _expiry_histogram(taken_at)
            largest_tasks = _largest_task_values(p)
            assets, asset_sizes, top_assets, largest_assets = _asset_pass(p)
    except BaseException as exc:
        _fail(snapshot, exc)
        raise
    largest = sorted([*largest_tasks, *largest_assets], key=lambda r: -r["size"])[:TOP]
    snapshot.task_keys = p.totals["keys"]
    snapshot.task_bytes = p.totals["bytes"]
    snapshot.expired = p.totals["expired"]
    snapshot.expiring = p.totals["expiring"]
    snapshot.never = p.totals["never"]
    snapshot.live = p.totals["keys"] - p.totals["expired"]
    snapshot.dags = p.dags
    snapshot.asset_keys = assets["keys"]
    snapshot.asset_bytes = assets["bytes"]
    snapshot.assets = assets["assets"]
    snapshot.expiry_histogram = histogram
    snapshot.size_histogram = _buckets("task", p.totals["keys"], p.cumulative) + asset_sizes
    snapshot.largest = largest
    snapshot.top_tasks = _union(p.tasks_by_keys.items(), p.tasks_by_bytes.items(), ("dag_id", "task_id"))
    snapshot.top_assets = top_assets
    snapshot.status = StatsSnapshot.Status.DONE
    snapshot.finished_at = timezone.now()
    try:
        snapshot.save()
    except BaseException as exc:
        _fail(snapshot, exc)
        raise
    return snapshot


def _fail(snapshot: StatsSnapshot, exc: BaseException) -> None:
    """Mark the snapshot failed and drop its partial per-DAG rows (best effort: the dashboard database
    itself may be what failed)."""
    if isinstance(exc, KeyboardInterrupt):
        message = "Interrupted."
    else:
        message = f"{type(exc).__name__}: {exc}".strip()
    try:
        StatsSnapshotDag.objects.filter(snapshot=snapshot).delete()
        StatsSnapshot.objects.filter(pk=snapshot.pk).update(
            status=StatsSnapshot.Status.FAILED, finished_at=timezone.now(), error=message[:2000]
        )
    except DatabaseError:
        pass
    snapshot.status, snapshot.error = StatsSnapshot.Status.FAILED, message


# Retention -----------------------------------------------------------------------------------------------
def prune_snapshots(keep_days: int = DEFAULT_KEEP_DAYS, *, now: datetime | None = None, batch_size: int = 100) -> int:
    """Delete the snapshots taken more than ``keep_days`` days ago (with their per-DAG rows), ``batch_size``
    snapshots a transaction; return how many. ``Invalid`` for fewer than 1 day."""
    if not isinstance(keep_days, int) or isinstance(keep_days, bool) or keep_days < 1:
        raise Invalid({"keep_days": _("Keep at least one day of snapshots: 1 or more.")})
    try:
        cutoff = (now or timezone.now()) - timedelta(days=keep_days)
    except OverflowError:
        raise Invalid({"keep_days": _("Too many days.")}) from None
    alias = router.db_for_write(StatsSnapshot)
    deleted = 0
    while ids := list(
        StatsSnapshot.objects.filter(taken_at__lt=cutoff).order_by("taken_at").values_list("pk", flat=True)[:batch_size]
    ):
        with transaction.atomic(using=alias):
            StatsSnapshotDag.objects.filter(snapshot__in=ids).delete()
            deleted += StatsSnapshot.objects.filter(pk__in=ids).delete()[1].get(StatsSnapshot._meta.label, 0)
    return deleted
