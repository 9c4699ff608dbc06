"""What the Insights page, its JSON API and ``/metrics`` show: reads of the statistics snapshots
(``StatsSnapshot``, ``StatsSnapshotDag``, taken by ``state_store_stats``) and of the GC runs (``GcRun``).

Nothing here reads Airflow's database: every figure is as of a snapshot, shown with its time (a scoped
user's per-DAG rows are matched against their patterns, as ``stats.scoped_totals`` does).

Who sees what (the same rules as the overview):

- a store's figures need ``view`` on it (``stores``: ``policies.viewable_stores(user)``);
- a scoped user's task figures are sums of their DAGs' ``StatsSnapshotDag`` rows; figures of the whole store
  that cannot be split by DAG or asset (the expiry and size histograms, the asset totals for an asset scope)
  are not shown to them, and the snapshot's top lists are filtered to what their scope allows;
- GC runs span every DAG: only unscoped viewers of task state see them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Q, Sum
from django.utils.translation import gettext as _

from statestore_admin.access.permissions import ASSET, TASK
from statestore_admin.access.policies import store_wide
from statestore_admin.access.scopes import Scope
from statestore_admin.core import status
from statestore_admin.core.errors import Invalid
from statestore_admin.records.models import GcRun, StatsSnapshot, StatsSnapshotDag
from statestore_admin.stats import snapshots as stats

DAYS = (7, 30, 90)
DEFAULT_DAYS = 30
MAX_POINTS = 120  # points of a line chart; above, the last snapshot of each period is kept
TOP_DAG_SERIES = 5  # DAGs drawn over time
TOP = 10  # rows of each top list
MAX_GC_RUNS = 200


def parse_days(value) -> int:
    """``days`` from a query string: one of ``DAYS``, empty for the default; ``Invalid`` (code ``enum``)
    otherwise."""
    if value in (None, ""):
        return DEFAULT_DAYS
    choices = tuple(str(d) for d in DAYS)
    if str(value) not in choices:
        message = _("Unknown days %(typed)s: use one of %(choices)s.") % {
            "typed": repr(str(value)),
            "choices": ", ".join(choices),
        }
        # Invalid %-formats its message with its params: a % typed stays one.
        raise Invalid({"days": [Invalid(message.replace("%", "%%"), code="enum", params={"choices": choices})]})
    return int(value)


@dataclass(frozen=True)
class Access:
    """What a user may see here. ``task``/``asset``: view on the store (their DAGs' and assets' figures);
    ``task_wide``/``asset_wide``: the whole store's figures (view, and no scope on that kind);
    ``gc``: the GC runs (view on task state, no scope at all)."""

    task: bool
    asset: bool
    task_wide: bool
    asset_wide: bool
    gc: bool

    @property
    def anything(self) -> bool:
        return self.task or self.asset


def access(*, scope: Scope, stores: tuple[str, ...]) -> Access:
    task, asset = TASK in stores, ASSET in stores
    return Access(
        task=task,
        asset=asset,
        task_wide=task and scope.all_dags,
        asset_wide=asset and scope.all_assets,
        gc=store_wide(scope, stores),
    )


def _dag_filter(scope: Scope, acc: Access) -> Q | None:
    """The per-DAG snapshot rows to sum for this user (None: the whole store's columns)."""
    return None if acc.task_wide else scope.dag_q("dag_id")


# Latest snapshot --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Latest:
    """The latest finished snapshot's figures that the user may see (None: hidden)."""

    snapshot: StatsSnapshot
    task_keys: int | None
    task_bytes: int | None
    expired: int | None
    expiring: int | None
    never: int | None
    live: int | None
    dags: int | None
    asset_keys: int | None
    asset_bytes: int | None
    assets: int | None

    @property
    def taken_at(self) -> datetime:
        return self.snapshot.taken_at

    def age_seconds(self, now: datetime) -> float:
        return max(0.0, (now - self.snapshot.taken_at).total_seconds())


def latest(*, scope: Scope, stores: tuple[str, ...]) -> Latest | None:
    """The latest finished snapshot, as this user may see it; None if there is none."""
    snapshot = stats.latest_snapshot()
    if snapshot is None:
        return None
    return Latest(snapshot=snapshot, **stats.visible_figures(snapshot, scope=scope, stores=stores))


# Over time --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """One snapshot in a series: the store totals the user may see (None: hidden)."""

    taken_at: datetime
    task_keys: int | None
    task_bytes: int | None
    asset_keys: int | None
    asset_bytes: int | None


@dataclass(frozen=True)
class DagSeries:
    dag_id: str
    keys: list[int]  # one per point of the series (0: no state in that snapshot)
    bytes: list[int]


@dataclass(frozen=True)
class Series:
    days: int
    since: datetime
    points: list[Point] = field(default_factory=list)
    dags: list[DagSeries] = field(default_factory=list)  # the top DAGs of the latest snapshot (by keys)


def _thin(points: list[dict], since: datetime, now: datetime) -> list[dict]:
    """At most ``MAX_POINTS``: the last snapshot of each of ``MAX_POINTS`` equal periods."""
    if len(points) <= MAX_POINTS:
        return points
    width = (now - since) / MAX_POINTS
    kept: dict[int, dict] = {}
    for point in points:  # oldest first: the last one of a period wins
        kept[int((point["taken_at"] - since) / width)] = point
    return list(kept.values())


def _is_time(text) -> bool:
    try:
        datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return False
    return True


def _is_series(value) -> bool:
    return stats.is_rows(value, _is_time, stats.is_count, stats.is_count)


def _is_top_dags(value) -> bool:
    return isinstance(value, list) and all(
        isinstance(row, dict)
        and sorted(row) == ["bytes", "dag_id", "keys"]
        and isinstance(row["dag_id"], str)
        and stats.is_count(row["keys"])
        and stats.is_count(row["bytes"])
        for row in value
    )


def _scoped_sums(points: list[dict], scope: Scope) -> dict[datetime, tuple[int, int]]:
    """Keys and bytes of the DAGs ``scope`` allows at each done snapshot of ``points`` (one grouped query of
    the per-DAG rows, kept per set of snapshots and patterns: ``stats.for_dag_patterns``)."""
    times = [p["taken_at"] for p in points]

    def compute():
        rows = (
            StatsSnapshotDag.objects.filter(
                scope.dag_q("dag_id"), snapshot__status=StatsSnapshot.Status.DONE, snapshot__taken_at__in=times
            )
            .values("snapshot__taken_at")
            .annotate(keys=Sum("keys"), bytes=Sum("bytes"))
            .order_by()
        )
        # kept as JSON (statestore_admin/cache.py): the times as ISO 8601 text
        return [[row["snapshot__taken_at"].isoformat(), row["keys"] or 0, row["bytes"] or 0] for row in rows]

    sums = stats.for_dag_patterns("series", tuple(times), scope, compute, _is_series)
    return {datetime.fromisoformat(taken_at): (keys, size) for taken_at, keys, size in sums}


def _top_dags(snapshot: StatsSnapshot, scope: Scope, acc: Access, order: str, limit: int) -> list[dict]:
    """The snapshot's top DAGs by ``order`` (``keys`` or ``bytes``) among those the user may see:
    ``{"dag_id", "keys", "bytes"}``, kept per snapshot and patterns for a scoped user."""

    def compute():
        rows = StatsSnapshotDag.objects.filter(snapshot=snapshot)
        dags = _dag_filter(scope, acc)
        if dags is not None:
            rows = rows.filter(dags)
        return list(rows.values("dag_id", "keys", "bytes").order_by(f"-{order}", "dag_id")[:limit])

    if acc.task_wide:
        return compute()
    return stats.for_dag_patterns(f"top-dags-{order}-{limit}", (snapshot.pk,), scope, compute, _is_top_dags)


def series(days: int, now: datetime, *, scope: Scope, stores: tuple[str, ...]) -> Series:
    """Keys and bytes per store at each done snapshot of the last ``days`` days (oldest first, at most
    ``MAX_POINTS``), and the same for the top ``TOP_DAG_SERIES`` DAGs (in the user's scope) of the latest
    snapshot."""
    since = now - timedelta(days=days)
    acc = access(scope=scope, stores=stores)
    if not acc.anything:
        return Series(days, since)
    top_names = []
    if acc.task:
        newest = stats.latest_snapshot()
        top = _top_dags(newest, scope, acc, "keys", TOP_DAG_SERIES) if newest is not None else []
        top_names = [row["dag_id"] for row in top]
    found = stats.snapshot_series(since=since, dag_ids=top_names)
    raw = _thin(found.points, since, now)
    if not raw:
        return Series(days, since)
    scoped = _scoped_sums(raw, scope) if acc.task and not acc.task_wide else {}
    points = []
    for p in raw:
        if acc.task_wide:
            task = (p["task_keys"], p["task_bytes"])
        elif acc.task:
            task = scoped.get(p["taken_at"], (0, 0))
        else:
            task = (None, None)
        asset = (p["asset_keys"], p["asset_bytes"]) if acc.asset_wide else (None, None)
        points.append(Point(p["taken_at"], *task, *asset))
    top_dags = []
    for name in top_names:
        by_time = {row["taken_at"]: (row["keys"], row["bytes"]) for row in found.dags.get(name, [])}
        figures = [by_time.get(p.taken_at, (0, 0)) for p in points]
        top_dags.append(DagSeries(name, [k for k, _ in figures], [b for _, b in figures]))
    return Series(days, since, points, top_dags)


# The latest snapshot's distributions ------------------------------------------------------------
@dataclass(frozen=True)
class ExpiryDay:
    day: str  # YYYY-MM-DD (UTC)
    keys: int
    bytes: int


@dataclass(frozen=True)
class Expiry:
    """``days``: what GC will delete on each of the next 30 days (the whole store: None for a DAG scope);
    ``by_status``: the user's task keys by expiry status (expired, expiring in 24 h, never, later)."""

    taken_at: datetime
    days: list[ExpiryDay] | None
    by_status: dict[str, int]


_LATEST = object()  # "not given": the functions below read the latest snapshot themselves


def expiry(*, scope: Scope, stores: tuple[str, ...], figures: Latest | None = _LATEST) -> Expiry | None:
    """None without a snapshot or without view on task state. ``figures``: ``latest()``'s, if already read."""
    figures = latest(scope=scope, stores=stores) if figures is _LATEST else figures
    if figures is None or figures.task_keys is None:
        return None
    acc = access(scope=scope, stores=stores)
    days = None
    if acc.task_wide:
        days = [ExpiryDay(str(d["day"]), int(d["keys"]), int(d["bytes"])) for d in figures.snapshot.expiry_histogram]
    later = max(0, (figures.live or 0) - (figures.expiring or 0) - (figures.never or 0))
    by_status = {
        status.EXPIRED: figures.expired or 0,
        status.EXPIRING: figures.expiring or 0,
        "later": later,
        status.NEVER: figures.never or 0,
    }
    return Expiry(figures.taken_at, days, by_status)


@dataclass(frozen=True)
class SizeBucket:
    store: str
    up_to: int | None  # bytes; None: larger than the previous bucket
    keys: int


def sizes(*, scope: Scope, stores: tuple[str, ...], figures: Latest | None = _LATEST) -> list[SizeBucket]:
    """The latest snapshot's value size distribution of the stores whose whole figures the user may see."""
    figures = latest(scope=scope, stores=stores) if figures is _LATEST else figures
    if figures is None:
        return []
    acc = access(scope=scope, stores=stores)
    shown = {"task": acc.task_wide, "asset": acc.asset_wide}
    return [
        SizeBucket(b["store"], b["up_to"], int(b["keys"]))
        for b in figures.snapshot.size_histogram
        if shown.get(b["store"])
    ]


@dataclass(frozen=True)
class Top:
    """The latest snapshot's largest consumers the user may see, each list ``TOP`` long at most (empty when
    hidden). ``dags_*``: ``{"dag_id", "keys", "bytes"}``; ``tasks_*``: ``{"dag_id", "task_id", "keys",
    "bytes"}``; ``assets_*``: ``{"asset_id", "name", "uri", "keys", "bytes"}``; ``largest``: the snapshot's
    largest values (key names and sizes, never a value) of the stores the user may view."""

    taken_at: datetime
    dags_by_keys: list[dict]
    dags_by_bytes: list[dict]
    tasks_by_keys: list[dict]
    tasks_by_bytes: list[dict]
    assets_by_keys: list[dict]
    assets_by_bytes: list[dict]
    largest: list[dict]


def _first(rows: list[dict], by: str, name, limit: int) -> list[dict]:
    return sorted(rows, key=lambda r: (-int(r[by]), *name(r)))[:limit]


def top(*, scope: Scope, stores: tuple[str, ...], limit: int = TOP, figures: Latest | None = _LATEST) -> Top | None:
    figures = latest(scope=scope, stores=stores) if figures is _LATEST else figures
    if figures is None:
        return None
    snapshot = figures.snapshot
    acc = access(scope=scope, stores=stores)
    dags_by_keys, dags_by_bytes, tasks, assets = [], [], [], []
    if acc.task:
        dags_by_keys = _top_dags(snapshot, scope, acc, "keys", limit)
        dags_by_bytes = _top_dags(snapshot, scope, acc, "bytes", limit)
        tasks = [
            {"dag_id": t["dag_id"], "task_id": t["task_id"], "keys": t["keys"], "bytes": t["bytes"]}
            for t in snapshot.top_tasks
            if scope.allows_dag(t["dag_id"])
        ]
    if acc.asset:
        assets = [
            {"asset_id": a["asset_id"], "name": a["name"], "uri": a["uri"], "keys": a["keys"], "bytes": a["bytes"]}
            for a in snapshot.top_assets
            if scope.allows_asset(a["name"], a["uri"])
        ]
    largest = [
        value
        for value in snapshot.largest
        if (value["store"] == TASK and acc.task and scope.allows_dag(value.get("dag_id")))
        or (
            value["store"] == ASSET
            and acc.asset
            and scope.allows_asset(value.get("asset_name"), value.get("asset_uri"))
        )
    ][:limit]

    def task_name(r):
        return (r["dag_id"], r["task_id"])

    def asset_name(r):
        return (r["name"] or "", r["uri"] or "")

    return Top(
        taken_at=snapshot.taken_at,
        dags_by_keys=dags_by_keys,
        dags_by_bytes=dags_by_bytes,
        tasks_by_keys=_first(tasks, "keys", task_name, limit),
        tasks_by_bytes=_first(tasks, "bytes", task_name, limit),
        assets_by_keys=_first(assets, "keys", asset_name, limit),
        assets_by_bytes=_first(assets, "bytes", asset_name, limit),
        largest=largest,
    )


# GC history -------------------------------------------------------------------------------------
def gc_history(days: int, now: datetime, *, scope: Scope, stores: tuple[str, ...]) -> list[GcRun] | None:
    """The GC runs started in the last ``days`` days, oldest first (at most ``MAX_GC_RUNS``, the latest);
    None for a user who may not see them."""
    if not access(scope=scope, stores=stores).gc:
        return None
    runs = list(GcRun.objects.filter(started_at__gte=now - timedelta(days=days)).order_by("-started_at")[:MAX_GC_RUNS])
    return runs[::-1]


def last_gc_run() -> GcRun | None:
    """The latest finished GC run (for ``/metrics``, whose reader is unscoped)."""
    return GcRun.objects.exclude(outcome=GcRun.Outcome.RUNNING).order_by("-started_at").first()


# Everything the page shows ----------------------------------------------------------------------
@dataclass(frozen=True)
class Insights:
    access: Access
    days: int
    latest: Latest | None
    series: Series
    expiry: Expiry | None
    sizes: list[SizeBucket]
    top: Top | None
    gc_runs: list[GcRun] | None


def insights(days: int, now: datetime, *, scope: Scope, stores: tuple[str, ...]) -> Insights:
    acc = access(scope=scope, stores=stores)
    figures = latest(scope=scope, stores=stores)
    if figures is None:
        return Insights(
            acc,
            days,
            None,
            Series(days, now - timedelta(days=days)),
            None,
            [],
            None,
            gc_history(days, now, scope=scope, stores=stores),
        )
    return Insights(
        access=acc,
        days=days,
        latest=figures,
        series=series(days, now, scope=scope, stores=stores),
        expiry=expiry(scope=scope, stores=stores, figures=figures),
        sizes=sizes(scope=scope, stores=stores, figures=figures),
        top=top(scope=scope, stores=stores, figures=figures),
        gc_runs=gc_history(days, now, scope=scope, stores=stores),
    )
