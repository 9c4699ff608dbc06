"""Reading statistics snapshots back (pages, API, metrics): the newest one, figures over time, a scope's
totals, kept in the cache (``kept``: a done snapshot never changes), and a snapshot as the commands print it.
``snapshots`` takes them and names these too, for the faces.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.core.cache import cache
from django.db.models import Sum

from statestore_admin.access.permissions import ASSET, TASK
from statestore_admin.access.scopes import Scope
from statestore_admin.core import formatting
from statestore_admin.records.models import StatsSnapshot, StatsSnapshotDag


def latest_snapshot() -> StatsSnapshot | None:
    """The newest ``done`` snapshot, or None."""
    return StatsSnapshot.objects.filter(status=StatsSnapshot.Status.DONE).order_by("-taken_at").first()


def latest_snapshot_id() -> tuple[int, datetime] | None:
    """The newest ``done`` snapshot's id and time, without its figures (lists and histograms), or None."""
    done = StatsSnapshot.objects.filter(status=StatsSnapshot.Status.DONE)
    return done.order_by("-taken_at").values_list("pk", "taken_at").first()


@dataclass(frozen=True)
class SnapshotSeries:
    """``points``: per done snapshot since the start, oldest first, ``{"taken_at", "task_keys", "task_bytes",
    "asset_keys", "asset_bytes"}``; ``dags``: for each dag_id asked, ``[{"taken_at", "keys", "bytes"}]``
    (empty when the DAG had no state then)."""

    points: list[dict]
    dags: dict[str, list[dict]]


def snapshot_series(since: datetime, dag_ids: Iterable[str] | None = None) -> SnapshotSeries:
    """Keys and bytes over time from the done snapshots taken at or after ``since`` (two queries)."""
    done = StatsSnapshot.objects.filter(status=StatsSnapshot.Status.DONE, taken_at__gte=since)
    points = list(done.order_by("taken_at").values("taken_at", "task_keys", "task_bytes", "asset_keys", "asset_bytes"))
    dags: dict[str, list[dict]] = {dag_id: [] for dag_id in dag_ids or ()}
    if dags:
        rows = (
            StatsSnapshotDag.objects.filter(
                dag_id__in=list(dags), snapshot__status=StatsSnapshot.Status.DONE, snapshot__taken_at__gte=since
            )
            .order_by("dag_id", "snapshot__taken_at")
            .values_list("dag_id", "snapshot__taken_at", "keys", "bytes")
        )
        for dag_id, taken_at, keys, size in rows:
            dags[dag_id].append({"taken_at": taken_at, "keys": keys, "bytes": size})
    return SnapshotSeries(points, dags)


@dataclass(frozen=True)
class ScopedTotals:
    keys: int
    bytes: int
    expired: int
    expiring: int
    never: int

    @property
    def live(self) -> int:
        return self.keys - self.expired


SCOPED_CACHE_SECONDS = 24 * 3600  # done snapshots never change: a scope's sums of them are kept this long


def is_count(value) -> bool:
    """Whether a value read back from the cache is a count (JSON has no other integer; a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_rows(value, *columns) -> bool:
    """Whether a value read back from the cache is a list of rows (lists), each column passing its check."""
    return isinstance(value, list) and all(
        isinstance(row, list) and len(row) == len(columns) and all(map(lambda ok, v: ok(v), columns, row))
        for row in value
    )


def kept(what: str, key: tuple, compute, valid):
    """``compute()``: something read from done snapshots only, ``key`` naming them (their ids or times) and
    whatever else it depends on, kept in the cache (``CACHE_URL``) under ``what`` and ``key``. A done
    snapshot is never changed, so what is kept stays exact: a figure summed from thousands of per-DAG rows
    is summed once per snapshot, not at every view (that sum costs more with every DAG; reading one cached
    value does not). What ``compute`` answers is kept as JSON (statestore_admin/cache.py): numbers, text,
    lists and dicts with text keys, read back with lists for tuples. ``valid(value)`` says whether what the
    cache holds has the shape ``compute`` answers: anything else there (written by another release, say) is
    computed afresh rather than turned into a 500."""
    digest = hashlib.sha256(repr((what, key)).encode()).hexdigest()
    cache_key = f"statestore:snapshot:{digest}"
    value = cache.get(cache_key)
    if value is None or not valid(value):
        value = compute()
        cache.set(cache_key, value, SCOPED_CACHE_SECONDS)
    return value


def for_dag_patterns(what: str, snapshots: tuple, scope: Scope, compute, valid):
    """``kept`` for the DAG patterns of ``scope``: a scoped user's sums of the snapshots ``snapshots``."""
    return kept(what, (snapshots, tuple(sorted(scope.dags or ()))), compute, valid)


def scoped_totals(snapshot: StatsSnapshot, scope: Scope) -> ScopedTotals:
    """The snapshot's task-state figures counting only the DAGs ``scope`` allows, summed from its per-DAG rows
    matched against the patterns in the dashboard's database (no query of Airflow's; kept per snapshot and
    patterns by ``for_dag_patterns``); for a user whose scope covers every DAG, the snapshot's totals."""
    if scope.all_dags:
        return ScopedTotals(
            snapshot.task_keys, snapshot.task_bytes, snapshot.expired, snapshot.expiring, snapshot.never
        )
    names = ("keys", "bytes", "expired", "expiring", "never")

    def compute():
        sums = StatsSnapshotDag.objects.filter(scope.dag_q("dag_id"), snapshot=snapshot).aggregate(
            **{name: Sum(name) for name in names}
        )
        return {name: sums[name] or 0 for name in names}  # kept as JSON (statestore_admin/cache.py)

    def valid(value) -> bool:
        return isinstance(value, dict) and sorted(value) == sorted(names) and all(map(is_count, value.values()))

    return ScopedTotals(**for_dag_patterns("totals", (snapshot.pk,), scope, compute, valid))


TASK_FIGURES = ("task_keys", "task_bytes", "expired", "expiring", "never", "live", "dags")
ASSET_FIGURES = ("asset_keys", "asset_bytes", "assets")


def visible_figures(snapshot: StatsSnapshot, *, scope: Scope, stores) -> dict[str, int | None]:
    """The snapshot's figures that a holder of ``scope`` who may view ``stores`` sees, None where hidden: the
    whole store's columns where the scope covers every DAG (or asset); a scoped user's task figures summed over
    their DAGs' rows, without the DAG count (today's DAGs with state would not be the snapshot's); asset
    figures only for a scope covering every asset (a snapshot does not split them by asset pattern). The
    overview and Insights both show these."""
    figures = dict.fromkeys(TASK_FIGURES + ASSET_FIGURES)
    if TASK in stores:
        if scope.all_dags:
            figures.update({name: getattr(snapshot, name) for name in TASK_FIGURES})
        else:
            totals = scoped_totals(snapshot, scope)
            figures.update(task_keys=totals.keys, task_bytes=totals.bytes)
            figures.update({name: getattr(totals, name) for name in ("expired", "expiring", "never", "live")})
    if ASSET in stores and scope.all_assets:
        figures.update({name: getattr(snapshot, name) for name in ASSET_FIGURES})
    return figures


def as_dict(snapshot: StatsSnapshot) -> dict:
    """A snapshot as ``state_store_stats --json`` prints it."""

    iso = formatting.iso

    return {
        "id": snapshot.pk,
        "status": snapshot.status,
        "error": snapshot.error,
        "trigger": snapshot.trigger,
        "taken_at": iso(snapshot.taken_at),
        "finished_at": iso(snapshot.finished_at),
        "duration_seconds": round(snapshot.duration_seconds, 3) if snapshot.finished_at else None,
        **{
            name: getattr(snapshot, name)
            for name in (
                "task_keys",
                "task_bytes",
                "expired",
                "expiring",
                "never",
                "live",
                "dags",
                "asset_keys",
                "asset_bytes",
                "assets",
                "expiry_histogram",
                "size_histogram",
                "largest",
                "top_tasks",
                "top_assets",
            )
        },
    }
