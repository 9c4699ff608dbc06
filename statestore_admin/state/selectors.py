"""Reads of the state store. Views, the API and commands call these; they hold no SQL of their own.

Every list is keyset-paginated (``pagination.paginate``) and runs a fixed number of queries whatever
the number of rows; none runs an exact ``COUNT(*)`` over a whole state table.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import connections
from django.db.models import (
    BooleanField,
    Case,
    Count,
    Exists,
    F,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
    Window,
)
from django.db.models.functions import Length, RowNumber, Substr
from django.db.models.lookups import IsNull
from django.utils.module_loading import import_string

from statestore_admin.airflow.config import METASTORE_BACKEND, ConfigValue, airflow_config
from statestore_admin.airflow.models import Asset, AssetActive, AssetStateStore, DagRun, TaskInstance, TaskStateStore
from statestore_admin.airflow.router import airflow_alias

from . import gc, objects
from .counting import (
    COUNT_CAP,
    EXACT,
    SNAPSHOT,
    Figure,
    capped_count,
    estimate,
    row_count,
)
from .errors import Invalid, NotFound
from .models import AuditEvent, AuditKey, GcRun, StatsSnapshotDag
from .pagination import Page, decode_cursor, encode_cursor, paginate
from .scopes import Scope

# Faces read the key-status names through selectors; their one home is status.py.
from .status import EXPIRED, EXPIRING, NEVER, status_filter
from .status import LIVE as LIVE
from .status import STATUSES as STATUSES
from .status import status_of as status_of

# Overview -----------------------------------------------------------------------------------------
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


def store_totals(scope: Scope, stores: tuple[str, ...] = ("task", "asset")) -> StoreTotals:
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
    whole = scope.all_dags if store == "task" else scope.all_assets
    if whole:
        return size
    if store == "task":
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
    if cached is None:
        counted = capped_count(scoped_asset_keys(scope), COUNT_CAP)
        cached = (counted.value, counted.how)
        cache.set(key, cached, DAG_IDS_CACHE_SECONDS)
    return Figure(*cached)


_ASSET_COUNT_CACHE_KEY = "statestore:scoped-asset-keys:"


# Scopes (state.scopes) -----------------------------------------------------------------------------
DAG_IDS_CACHE_SECONDS = 30  # how long scoped users' pages reuse the list of DAGs with state


def all_dag_ids_with_state() -> list[str]:
    """Every dag_id of task_state_store, by a loose index scan of its lookup index (one probe per DAG: 25-40 ms
    at 2,000 DAGs), kept ``DAG_IDS_CACHE_SECONDS`` in the cache (``CACHE_URL``): a scoped user's first view of
    a brand-new DAG may wait that long. What a scope allows is decided on these names only; the state itself
    is always read live."""
    cached = cache.get(_DAG_IDS_CACHE_KEY)
    if cached is not None:
        return cached
    with connections[airflow_alias()].cursor() as db:
        db.execute(_DISTINCT_DAGS.format(like="", like_t=""), ["", 2**31 - 1])
        dag_ids = [row[0] for row in db.fetchall()]
    cache.set(_DAG_IDS_CACHE_KEY, dag_ids, DAG_IDS_CACHE_SECONDS)
    return dag_ids


_DAG_IDS_CACHE_KEY = "statestore:dag-ids-with-state"


def scoped_dag_ids(scope: Scope) -> list[str] | None:
    """The DAGs with state that ``scope`` allows (None: every DAG). Matching is done on the distinct
    dag_ids, so that the state table is then read by ``dag_id IN (…)``, a range of its lookup index, and
    never scanned with a pattern."""
    if scope.all_dags:
        return None
    if "dag_ids" not in scope.memo:
        scope.memo["dag_ids"] = [dag_id for dag_id in all_dag_ids_with_state() if scope.allows_dag(dag_id)]
    return scope.memo["dag_ids"]


def scoped_task_keys(scope: Scope, rows: QuerySet | None = None) -> QuerySet:
    rows = TaskStateStore.objects.all() if rows is None else rows
    dag_ids = scoped_dag_ids(scope)
    return rows if dag_ids is None else rows.filter(dag_id__in=dag_ids)


def scoped_assets(scope: Scope) -> QuerySet:
    return Asset.objects.filter(scope.asset_q())


def scoped_asset_keys(scope: Scope, rows: QuerySet | None = None) -> QuerySet:
    rows = AssetStateStore.objects.all() if rows is None else rows
    return rows if scope.all_assets else rows.filter(asset__in=scoped_assets(scope).values("pk"))


BACKEND_MODES = {
    "metastore": "State lives in these tables: what you see here is what tasks read.",
    "custom": "A custom [state_store] backend keeps state elsewhere, not in Airflow's metastore: these tables may "
    "be empty or stale. Garbage collection and every page and API here see only the metastore tables (GC deletes "
    "nothing while this backend is configured).",
    "worker": "A worker-side backend stores the values elsewhere: the values here are references "
    '({"__airflow_state_ref__": …}).',
}
BACKEND_DOCS = "docs/worker-backends.md"
# What a [state_store] backend may define (Airflow's BaseStoreBackend); the dashboard calls none of them.
BACKEND_METHODS = ("get", "set", "delete", "clear", "aget", "aset", "adelete", "aclear")


@dataclass(frozen=True)
class BackendMode:
    """One line of the overview's configuration: ``mode`` (metastore, custom, worker), what it means here
    (``text``), where the documentation is (``docs``) and the facts behind the text (``details``, for the API)."""

    mode: str
    text: str
    docs: str = ""
    details: dict = field(default_factory=dict)


@dataclass(frozen=True)
class BackendClass:
    """What importing a configured backend class in the dashboard's environment found (never instantiated):
    ``importable``, else ``error``; the ``methods`` of ``BACKEND_METHODS`` it defines (its own or inherited,
    not abstract)."""

    path: str
    importable: bool
    error: str = ""
    methods: tuple[str, ...] = ()


def inspect_backend_class(path: str) -> BackendClass:
    """Import ``path`` (catching every exception, never instantiating it) and list the backend methods it
    defines."""
    try:
        found = import_string(path)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever the module does, the page still renders
        return BackendClass(path, False, f"{type(exc).__name__}: {exc}")
    if not isinstance(found, type):
        return BackendClass(path, False, f"{path} is a {type(found).__name__}, not a class")
    abstract = getattr(found, "__abstractmethods__", frozenset())
    methods = tuple(m for m in BACKEND_METHODS if callable(getattr(found, m, None)) and m not in abstract)
    return BackendClass(path, True, methods=methods)


def _custom_backend_mode(backend: str) -> BackendMode | None:
    """The overview's line for a ``[state_store] backend`` that is not the metastore backend (None when it is
    one after all, by the rule GC applies: ``gc.backend_status``)."""
    if gc.backend_status().is_metastore:
        return None
    found = inspect_backend_class(backend)
    if found.importable:
        defined = ", ".join(found.methods) if found.methods else "none of " + ", ".join(BACKEND_METHODS)
        how = (
            f"{backend} is importable here; it defines {defined}. The dashboard reads only the metastore tables, "
            "so these methods are not called."
        )
    else:
        how = (
            f"{backend} cannot be imported in the dashboard's environment ({found.error}); the dashboard would not "
            "call it anyway: it reads only the metastore tables."
        )
    details = {
        "backend": backend,
        "importable": found.importable,
        "import_error": found.error or None,
        "methods": list(found.methods),
        "methods_called": [],
    }
    return BackendMode("custom", f"{BACKEND_MODES['custom']} {how}", BACKEND_DOCS, details)


def _worker_backend_mode(worker_backend: str) -> BackendMode:
    """The overview's line for ``[workers] state_store_backend``: whether the dashboard can read and delete
    the objects (a configured ``[common.io]`` storage, ``WORKER_BACKEND_READ``)."""
    store = objects.storage()
    reading = objects.read_enabled()
    parts = [BACKEND_MODES["worker"]]
    is_object_storage = worker_backend == objects.PROVIDER_BACKEND
    if not is_object_storage:
        parts.append(
            f"{worker_backend} is not Airflow's object-storage backend (common.io): the dashboard knows only that "
            "backend's layout, and shows these references as they are."
        )
    if store is None:
        parts.append(
            "The dashboard's Airflow configuration names no [common.io] state_store_objectstorage_path: it can "
            "neither read nor delete the objects, and deleting a row here leaves its object behind (an orphan)."
        )
    else:
        compression = f", {store.compression}-compressed" if store.compression else ""
        parts.append(
            f"Objects are under {store.base}{compression}: the dashboard deletes a deleted row's object after the "
            "row (Airflow's order)"
            + (
                ", and key pages show the value read from the object (WORKER_BACKEND_READ is on)."
                if reading
                else "; reading them is off (WORKER_BACKEND_READ), so key pages show the reference only."
            )
        )
    details = {
        "backend": worker_backend,
        "object_storage_backend": is_object_storage,
        "storage": None
        if store is None
        else {"base": store.base, "compression": store.compression or None, "threshold": store.threshold},
        "read": reading,
    }
    return BackendMode("worker", " ".join(parts), BACKEND_DOCS, details)


def backend_modes(by_name: dict) -> list[BackendMode]:
    """The overview's configuration lines, from the ``[state_store]`` options (``(section, key) -> value``)."""
    modes = []
    backend = by_name.get(("state_store", "backend"))
    if backend:
        custom = None if backend == METASTORE_BACKEND else _custom_backend_mode(backend)
        modes.append(custom or BackendMode("metastore", BACKEND_MODES["metastore"], details={"backend": backend}))
    worker_backend = by_name.get(("workers", "state_store_backend"))
    if worker_backend:
        modes.append(_worker_backend_mode(worker_backend))
    return modes


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
        return {name: f"{getattr(self, name):,}" for name in names if getattr(self, name) is not None}


def _latest_snapshot():
    from . import stats  # stats reads this module

    return stats.latest_snapshot()


def snapshot_figures(snapshot, *, scope: Scope, stores: tuple[str, ...]) -> SnapshotFigures | None:
    if snapshot is None:
        return None
    task = dict.fromkeys(("task_keys", "expired", "expiring", "never"))
    if "task" in stores:
        if scope.all_dags:
            task = {name: getattr(snapshot, name) for name in task}
        else:
            from . import stats

            totals = stats.scoped_totals(snapshot, scope=scope)
            task = {"task_keys": totals.keys, "expired": totals.expired, "expiring": totals.expiring}
            task["never"] = totals.never
    asset_keys = snapshot.asset_keys if "asset" in stores and scope.all_assets else None
    return SnapshotFigures(taken_at=snapshot.taken_at, asset_keys=asset_keys, **task)


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
    seen = snapshot_figures(_latest_snapshot(), scope=scope, stores=stores) if stores else None
    task, statuses = HIDDEN, dict.fromkeys(_OVERVIEW_STATUSES, HIDDEN)
    if "task" in stores:
        task, statuses = _task_figures(now, scope, seen)
    asset = _live_total("asset", scope, row_count(AssetStateStore)) if "asset" in stores else HIDDEN
    config = airflow_config()
    try:
        values = config.state_store_values()
        error = None
    except Exception as exc:  # an invalid option: show it rather than fail the page
        values, error = [], str(exc)
    by_name = {(v.option.section, v.option.key): v.value for v in values}
    modes = backend_modes(by_name)
    return Overview(
        totals=StoreTotals(task, asset),
        statuses=statuses,
        gc_runs=list(GcRun.objects.all()[:5]) if "task" in stores and not scope.restricted else None,
        config=values,
        config_error=error,
        backend_modes=modes,
        retention_days=by_name.get(("state_store", "default_retention_days")),
        snapshot=seen,
    )


@dataclass(frozen=True)
class LargeValue:
    """One of the largest values; its place (a task key's id, DAG, run, task and map index, or an asset's id
    and name)."""

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


def largest_values(*, scope: Scope, stores: tuple[str, ...] = ("task", "asset"), limit: int = 10) -> Largest:
    """The biggest values of ``stores`` in ``scope``. Finding them costs a scan of the tables: done live on
    small tables only; above ``ESTIMATE_ABOVE`` rows they come from the latest snapshot's top 50 (filtered
    by the user's scope and stores), and without a snapshot there is none (no scan)."""
    large = any(
        row_count(model).how != EXACT
        for store, model in (("task", TaskStateStore), ("asset", AssetStateStore))
        if store in stores
    )
    if large:
        snapshot = _latest_snapshot()
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
                if item.get("store") == "task"
                else scope.allows_asset(item.get("asset_name"), item.get("asset_uri"))
            )
        ]
        return Largest(sorted(rows, key=lambda r: -r.size)[:limit], "snapshot", snapshot.taken_at)
    rows = []
    if "task" in stores:
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
    if "asset" in stores:
        asset = (
            scoped_asset_keys(scope)
            .select_related("asset")
            .annotate(size=Length("value"))
            .order_by("-size", "asset_id", "key")[:limit]
        )
        rows += [LargeValue("asset", k.key, k.size, asset_id=k.asset_id, asset_name=k.asset.name) for k in asset]
    return Largest(sorted(rows, key=lambda r: -r.size)[:limit], "live")


# DAGs and runs ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DagSummary:
    """One DAG's task state: ``source`` "live" (counted now), "snapshot" (as of the snapshot) or
    "missing" (not in the last snapshot: newer than it); the figures are None unless counted."""

    dag_id: str
    keys: int | None
    runs: int | None
    expired: int | None
    last_updated: datetime | None
    source: str = "live"


@dataclass(frozen=True)
class DagList:
    """A page of DAGs; ``source``: "live" (small table), "snapshot" (figures of the snapshot taken at
    ``taken_at``) or "none" (a large table and no snapshot yet: the DAGs without figures; run ``command``)."""

    page: Page
    source: str
    taken_at: datetime | None = None
    command: str = STATS_COMMAND


# A loose index scan over idx_task_state_store_lookup (dag_id, …): one index probe per distinct DAG.
_DISTINCT_DAGS = """
WITH RECURSIVE dags(dag_id, n) AS (
    SELECT MIN(dag_id), 1 FROM task_state_store WHERE dag_id > %s{like}
    UNION ALL
    SELECT (SELECT MIN(t.dag_id) FROM task_state_store t WHERE t.dag_id > dags.dag_id{like_t}), n + 1
    FROM dags WHERE dags.dag_id IS NOT NULL AND n < %s
)
SELECT dag_id FROM dags WHERE dag_id IS NOT NULL
"""
_LIKE = " AND dag_id LIKE %s ESCAPE '\\'"


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


_CODEPOINT_COLLATIONS = {"C", "POSIX", "C.UTF-8", "C.utf8", "ucs_basic"}


def _codepoint_order() -> bool:
    """Whether dag_id sorts by code point (PostgreSQL's C collations, SQLite's BINARY): then the dag_ids
    starting with a prefix are one range of the lookup index, which a LIKE under PostgreSQL's C.UTF-8 does
    not use on its own (it would read the index on past the prefix's DAGs)."""
    connection = connections[airflow_alias()]
    if connection.vendor != "postgresql":
        return connection.vendor == "sqlite"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(NULLIF(c.collname, 'default'), d.datcollate) FROM pg_attribute a "
            "LEFT JOIN pg_collation c ON c.oid = a.attcollation "
            "JOIN pg_database d ON d.datname = current_database() "
            "WHERE a.attrelid = 'task_state_store'::regclass AND a.attname = 'dag_id'"
        )
        row = cursor.fetchone()
    return bool(row) and row[0] in _CODEPOINT_COLLATIONS


def _distinct_dags(after: str, prefix: str, limit: int, ranged: bool = False) -> list[str]:
    """Up to ``limit`` dag_ids after ``after`` starting with ``prefix``, in order; ``ranged`` (see
    ``_codepoint_order``): the prefix's range of the lookup index only, else the index filtered from ``after``."""
    like = _LIKE if prefix else ""
    params = [_like_prefix(prefix)] if prefix else []
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1) if prefix and ranged and ord(prefix[-1]) < 0x10FFFF else None
    if upper:
        like += " AND dag_id >= %s AND dag_id < %s"
        params += [prefix, upper]
    sql = _DISTINCT_DAGS.format(like=like, like_t=like.replace("dag_id", "t.dag_id"))
    with connections[airflow_alias()].cursor() as db:
        db.execute(sql, [after, *params, *params, limit])
        return [row[0] for row in db.fetchall()]


def dag_prefix_q(prefix: str) -> tuple[Q, bool]:
    """The rows whose dag_id starts with ``prefix`` (a DAG filter, as the DAG list's), and whether the lookup
    index serves them: as one range of it where dag_id sorts by code point (see ``_codepoint_order``)."""
    condition = Q(dag_id__startswith=prefix)
    if not _codepoint_order():
        return condition, False
    if ord(prefix[-1]) < 0x10FFFF:
        condition &= Q(dag_id__gte=prefix, dag_id__lt=prefix[:-1] + chr(ord(prefix[-1]) + 1))
    return condition, True


def _literal_prefix(pattern: str) -> str:
    for n, char in enumerate(pattern):
        if char in "*?":
            return pattern[:n]
    return pattern


_SCAN_CHUNK = 200


def _scoped_dag_page(scope: Scope, after: str, prefix: str, size: int) -> list[str]:
    """The first ``size`` + 1 DAGs of a scoped user after ``after`` starting with ``prefix``: a loose index
    scan under each pattern's literal prefix (etl_ for etl_*), so that the user's page costs probes of
    their DAGs, not of every DAG. A pattern starting with a wildcard: every dag_id, matched in Python."""
    prefixes = set()
    for pattern in scope.dags:
        start = _literal_prefix(pattern)
        if not start:
            return [d for d in scoped_dag_ids(scope) if d > after and d.startswith(prefix)][: size + 1]
        if start.startswith(prefix) or prefix.startswith(start):
            prefixes.add(max(start, prefix, key=len))
    found, ranged = set(), _codepoint_order() if prefixes else False
    for start in {p for p in prefixes if not any(p != q and p.startswith(q) for q in prefixes)}:
        position, matches = after, 0
        while matches <= size:
            chunk = _distinct_dags(position, start, _SCAN_CHUNK, ranged)
            for dag_id in chunk:
                if scope.allows_dag(dag_id) and dag_id.startswith(prefix) and dag_id.startswith(start):
                    found.add(dag_id)
                    matches += 1
            if len(chunk) < _SCAN_CHUNK:
                break
            position = chunk[-1]
    return sorted(found)[: size + 1]


def dags_with_state(
    now: datetime, cursor: str | None = None, prefix: str = "", size: int = 50, *, scope: Scope
) -> DagList:
    """DAGs that have task state, by dag_id, found by a loose index scan of (dag_id, …), and their figures:
    counted live on a small table; on a large one (above ``ESTIMATE_ABOVE`` rows) read from the latest
    snapshot's per-DAG rows (a DAG newer than it: "missing"), none without a snapshot."""
    decoded = decode_cursor(cursor, 1)
    after = decoded[0] if decoded and isinstance(decoded[0], str) else ""
    if scope.all_dags:
        dag_ids = _distinct_dags(after, prefix, size + 1, bool(prefix) and _codepoint_order())
    else:
        dag_ids = _scoped_dag_page(scope, after, prefix, size)
    more = len(dag_ids) > size
    dag_ids = dag_ids[:size]
    page = Page([], encode_cursor([dag_ids[-1]]) if more else None, cursor)
    if row_count(TaskStateStore).how == EXACT:
        stats = {
            row["dag_id"]: row
            for row in TaskStateStore.objects.filter(dag_id__in=dag_ids)
            .values("dag_id")
            .annotate(
                keys=Count("id"),
                runs=Count("dag_run", distinct=True),
                expired=Count("id", filter=status_filter(EXPIRED, now)),
                last_updated=Max("updated_at"),
            )
        }
        page.items = [
            DagSummary(d, stats[d]["keys"], stats[d]["runs"], stats[d]["expired"], stats[d]["last_updated"])
            for d in dag_ids
            if d in stats
        ]
        return DagList(page, "live")
    snapshot = _latest_snapshot()
    if snapshot is None:
        page.items = [DagSummary(d, None, None, None, None, source="missing") for d in dag_ids]
        return DagList(page, "none")
    rows = {row.dag_id: row for row in StatsSnapshotDag.objects.filter(snapshot=snapshot, dag_id__in=dag_ids)}
    page.items = [
        DagSummary(d, r.keys, r.runs, r.expired, r.last_updated, source="snapshot")
        if (r := rows.get(d))
        else DagSummary(d, None, None, None, None, source="missing")
        for d in dag_ids
    ]
    return DagList(page, "snapshot", snapshot.taken_at)


def runs_with_state(dag_id: str, now: datetime, cursor: str | None = None, size: int = 50, *, scope: Scope) -> Page:
    """The DAG's runs that have task state, newest first, with their key counts: two queries. A DAG out
    of ``scope`` is Forbidden, whether it exists or not."""
    scope.require_dag(dag_id)
    runs = DagRun.objects.filter(dag_id=dag_id).filter(Exists(TaskStateStore.objects.filter(dag_run=OuterRef("pk"))))
    page = paginate(runs, ["-id"], cursor, size)
    stats = {
        row["dag_run"]: row
        for row in TaskStateStore.objects.filter(dag_run__in=[r.id for r in page.items])
        .values("dag_run")
        .annotate(
            keys=Count("id"),
            tasks=Count("task_id", distinct=True),
            expired=Count("id", filter=status_filter(EXPIRED, now)),
            last_updated=Max("updated_at"),
        )
    }
    for run in page.items:
        row = stats.get(run.id, {})
        run.keys, run.tasks = row.get("keys", 0), row.get("tasks", 0)
        run.expired, run.last_updated = row.get("expired", 0), row.get("last_updated")
    return page


def get_run(run_pk: int, *, scope: Scope) -> DagRun:
    """A run by its id; one of a DAG out of ``scope`` is NotFound, as if it did not exist."""
    run = DagRun.objects.filter(pk=run_pk).first()
    if run is None or not scope.allows_dag(run.dag_id):
        raise NotFound(f"No DAG run with id {run_pk}.")
    return run


def find_run(dag_id: str, run_id: str, *, scope: Scope) -> DagRun:
    scope.require_dag(dag_id)
    run = DagRun.objects.filter(dag_id=dag_id, run_id=run_id).first()
    if run is None:
        raise NotFound(f"No DAG run {run_id!r} of DAG {dag_id!r}: it may have been deleted.")
    return run


@dataclass
class InstanceBlock:
    map_index: int
    task_instance: TaskInstance | None
    keys: list[TaskStateStore]


@dataclass
class TaskGroup:
    task_id: str
    instances: list[InstanceBlock]


def _blocks(run: DagRun, items: list[TaskStateStore]) -> list[TaskGroup]:
    """``items`` (ordered by task and map index) grouped by task and map index, with their task instances:
    one query, of the task instances of the page's tasks and map indexes only (a mapped task may have thousands)."""
    tasks, map_indexes = {item.task_id for item in items}, {item.map_index for item in items}
    instances = {
        (ti.task_id, ti.map_index): ti
        for ti in TaskInstance.objects.filter(
            dag_id=run.dag_id, run_id=run.run_id, task_id__in=tasks, map_index__in=map_indexes
        )
    }
    groups: OrderedDict[str, OrderedDict[int, InstanceBlock]] = OrderedDict()
    for item in items:
        blocks = groups.setdefault(item.task_id, OrderedDict())
        block = blocks.get(item.map_index)
        if block is None:
            block = blocks[item.map_index] = InstanceBlock(
                item.map_index, instances.get((item.task_id, item.map_index)), []
            )
        block.keys.append(item)
    return [TaskGroup(task_id, list(blocks.values())) for task_id, blocks in groups.items()]


def run_state(run: DagRun, cursor: str | None = None, size: int = 200) -> tuple[list[TaskGroup], Page]:
    """The run's keys grouped by task and map index, with their task instances: two queries a page."""
    page = paginate(
        with_previews(TaskStateStore.objects.filter(dag_run=run)), ["task_id", "map_index", "key", "id"], cursor, size
    )
    return _blocks(run, page.items), page


# Airflow's DAG run states in which tasks may still write state: their pages refresh themselves.
LIVE_RUN_STATES = ("queued", "running")
AUTO_REFRESH_SECONDS = 10


def auto_refreshes(run: DagRun) -> bool:
    """Whether the pages of ``run`` poll for new state: while it is queued or running, not once finished."""
    return run.state in LIVE_RUN_STATES


@dataclass(frozen=True)
class TaskScope:
    """A task instance as Airflow's API addresses it."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1

    @classmethod
    def of(cls, row) -> TaskScope:
        return cls(row.dag_id, row.run_id, row.task_id, row.map_index)

    def as_audit_scope(self) -> dict:
        return {"dag_id": self.dag_id, "run_id": self.run_id, "task_id": self.task_id, "map_index": self.map_index}


def scope_keys(scope: TaskScope) -> QuerySet:
    return TaskStateStore.objects.filter(
        dag_id=scope.dag_id, run_id=scope.run_id, task_id=scope.task_id, map_index=scope.map_index
    )


def task_instances(scope: TaskScope, any_map_index: bool = False) -> QuerySet:
    """The task instance of ``scope`` (or every map index of its task)."""
    instances = TaskInstance.objects.filter(dag_id=scope.dag_id, run_id=scope.run_id, task_id=scope.task_id)
    return instances if any_map_index else instances.filter(map_index=scope.map_index)


def task_map_indexes(scope: TaskScope) -> list[int]:
    """The map indexes of the task instances of ``scope``'s task in its run, in order: ``[-1]`` for a task
    that is not mapped (or not expanded yet), ``[]`` for a task without a task instance."""
    return list(task_instances(scope, any_map_index=True).order_by("map_index").values_list("map_index", flat=True))


_RUN_AND_INSTANCE = (
    "SELECT r.id, EXISTS (SELECT 1 FROM task_instance t WHERE t.dag_id = r.dag_id AND t.run_id = r.run_id "
    "AND t.task_id = %s{map_index}) FROM dag_run r WHERE r.dag_id = %s AND r.run_id = %s"
)


def require_task_instance(scope: TaskScope, any_map_index: bool = False) -> DagRun:
    """The DAG run of an existing task instance; NotFound in Airflow's words otherwise. One plain query: every
    write through the API starts with it."""
    found = None
    if -1 <= scope.map_index < 2**31:  # beyond an integer column, no such task instance
        sql = _RUN_AND_INSTANCE.format(map_index="" if any_map_index else " AND t.map_index = %s")
        params = [scope.task_id, *([] if any_map_index else [scope.map_index]), scope.dag_id, scope.run_id]
        with connections[airflow_alias()].cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchone()
    if found is None or not found[1]:
        addressed_by = "all_map_indices=True" if any_map_index else f"map_index={scope.map_index}"
        raise NotFound(
            f"Task instance not found for dag_id={scope.dag_id!r}, run_id={scope.run_id!r}, "
            f"task_id={scope.task_id!r}, {addressed_by}"
        )
    return DagRun(id=found[0], dag_id=scope.dag_id, run_id=scope.run_id)


def instance_keys(run: DagRun, task_id: str, map_index: int | None) -> QuerySet:
    keys = TaskStateStore.objects.filter(dag_run=run, task_id=task_id)
    return keys if map_index is None else keys.filter(map_index=map_index)


def instance_state(run: DagRun, task_id: str, map_index: int, cursor: str | None = None, size: int = 100) -> Page:
    return paginate(with_previews(instance_keys(run, task_id, map_index)), ["key", "id"], cursor, size)


def map_indexes_with_state(run: DagRun, task_id: str) -> list[int]:
    return sorted(set(instance_keys(run, task_id, None).values_list("map_index", flat=True).distinct()))


ALL_MAP_INDEXES = "all"


@dataclass
class TaskView:
    """A task's page in a run: one map index (``map_index``), or every map index of a mapped task
    (``map_index`` None, ``blocks`` by map index). ``task_instance``: the one shown (None for all, or if it
    does not exist); ``map_indexes``: those with state; ``mapped``: the task has map indexes (task instances
    or keys with ``map_index >= 0``); ``has_keys``: what is shown has keys (the actions need some);
    ``first_instance``: the lowest map index with a task instance (where a key can be added)."""

    map_index: int | None
    task_instance: TaskInstance | None
    map_indexes: list[int]
    mapped: bool
    page: Page
    blocks: list[InstanceBlock]
    has_keys: bool
    first_instance: int | None

    @property
    def every_map_index(self) -> bool:
        return self.map_index is None


def task_view(run: DagRun, task_id: str, map_index: str | None, cursor: str | None = None, size: int = 100) -> TaskView:
    """The task's page for the ``map_index`` parameter: a number, ``all`` (every map index), or absent or not a
    number: the unmapped task instance (-1) if it exists or the task is not mapped, else every map index (a
    mapped task has no map index -1)."""
    instances = TaskInstance.objects.filter(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id)
    map_indexes = map_indexes_with_state(run, task_id)
    first_instance = instances.order_by("map_index").values_list("map_index", flat=True).first()
    mapped = (first_instance is not None and first_instance >= 0) or any(mi >= 0 for mi in map_indexes)
    try:
        chosen: int | None = int(map_index)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        chosen = None if map_index == ALL_MAP_INDEXES or (mapped and first_instance != -1) else -1
    if chosen is None:
        page = paginate(with_previews(instance_keys(run, task_id, None)), ["map_index", "key", "id"], cursor, size)
        groups = _blocks(run, page.items)
        blocks, instance = (groups[0].instances if groups else []), None
    else:
        page = instance_state(run, task_id, chosen, cursor, size)
        blocks, instance = [], instances.filter(map_index=chosen).first()
    has_keys = bool(page.items) or instance_keys(run, task_id, chosen).exists()
    return TaskView(chosen, instance, map_indexes, mapped, page, blocks, has_keys, first_instance)


def get_task_key(key_id: int, *, scope: Scope) -> TaskStateStore:
    key = TaskStateStore.objects.select_related("dag_run").filter(pk=key_id).first()
    if key is None or not scope.allows_dag(key.dag_id):
        raise NotFound(f"No task state key with id {key_id}: it may have been deleted.")
    return key


# Assets -------------------------------------------------------------------------------------------
def _active() -> IsNull:
    """Whether the asset is active: a probe of asset_active's primary key per asset. Not ``Exists``: PostgreSQL
    turns an EXISTS in a select list into a hash of the whole asset_active table (25 ms at 50,000 assets), where
    a scalar subquery stays one index probe per row of the page."""
    probe = AssetActive.objects.filter(name=OuterRef("name"), uri=OuterRef("uri")).values("name")[:1]
    return IsNull(Subquery(probe), False)


def assets_with_key_counts(scope: Scope) -> QuerySet:
    """The assets in ``scope``, each with ``key_count`` (None for none), without their ``extra``."""
    key_count = (
        AssetStateStore.objects.filter(asset=OuterRef("pk"))
        .order_by()
        .values("asset")
        .annotate(n=Count("key"))
        .values("n")
    )
    return scoped_assets(scope).defer("extra").annotate(key_count=Subquery(key_count))


def assets(cursor: str | None = None, q: str = "", with_state: bool = False, size: int = 50, *, scope: Scope) -> Page:
    """Assets with their number of keys and whether they are active: one query a page."""
    rows = assets_with_key_counts(scope).annotate(active=_active())
    if q:
        rows = rows.filter(Q(name__icontains=q) | Q(uri__icontains=q) | Q(group__icontains=q))
    if with_state:
        rows = rows.filter(Exists(AssetStateStore.objects.filter(asset=OuterRef("pk"))))
    return paginate(rows, ["id"], cursor, size)


def get_asset(asset_id: int, *, scope: Scope) -> Asset:
    """An asset by id; one out of ``scope`` is NotFound in the same words as a missing one."""
    try:
        return scoped_assets(scope).annotate(active=_active()).defer("extra").get(pk=asset_id)
    except Asset.DoesNotExist:
        raise NotFound(f"Asset with id {asset_id} not found") from None


def asset_state(asset: Asset, cursor: str | None = None, size: int = 100) -> Page:
    return paginate(with_previews(AssetStateStore.objects.filter(asset=asset)), ["key"], cursor, size)


def get_asset_key(asset_id: int, key: str, *, scope: Scope) -> AssetStateStore:
    row = AssetStateStore.objects.select_related("asset").filter(asset_id=asset_id, key=key).first()
    if row is None or not scope.allows_asset(row.asset.name, row.asset.uri):
        raise NotFound(f"Asset {asset_id} has no key {key!r}: it may have been deleted.")
    return row


def writer_run(key: AssetStateStore, *, scope: Scope) -> DagRun | None:
    """The DAG run of the task that last wrote an asset key, when it still exists and is in ``scope``."""
    if key.last_updated_by_kind != "task" or not key.last_updated_by_dag_id:
        return None
    if not scope.allows_dag(key.last_updated_by_dag_id):
        return None
    return DagRun.objects.filter(dag_id=key.last_updated_by_dag_id, run_id=key.last_updated_by_run_id).first()


PREVIEW_CHARS = 160


REF_PREFIX = TaskStateStore.REF_PREFIX  # a worker-side reference's stored text starts so


def with_previews(rows: QuerySet) -> QuerySet:
    """Rows with ``preview`` (the value's first characters), ``size`` and ``is_ref`` (a worker-side
    reference), instead of the whole value: a page never loads megabytes of values."""
    return rows.defer("value").annotate(
        preview=Substr("value", 1, PREVIEW_CHARS),
        size=Length("value"),
        is_ref=Case(
            When(value__startswith=REF_PREFIX, then=Value(True)), default=Value(False), output_field=BooleanField()
        ),
    )


# Airflow's REST API reads (offset pagination and total_entries over one task instance or asset) ------
def task_keys_page(dag_id: str, run_id: str, task_id: str, map_index: int, offset: int, limit: int, *, scope: Scope):
    """One page of a task instance's keys by key, and their number (an unknown task instance has none)."""
    scope.require_dag(dag_id)
    rows = TaskStateStore.objects.filter(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index)
    return list(rows.order_by("key")[offset : offset + limit]), rows.count()


def task_key_in(dag_id: str, run_id: str, task_id: str, map_index: int, key: str, *, scope: Scope) -> TaskStateStore:
    scope.require_dag(dag_id)
    row = TaskStateStore.objects.filter(
        dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index, key=key
    ).first()
    if row is None:
        raise NotFound(f"Task state store key {key!r} not found")
    return row


def require_asset(asset_id: int, *, scope: Scope) -> None:
    if not scoped_assets(scope).filter(pk=asset_id).exists():
        raise NotFound(f"Asset with id {asset_id} not found")


def asset_keys_page(asset_id: int, offset: int, limit: int, *, scope: Scope):
    require_asset(asset_id, scope=scope)
    rows = AssetStateStore.objects.filter(asset_id=asset_id)
    return list(rows.order_by("key")[offset : offset + limit]), rows.count()


def asset_key_in(asset_id: int, key: str, *, scope: Scope) -> AssetStateStore:
    require_asset(asset_id, scope=scope)
    row = AssetStateStore.objects.filter(asset_id=asset_id, key=key).first()
    if row is None:
        raise NotFound(f"Asset state store key {key!r} not found")
    return row


# Audit trail --------------------------------------------------------------------------------------
AUDIT_FILTERS = ("actor", "action", "via", "dag_id", "run_id", "task_id", "asset_id", "key", "since", "until")


@dataclass(frozen=True)
class AuditQuery:
    """Filters of the audit trail, the same for the Audit page and the API (``from_params``)."""

    actor: str = ""
    action: str = ""
    via: str = ""
    dag_id: str = ""
    run_id: str = ""
    task_id: str = ""
    asset_id: int | None = None
    key: str = ""
    since: datetime | None = None
    until: datetime | None = None

    @classmethod
    def from_params(cls, params) -> AuditQuery:
        """From a query string; an unknown action or via, a non-integer asset id or a date without a time
        zone is ``Invalid`` naming the parameter."""
        from .values import parse_datetime_aware

        values = {name: (params.get(name) or "").strip() for name in AUDIT_FILTERS}
        errors = {}
        if values["action"] and values["action"] not in AuditEvent.Action.values:
            errors["action"] = f"One of {', '.join(AuditEvent.Action.values)}."
        if values["via"] and values["via"] not in AuditEvent.Via.values:
            errors["via"] = f"One of {', '.join(AuditEvent.Via.values)}."
        asset_id = None
        if values["asset_id"]:
            try:
                asset_id = int(values["asset_id"])
            except ValueError:
                asset_id = None
            if asset_id is None or not 1 <= asset_id < 2**31:
                errors["asset_id"] = "An asset id is a whole number from 1 to 2147483647."
        times = {}
        for name in ("since", "until"):
            raw = params.get(name) or ""  # empty: no bound; anything else must be a date and time as it is
            if raw:
                try:
                    if raw != raw.strip():
                        raise Invalid({name: "A date and time without surrounding spaces."})
                    times[name] = parse_datetime_aware(raw, name)
                except ValidationError as exc:
                    errors[name] = exc.message_dict[name][0]
        if errors:
            raise Invalid(errors)
        return cls(
            **{n: values[n] for n in ("actor", "action", "via", "dag_id", "run_id", "task_id", "key")},
            asset_id=asset_id,
            since=times.get("since"),
            until=times.get("until"),
        )

    @property
    def active(self) -> bool:
        return any(getattr(self, name) not in ("", None) for name in AUDIT_FILTERS)


def audit_scope_q(scope: Scope) -> Q:
    """The events a scoped user may see: task events of one of their DAGs, asset events of one of their
    assets. Events spanning several DAGs or assets (no single dag_id or asset) and GC runs are not theirs."""
    if not scope.restricted:
        return Q()
    task = Q(store="task", dag_id__isnull=False) & scope.dag_q("dag_id") if scope.dags != () else Q(pk__in=[])
    asset = Q(store="asset", asset_id__isnull=False) & (scope.asset_q("asset_")) if scope.assets != () else Q(pk__in=[])
    return task | asset


def get_audit_event(event_id: int, *, scope: Scope) -> AuditEvent:
    try:
        return AuditEvent.objects.select_related("restored_from").filter(audit_scope_q(scope)).get(pk=event_id)
    except (AuditEvent.DoesNotExist, ValueError, TypeError):
        raise NotFound(f"Audit event {event_id} not found") from None


def audit_keys(event: AuditEvent, cursor: str | None = None, size: int = 100) -> Page:
    return paginate(event.keys.all(), ["id"], cursor, size)


def task_key_history(key: TaskStateStore, limit: int = 50) -> list[AuditKey]:
    """Every audited change of this key (by its scope and name: it outlives the row), newest first."""
    rows = AuditKey.objects.filter(
        dag_id=key.dag_id, run_id=key.run_id, task_id=key.task_id, map_index=key.map_index, key=key.key
    )
    return list(rows.select_related("event").order_by("-id")[:limit])


def asset_key_history(asset_id: int, key: str, limit: int = 50) -> list[AuditKey]:
    rows = AuditKey.objects.filter(asset_id=asset_id, key=key)
    return list(rows.select_related("event").order_by("-id")[:limit])


# The dashboard's Audit page and downloads ---------------------------------------------------------
def audit_event_rows(query: AuditQuery, stores: list[str], *, scope: Scope) -> QuerySet:
    """The events ``query`` matches among those of ``stores`` in ``scope``, unordered: what the Audit page pages
    through and its export downloads."""
    # Events without a store: GC runs are task state's; orphans runs (objects of both stores) need both.
    no_store = Q(store="") if "asset" in stores else Q(store="") & ~Q(action=AuditEvent.Action.ORPHANS)
    rows = AuditEvent.objects.filter(Q(store__in=stores) | (no_store if "task" in stores else Q(pk__in=[])))
    rows = rows.filter(audit_scope_q(scope))
    for name in ("actor", "action", "via", "dag_id", "run_id", "task_id", "asset_id"):
        value = getattr(query, name)
        if value not in ("", None):
            rows = rows.filter(**{name: value})
    if query.key:
        rows = rows.filter(Exists(AuditKey.objects.filter(event=OuterRef("pk"), key=query.key)))
    if query.since:
        rows = rows.filter(at__gte=query.since)
    if query.until:
        rows = rows.filter(at__lt=query.until)
    return rows


def audit_events(
    query: AuditQuery, stores: list[str], cursor: str | None = None, size: int = 50, *, scope: Scope
) -> Page:
    """Events of ``stores`` (those a user may view; GC runs, which have no store, count as task state),
    newest first, keyset-paginated by id; each with ``restored_by`` (the restores made of it): two queries a
    page, each filter an index range or a key lookup."""
    page = paginate(audit_event_rows(query, stores, scope=scope), ["-id"], cursor, size)
    restored_by: dict[int, list[int]] = {}
    for event_id, restore_id in AuditEvent.objects.filter(restored_from__in=[e.pk for e in page.items]).values_list(
        "restored_from", "id"
    ):
        restored_by.setdefault(event_id, []).append(restore_id)
    for event in page.items:
        event.restored_by = sorted(restored_by.get(event.pk, []))
    return page


def first_keys_of(events: list[AuditEvent], per_event: int) -> dict[int, list[AuditKey]]:
    """The first ``per_event`` keys of each event (one more tells that there are others), in one query."""
    numbered = AuditKey.objects.filter(event__in=[e.pk for e in events]).annotate(
        n=Window(RowNumber(), partition_by=[F("event_id")], order_by=F("id").asc())
    )
    found: dict[int, list[AuditKey]] = {e.pk: [] for e in events}
    for key in numbered.filter(n__lte=per_event + 1).order_by("event_id", "id"):
        found[key.event_id].append(key)
    return found


def confirmed_keys(
    rows: QuerySet | None = None, *, asset_id: int | None = None, keys: list[str] | None = None, confirmed_at
) -> QuerySet:
    """A confirmation's download: the rows written up to ``confirmed_at``, which the dialog sets to its
    latest listed ``updated_at`` (or its own time, if later), so that every key it lists is in, whatever
    the writers' clocks (confirming acts on the listed keys only: ``services.Listing``). ``rows`` is a
    task selection's queryset; without it, the asset's keys (all, or the ``keys`` named)."""
    if rows is None:
        rows = AssetStateStore.objects.filter(asset_id=asset_id)
        if keys is not None:
            rows = rows.filter(key__in=keys)
    return rows.filter(updated_at__lte=confirmed_at)
