"""Reads of the state store. Views, the API and commands call these; they hold no SQL of their own.

Every list is keyset-paginated (``pagination.paginate``) and runs a fixed number of queries whatever
the number of rows; none runs an exact ``COUNT(*)`` over a whole state table.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

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

from statestore_admin.airflow.config import METASTORE_BACKEND, ConfigValue, airflow_config
from statestore_admin.airflow.models import Asset, AssetActive, AssetStateStore, DagRun, TaskInstance, TaskStateStore
from statestore_admin.airflow.router import airflow_alias

from .errors import Invalid, NotFound
from .models import AuditEvent, AuditKey, GcRun
from .pagination import Page, decode_cursor, encode_cursor, paginate
from .scopes import Scope

EXPIRING_WINDOW = timedelta(hours=24)
ESTIMATE_ABOVE = 100_000  # rows; above this the overview shows PostgreSQL's estimate

# Key status --------------------------------------------------------------------------------------
EXPIRED, EXPIRING, NEVER, LIVE = "expired", "expiring", "never", "live"
STATUSES = {
    EXPIRED: "expired, awaiting GC",
    EXPIRING: "expiring within 24 h",
    NEVER: "never expires",
    LIVE: "not expired",
}


def status_of(expires_at: datetime | None, now: datetime) -> str:
    if expires_at is None:
        return NEVER
    if expires_at < now:
        return EXPIRED
    if expires_at < now + EXPIRING_WINDOW:
        return EXPIRING
    return LIVE


def status_filter(status: str, now: datetime) -> Q:
    return {
        EXPIRED: Q(expires_at__lt=now),
        EXPIRING: Q(expires_at__gte=now, expires_at__lt=now + EXPIRING_WINDOW),
        NEVER: Q(expires_at__isnull=True),
        LIVE: Q(expires_at__gte=now) | Q(expires_at__isnull=True),
    }[status]


# Overview -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoreTotals:
    """Each store's number of keys; None for a store the user may not view (its count is hidden too)."""

    task_keys: int | None
    asset_keys: int | None
    task_keys_estimated: bool | None = False
    asset_keys_estimated: bool | None = False


def _row_count(model) -> tuple[int, bool]:
    """Exact count for small tables; PostgreSQL's planner estimate above ``ESTIMATE_ABOVE`` rows."""
    connection = connections[airflow_alias()]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass", [model._meta.db_table])
            row = cursor.fetchone()
        if row and row[0] >= ESTIMATE_ABOVE:
            return int(row[0]), True
    return model.objects.count(), False


def store_totals(scope: Scope, stores: tuple[str, ...] = ("task", "asset")) -> StoreTotals:
    """The sizes of ``stores`` (the others None, not counted); for a scoped user, exact counts of their
    DAGs' and assets' keys."""
    counted = {}
    for store, model, scoped in (
        ("task", TaskStateStore, scoped_task_keys),
        ("asset", AssetStateStore, scoped_asset_keys),
    ):
        if store not in stores:
            counted[store] = (None, None)
        elif scope.restricted:
            counted[store] = (scoped(scope).count(), False)
        else:
            counted[store] = _row_count(model)
    return StoreTotals(counted["task"][0], counted["asset"][0], counted["task"][1], counted["asset"][1])


# Scopes (state.scopes) -----------------------------------------------------------------------------
def all_dag_ids_with_state() -> list[str]:
    """Every dag_id of task_state_store, by a loose index scan of its lookup index (one probe per DAG)."""
    with connections[airflow_alias()].cursor() as db:
        db.execute(_DISTINCT_DAGS.format(like="", like_t=""), ["", 2**31 - 1])
        return [row[0] for row in db.fetchall()]


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
    "custom": "A custom [state_store] backend keeps state elsewhere: these tables may be empty or stale, "
    "and garbage collection deletes nothing.",
    "worker": "A worker-side backend stores the values elsewhere: the values here are references "
    '({"__airflow_state_ref__": …}) to objects this dashboard cannot read or delete.',
}


@dataclass
class Overview:
    totals: StoreTotals
    expired: int | None
    expiring: int | None
    never: int | None
    gc_runs: list[GcRun] | None  # None: not shown to this user
    config: list[ConfigValue]
    config_error: str | None
    backend_modes: list[tuple[str, str]] = field(default_factory=list)
    retention_days: int | None = None


def overview(now: datetime, *, scope: Scope, stores: tuple[str, ...]) -> Overview:
    """The overview's figures of the ``stores`` the user may view (the others are None and not counted):
    a scoped user's count only their DAGs and assets. GC runs delete task state and span every DAG: they
    are shown to unscoped viewers of task state only."""
    # One count per status, each a range of idx_task_state_store_expires_at (an index-only scan on
    # PostgreSQL): several times faster than one aggregate pass over a large table.
    counts = {
        status: scoped_task_keys(scope).filter(status_filter(status, now)).count() if "task" in stores else None
        for status in (EXPIRED, EXPIRING, NEVER)
    }
    config = airflow_config()
    try:
        values = config.state_store_values()
        error = None
    except Exception as exc:  # an invalid option: show it rather than fail the page
        values, error = [], str(exc)
    modes = []
    by_name = {(v.option.section, v.option.key): v.value for v in values}
    backend = by_name.get(("state_store", "backend"))
    if backend:
        modes.append(
            (
                "metastore" if backend == METASTORE_BACKEND else "custom",
                BACKEND_MODES["metastore" if backend == METASTORE_BACKEND else "custom"],
            )
        )
    if by_name.get(("workers", "state_store_backend")):
        modes.append(("worker", BACKEND_MODES["worker"]))
    return Overview(
        totals=store_totals(scope, stores),
        gc_runs=list(GcRun.objects.all()[:5]) if "task" in stores and not scope.restricted else None,
        config=values,
        config_error=error,
        backend_modes=modes,
        retention_days=by_name.get(("state_store", "default_retention_days")),
        **counts,
    )


@dataclass(frozen=True)
class LargeValue:
    store: str
    key: str
    size: int
    task_key: TaskStateStore | None = None
    asset_key: AssetStateStore | None = None


def largest_values(*, scope: Scope, stores: tuple[str, ...] = ("task", "asset"), limit: int = 10):
    """The biggest values of ``stores`` in ``scope`` (a scan of both tables: loaded on its own, after the page)."""
    task = scoped_task_keys(scope).annotate(size=Length("value")).order_by("-size", "id")[:limit]
    asset = (
        scoped_asset_keys(scope)
        .select_related("asset")
        .annotate(size=Length("value"))
        .order_by("-size", "asset_id", "key")[:limit]
    )
    rows = [LargeValue("task", k.key, k.size, task_key=k) for k in task] if "task" in stores else []
    rows += [LargeValue("asset", k.key, k.size, asset_key=k) for k in asset] if "asset" in stores else []
    return sorted(rows, key=lambda r: -r.size)[:limit]


# DAGs and runs ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DagSummary:
    dag_id: str
    keys: int
    runs: int
    expired: int
    last_updated: datetime | None


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


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def dags_with_state(
    now: datetime, cursor: str | None = None, prefix: str = "", size: int = 50, *, scope: Scope
) -> Page:
    """DAGs that have task state, by dag_id, found by a loose index scan of (dag_id, …): two queries
    (a scoped user's: their DAGs among every dag_id, then the counts)."""
    decoded = decode_cursor(cursor, 1)
    after = decoded[0] if decoded and isinstance(decoded[0], str) else ""
    allowed = scoped_dag_ids(scope)
    if allowed is not None:
        dag_ids = [d for d in allowed if d > after and d.startswith(prefix)][: size + 1]
    else:
        like = " AND dag_id LIKE %s ESCAPE '\\'" if prefix else ""
        sql = _DISTINCT_DAGS.format(like=like, like_t=like.replace("dag_id", "t.dag_id"))
        params = [after, _like_prefix(prefix), _like_prefix(prefix), size + 1] if prefix else [after, size + 1]
        with connections[airflow_alias()].cursor() as db:
            db.execute(sql, params)
            dag_ids = [row[0] for row in db.fetchall()]
    more = len(dag_ids) > size
    dag_ids = dag_ids[:size]
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
    items = [
        DagSummary(d, stats[d]["keys"], stats[d]["runs"], stats[d]["expired"], stats[d]["last_updated"])
        for d in dag_ids
        if d in stats
    ]
    return Page(items, encode_cursor([dag_ids[-1]]) if more else None, cursor)


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


def run_state(run: DagRun, cursor: str | None = None, size: int = 200) -> tuple[list[TaskGroup], Page]:
    """The run's keys grouped by task and map index, with their task instances: two queries a page."""
    page = paginate(
        with_previews(TaskStateStore.objects.filter(dag_run=run)), ["task_id", "map_index", "key", "id"], cursor, size
    )
    tasks = {item.task_id for item in page.items}
    instances = {
        (ti.task_id, ti.map_index): ti
        for ti in TaskInstance.objects.filter(dag_id=run.dag_id, run_id=run.run_id, task_id__in=tasks)
    }
    groups: OrderedDict[str, OrderedDict[int, InstanceBlock]] = OrderedDict()
    for item in page.items:
        blocks = groups.setdefault(item.task_id, OrderedDict())
        block = blocks.get(item.map_index)
        if block is None:
            block = blocks[item.map_index] = InstanceBlock(
                item.map_index, instances.get((item.task_id, item.map_index)), []
            )
        block.keys.append(item)
    return [TaskGroup(task_id, list(blocks.values())) for task_id, blocks in groups.items()], page


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


def get_task_instance(run: DagRun, task_id: str, map_index: int) -> TaskInstance | None:
    return TaskInstance.objects.filter(
        dag_id=run.dag_id, run_id=run.run_id, task_id=task_id, map_index=map_index
    ).first()


def instance_keys(run: DagRun, task_id: str, map_index: int | None) -> QuerySet:
    keys = TaskStateStore.objects.filter(dag_run=run, task_id=task_id)
    return keys if map_index is None else keys.filter(map_index=map_index)


def instance_state(run: DagRun, task_id: str, map_index: int, cursor: str | None = None, size: int = 100) -> Page:
    return paginate(with_previews(instance_keys(run, task_id, map_index)), ["key", "id"], cursor, size)


def map_indexes_with_state(run: DagRun, task_id: str) -> list[int]:
    return sorted(set(instance_keys(run, task_id, None).values_list("map_index", flat=True).distinct()))


def get_task_key(key_id: int, *, scope: Scope) -> TaskStateStore:
    key = TaskStateStore.objects.select_related("dag_run").filter(pk=key_id).first()
    if key is None or not scope.allows_dag(key.dag_id):
        raise NotFound(f"No task state key with id {key_id}: it may have been deleted.")
    return key


# Assets -------------------------------------------------------------------------------------------
def _active() -> Exists:
    return Exists(AssetActive.objects.filter(name=OuterRef("name"), uri=OuterRef("uri")))


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


def asset_keys_for(asset: Asset, keys: list[str] | None = None) -> QuerySet:
    """The asset's keys (all, or those named), with previews, by key."""
    rows = with_previews(AssetStateStore.objects.filter(asset=asset)).order_by("key")
    return rows if keys is None else rows.filter(key__in=keys)


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
def audit_events(
    query: AuditQuery, stores: list[str], cursor: str | None = None, size: int = 50, *, scope: Scope
) -> Page:
    """Events of ``stores`` (those a user may view; GC runs, which have no store, count as task state),
    newest first, keyset-paginated by id; each with ``restored_by`` (the restores made of it): two queries a
    page, each filter an index range or a key lookup."""
    rows = AuditEvent.objects.filter(store__in=[*stores, *([""] if "task" in stores else [])]).filter(
        audit_scope_q(scope)
    )
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
    page = paginate(rows, ["-id"], cursor, size)
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
    """What a confirmation opened at ``confirmed_at`` acts on, as the services' deletes select it: the rows
    not written since. ``rows`` is a task selection's queryset; without it, the asset's keys (all, or the
    ``keys`` named)."""
    if rows is None:
        rows = AssetStateStore.objects.filter(asset_id=asset_id)
        if keys is not None:
            rows = rows.filter(key__in=keys)
    return rows.filter(updated_at__lte=confirmed_at)
