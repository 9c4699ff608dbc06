"""Store-wide figures: the overview (totals by status, estimated above a size, or the latest statistics
snapshot's exact figures with its age), the snapshot figures a user may see, and the largest values."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.core.cache import cache
from django.db import connections
from django.db.models import Q
from django.db.models.functions import Length

from statestore_admin.access.permissions import ASSET, TASK
from statestore_admin.access.policies import store_wide
from statestore_admin.access.reach import DAG_IDS_CACHE_SECONDS, scoped_asset_keys, scoped_task_keys
from statestore_admin.access.scopes import Scope
from statestore_admin.airflow.config import ConfigValue, airflow_config
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore, worker_ref_of
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.versions import AirflowSchema, schema_of
from statestore_admin.core import formatting
from statestore_admin.core.counting import CAPPED, COUNT_CAP, EXACT, SNAPSHOT, Figure, capped_count, estimate, row_count
from statestore_admin.core.status import EXPIRED, EXPIRING, NEVER, status_filter
from statestore_admin.objects import sizes
from statestore_admin.objects import store as objects
from statestore_admin.objects.backends import BackendMode, backend_modes
from statestore_admin.objects.sizes import StoredSize
from statestore_admin.records.models import GcRun
from statestore_admin.stats import snapshots as stats

HIDDEN = Figure(None)


@dataclass(frozen=True)
class StoreTotals:
    """Each store's number of keys; None for a store the user may not view (its count is hidden too)."""

    task: Figure = HIDDEN
    asset: Figure = HIDDEN

    @property
    def task_keys(self) -> int | None:
        return self.task.value

    @property
    def asset_keys(self) -> int | None:
        return self.asset.value

    @property
    def task_keys_estimated(self) -> bool | None:
        return self.task.estimated

    @property
    def asset_keys_estimated(self) -> bool | None:
        return self.asset.estimated


def store_totals(scope: Scope, stores: tuple[str, ...] = (TASK, ASSET)) -> StoreTotals:
    """The sizes of ``stores`` (the others None, not counted), live: estimated above ``ESTIMATE_ABOVE``
    rows; for a scoped user, counts of their DAGs' and assets' keys, capped at ``COUNT_CAP`` on a large
    table (the overview shows the snapshot's exact sums there)."""
    return StoreTotals(
        **{
            store: _live_total(store, scope, row_count(model)) if store in stores else HIDDEN
            for store, model in (("task", TaskStateStore), ("asset", AssetStateStore))
        }
    )


def _live_total(store: str, scope: Scope, size: Figure) -> Figure:
    whole = scope.all_dags if store == TASK else scope.all_assets
    if whole:
        return size
    if store == TASK:
        rows = scoped_task_keys(scope)  # dag_id IN (…): a range of the lookup index, bounded by the cap
        return Figure(rows.count()) if size.how == EXACT else capped_count(rows, COUNT_CAP)
    if size.how == EXACT:
        return Figure(scoped_asset_keys(scope).count())
    return _scoped_asset_keys_capped(scope)


def _scoped_asset_keys_capped(scope: Scope) -> Figure:
    """A scope's asset keys on a large asset table, counted up to ``COUNT_CAP``. No index of Airflow's serves
    "the keys of the assets whose name or URI matches these patterns" (the patterns are matched against every
    asset, then the keys are read until the cap), so the count is kept ``DAG_IDS_CACHE_SECONDS`` per set of
    patterns, like the list of DAGs: the figure is at most that old."""
    key = _ASSET_COUNT_CACHE_KEY + hashlib.sha256(repr(sorted(scope.assets or ())).encode()).hexdigest()
    cached = cache.get(key)
    # Only [count, how] is one: anything else there (another release's value) is counted afresh.
    if not (isinstance(cached, list) and len(cached) == 2 and stats.is_count(cached[0]) and cached[1] in HOW_KEPT):
        counted = capped_count(scoped_asset_keys(scope), COUNT_CAP)
        cached = (counted.value, counted.how)
        cache.set(key, cached, DAG_IDS_CACHE_SECONDS)
    return Figure(*cached)


_ASSET_COUNT_CACHE_KEY = "statestore:scoped-asset-keys:"
HOW_KEPT = (EXACT, CAPPED)  # what capped_count answers

STATS_COMMAND = "python manage.py state_store_stats"


@dataclass(frozen=True)
class SnapshotFigures:
    """The latest statistics snapshot's exact figures that this user may see, as of ``taken_at``: None for a
    store they may not view, and for figures a snapshot cannot split by their scope (asset keys of an asset
    scope). A scoped user's task figures are the sums of their DAGs' rows."""

    taken_at: datetime
    task_keys: int | None = None
    expired: int | None = None
    expiring: int | None = None
    never: int | None = None
    asset_keys: int | None = None

    def age_seconds(self, now: datetime) -> float:
        return max(0.0, (now - self.taken_at).total_seconds())

    @property
    def text(self) -> dict[str, str]:
        """Each shown figure with thousands separators."""
        names = ("task_keys", "expired", "expiring", "never", "asset_keys")
        return {name: formatting.count(getattr(self, name)) for name in names if getattr(self, name) is not None}


# A snapshot older than this is "old": the overview then shows its figures beside the live ones even when they
# agree, so that a stopped schedule shows. The documented schedule of ``state_store_stats`` is hourly
# (docs/operations.md, the Kubernetes CronJob), and GC (every 15 minutes) takes one at its end: a snapshot
# older than an hour means at least one scheduled one is missing. Younger and equal to the live figure, the
# snapshot's line would say nothing the live figure does not.
SNAPSHOT_OLD_AFTER = timedelta(hours=1)


@dataclass(frozen=True)
class SnapshotChange:
    """How a live, exact figure moved since the latest snapshot (``change``: live minus snapshot), to show
    beside it only when it says something (``snapshot_change``)."""

    change: int
    taken_at: datetime

    @property
    def text(self) -> str:
        return formatting.signed_count(self.change)


def snapshot_change(live: Figure, seen: int | None, taken_at: datetime, now: datetime) -> SnapshotChange | None:
    """The change of an exact live figure since the snapshot's ``seen``, or None when there is nothing worth
    a line: no snapshot figure, a live figure that is not exact (the page says "exact … as of" instead), or
    the same number in a snapshot younger than ``SNAPSHOT_OLD_AFTER``."""
    if seen is None or live.value is None or live.how != EXACT:
        return None
    change = live.value - seen
    if change == 0 and now - taken_at <= SNAPSHOT_OLD_AFTER:
        return None
    return SnapshotChange(change, taken_at)


def snapshot_figures(snapshot, *, scope: Scope, stores: tuple[str, ...]) -> SnapshotFigures | None:
    if snapshot is None:
        return None
    seen = stats.visible_figures(snapshot, scope=scope, stores=stores)
    names = ("task_keys", "expired", "expiring", "never", "asset_keys")
    return SnapshotFigures(taken_at=snapshot.taken_at, **{name: seen[name] for name in names})


@dataclass
class Overview:
    totals: StoreTotals
    statuses: dict[str, Figure]  # EXPIRED, EXPIRING, NEVER
    gc_runs: list[GcRun] | None  # None: not shown to this user
    config: list[ConfigValue]
    config_error: str | None
    backend_modes: list[BackendMode] = field(default_factory=list)
    retention_days: int | None = None
    snapshot: SnapshotFigures | None = None  # None: no snapshot taken yet
    stats_command: str = STATS_COMMAND
    airflow_schema: AirflowSchema | None = None  # which Airflow's tables the dashboard found (3.3 or 3.4)
    # Per figure (task_keys, asset_keys, expired, expiring, never): its change since the snapshot, where shown
    changes: dict[str, SnapshotChange] = field(default_factory=dict)

    @property
    def expired(self) -> int | None:
        return self.statuses[EXPIRED].value

    @property
    def expiring(self) -> int | None:
        return self.statuses[EXPIRING].value

    @property
    def never(self) -> int | None:
        return self.statuses[NEVER].value

    @property
    def estimated(self) -> bool:
        """Some figure is not an exact current count."""
        figures = (self.totals.task, self.totals.asset, *self.statuses.values())
        return any(f.value is not None and f.how != EXACT for f in figures)


_OVERVIEW_STATUSES = (EXPIRED, EXPIRING, NEVER)


def _task_figures(now: datetime, scope: Scope, seen: SnapshotFigures | None) -> tuple[Figure, dict[str, Figure]]:
    """The task keys and their count per status, within a bounded time whatever the table's size: exact on a
    small table; on a large one PostgreSQL's estimates (every DAG), the snapshot's sums of the user's DAGs,
    or without a snapshot their counts capped at ``COUNT_CAP``."""
    size = row_count(TaskStateStore)
    if size.how == EXACT:
        rows = scoped_task_keys(scope)
        total = size if scope.all_dags else Figure(rows.count())
        return total, {s: Figure(rows.filter(status_filter(s, now)).count()) for s in _OVERVIEW_STATUSES}
    if scope.all_dags:
        rows = TaskStateStore.objects.all()
        return size, {s: estimate(rows.filter(status_filter(s, now))) for s in _OVERVIEW_STATUSES}
    if seen is not None:
        return Figure(seen.task_keys, SNAPSHOT), {
            EXPIRED: Figure(seen.expired, SNAPSHOT),
            EXPIRING: Figure(seen.expiring, SNAPSHOT),
            NEVER: Figure(seen.never, SNAPSHOT),
        }
    rows = scoped_task_keys(scope)
    return capped_count(rows, COUNT_CAP), {
        s: capped_count(rows.filter(status_filter(s, now)), COUNT_CAP) for s in _OVERVIEW_STATUSES
    }


def overview(now: datetime, *, scope: Scope, stores: tuple[str, ...]) -> Overview:
    """The overview's figures of the ``stores`` the user may view (the others are None and not counted):
    a scoped user's count only their DAGs and assets. GC runs delete task state and span every DAG: they
    are shown to unscoped viewers of task state only. Beside them, the latest snapshot's exact figures.
    A fixed number of queries, each bounded whatever the table's size (see ``_task_figures``)."""
    seen = snapshot_figures(stats.latest_snapshot(), scope=scope, stores=stores) if stores else None
    task, statuses = HIDDEN, dict.fromkeys(_OVERVIEW_STATUSES, HIDDEN)
    if TASK in stores:
        task, statuses = _task_figures(now, scope, seen)
    asset = _live_total(ASSET, scope, row_count(AssetStateStore)) if ASSET in stores else HIDDEN
    config = airflow_config()
    try:
        values = config.state_store_values()
        error = None
    except Exception as exc:  # an invalid option: show it rather than fail the page
        values, error = [], str(exc)
    by_name = {(v.option.section, v.option.key): v.value for v in values}
    modes = backend_modes(by_name)
    changes = {}
    if seen is not None:
        live = {"task_keys": task, "asset_keys": asset, "expired": statuses[EXPIRED]}
        live |= {"expiring": statuses[EXPIRING], "never": statuses[NEVER]}
        for name, figure in live.items():
            change = snapshot_change(figure, getattr(seen, name), seen.taken_at, now)
            if change is not None:
                changes[name] = change
    return Overview(
        totals=StoreTotals(task, asset),
        statuses=statuses,
        gc_runs=list(GcRun.objects.all()[:5]) if store_wide(scope, stores) else None,
        config=values,
        config_error=error,
        backend_modes=modes,
        retention_days=by_name.get(("state_store", "default_retention_days")),
        snapshot=seen,
        airflow_schema=schema_of(connections[airflow_alias()]),
        changes=changes,
    )


@dataclass(frozen=True)
class LargeValue:
    """One of the largest values; its place (a task key's id, DAG, run, task and map index, or an asset's id
    and name). ``size``: its row's bytes in Airflow's database; for a worker-side reference ``is_object`` and
    ``object_size``, the object's recorded size (None: never read, unknown)."""

    store: str
    key: str
    size: int
    key_id: int | None = None
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    map_index: int | None = None
    asset_id: int | None = None
    asset_name: str | None = None
    is_object: bool = False
    object_size: int | None = None

    @property
    def sizes(self) -> StoredSize:
        return StoredSize(self.size, is_object=self.is_object, object_bytes=self.object_size)

    @property
    def stored(self) -> int:
        """The ranking's measure (``objects.sizes``: the row plus the object where known)."""
        return self.sizes.stored

    @property
    def identity(self) -> tuple:
        return (TASK, self.key_id) if self.store == TASK else (ASSET, self.asset_id, self.key)


@dataclass(frozen=True)
class Largest:
    """``source``: "live" (small tables: read now), "snapshot" (the latest snapshot's list, as of
    ``taken_at``) or "none" (large tables and no snapshot yet: run ``command``)."""

    rows: list[LargeValue]
    source: str
    taken_at: datetime | None = None
    command: str = STATS_COMMAND

    def age_seconds(self, now: datetime) -> float | None:
        return None if self.taken_at is None else max(0.0, (now - self.taken_at).total_seconds())


def largest_values(*, scope: Scope, stores: tuple[str, ...] = (TASK, ASSET), limit: int = 10) -> Largest:
    """The biggest values of ``stores`` in ``scope``, ranked by what they cost (``objects.sizes``: the row's
    bytes plus its worker-side object's recorded size). The rows' sizes cost a scan of the tables: done live
    on small tables only; above ``ESTIMATE_ABOVE`` rows they come from the latest snapshot's top 50 (filtered
    by the user's scope and stores), and without a snapshot there is none (no scan). The largest objects the
    dashboard recorded join them, each checked against its row (still in scope, still that reference)."""
    found = _largest_rows(scope=scope, stores=stores, limit=limit)
    if found.source == "none":
        return found
    rows = {r.identity: r for r in _with_object_sizes(found.rows)}
    for row in _largest_objects(scope=scope, stores=stores):
        rows.setdefault(row.identity, row)
    ranked = sorted(rows.values(), key=lambda r: (-r.stored, r.store, r.key))[:limit]
    return Largest(ranked, found.source, found.taken_at)


def _with_object_sizes(rows: list[LargeValue]) -> list[LargeValue]:
    """``rows`` (of the rows' sizes alone) with the recorded sizes of the objects the references among them
    point at: two index lookups of at most ``len(rows)`` rows, reading only the values that are references."""
    task_ids = [r.key_id for r in rows if r.store == TASK]
    assets = [(r.asset_id, r.key) for r in rows if r.store == ASSET]
    values = {}
    if task_ids:
        refs = TaskStateStore.objects.filter(pk__in=task_ids, value__contains=objects.REF_MARKER)
        values.update({(TASK, pk): v for pk, v in refs.values_list("pk", "value")})
    if assets:
        wanted = Q(pk__in=[])
        for asset_id, key in assets:
            wanted |= Q(asset_id=asset_id, key=key)
        refs = AssetStateStore.objects.filter(wanted, value__contains=objects.REF_MARKER)
        values.update({(ASSET, a, k): v for a, k, v in refs.values_list("asset_id", "key", "value")})
    if not values:
        return rows
    seen = sizes.recorded(r for r in map(worker_ref_of, values.values()) if isinstance(r, str))
    out = []
    for row in rows:
        value = values.get(row.identity)
        if value is None:
            out.append(row)
            continue
        size = sizes.stored_size(value, seen)
        out.append(replace(row, is_object=size.is_object, object_size=size.object_bytes))
    return out


def _largest_objects(*, scope: Scope, stores: tuple[str, ...]) -> list[LargeValue]:
    """The keys of the ``stats.TOP`` largest objects the dashboard recorded, whose rows (in ``scope``) still hold
    that reference: found by the coordinates each was recorded under (the lookup index), never by a scan."""
    recorded = sizes.largest_recorded(stats.TOP)
    by_ref = {o.ref: o for o in recorded}
    out = []
    tasks = [o for o in recorded if o.store == TASK] if TASK in stores else []
    if tasks:
        wanted = Q(pk__in=[])
        for o in tasks:
            wanted |= Q(dag_id=o.dag_id, run_id=o.run_id, task_id=o.task_id, map_index=o.map_index, key=o.key)
        rows = scoped_task_keys(scope).filter(wanted, value__contains=objects.REF_MARKER)
        for k in rows.only("pk", "dag_id", "run_id", "task_id", "map_index", "key", "value"):
            o = by_ref.get(worker_ref_of(k.value))
            if o is not None:
                out.append(
                    LargeValue(
                        TASK,
                        k.key,
                        k.value_size,
                        key_id=k.pk,
                        dag_id=k.dag_id,
                        run_id=k.run_id,
                        task_id=k.task_id,
                        map_index=k.map_index,
                        is_object=True,
                        object_size=o.size,
                    )
                )
    assets = [o for o in recorded if o.store == ASSET] if ASSET in stores else []
    if assets:
        wanted = Q(pk__in=[])
        for o in assets:
            wanted |= Q(asset_id=o.asset_id, key=o.key)
        rows = scoped_asset_keys(scope).select_related("asset").filter(wanted, value__contains=objects.REF_MARKER)
        for k in rows:
            o = by_ref.get(worker_ref_of(k.value))
            if o is not None:
                out.append(
                    LargeValue(
                        ASSET,
                        k.key,
                        k.value_size,
                        asset_id=k.asset_id,
                        asset_name=k.asset.name,
                        is_object=True,
                        object_size=o.size,
                    )
                )
    return out


def _largest_rows(*, scope: Scope, stores: tuple[str, ...], limit: int) -> Largest:
    """The largest rows by their own bytes (live, or the snapshot's), before the objects join them."""
    large = any(
        row_count(model).how != EXACT
        for store, model in (("task", TaskStateStore), ("asset", AssetStateStore))
        if store in stores
    )
    if large:
        snapshot = stats.latest_snapshot()
        if snapshot is None:
            return Largest([], "none")
        rows = [
            LargeValue(
                item["store"],
                item["key"],
                item["size"],
                key_id=item.get("key_id"),
                dag_id=item.get("dag_id"),
                run_id=item.get("run_id"),
                task_id=item.get("task_id"),
                map_index=item.get("map_index"),
                asset_id=item.get("asset_id"),
                asset_name=item.get("asset_name"),
            )
            for item in snapshot.largest
            if item.get("store") in stores
            and (
                scope.allows_dag(item.get("dag_id"))
                if item.get("store") == TASK
                else scope.allows_asset(item.get("asset_name"), item.get("asset_uri"))
            )
        ]
        return Largest(rows, "snapshot", snapshot.taken_at)
    rows = []
    if TASK in stores:
        task = scoped_task_keys(scope).annotate(size=Length("value")).order_by("-size", "id")[:limit]
        rows += [
            LargeValue(
                "task",
                k.key,
                k.size,
                key_id=k.pk,
                dag_id=k.dag_id,
                run_id=k.run_id,
                task_id=k.task_id,
                map_index=k.map_index,
            )
            for k in task
        ]
    if ASSET in stores:
        asset = (
            scoped_asset_keys(scope)
            .select_related("asset")
            .annotate(size=Length("value"))
            .order_by("-size", "asset_id", "key")[:limit]
        )
        rows += [LargeValue("asset", k.key, k.size, asset_id=k.asset_id, asset_name=k.asset.name) for k in asset]
    return Largest(rows, "live")
