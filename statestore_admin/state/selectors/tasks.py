"""A run's and a task instance's keys: the run page (a table a task, its tasks' capped counts), the task page,
their sort orders and key filter, live refresh and one key. On Airflow 3.4 each row carries its coordinate
(task, region, index) with its path from ``regions.run_regions``, so the keys of one iteration or map position
are never shown as another's."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from uuid import UUID

from django.db import connections
from django.db.models import CharField, DateTimeField, F, Func, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce, Length
from django.utils.translation import gettext as _

from statestore_admin.access.scopes import Scope
from statestore_admin.airflow.models import DagRun, TaskInstance, TaskStateStore
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.core.counting import CAPPED, Figure, capped_count
from statestore_admin.core.errors import NotFound
from statestore_admin.core.pagination import Page, decode_cursor_for, paginate
from statestore_admin.state.selectors.asset_keys import with_previews
from statestore_admin.state.selectors.regions import Coordinate, RunRegions, regions_enabled, run_regions


@dataclass
class TaskGroup:
    """One task's keys on a page of its run, in one table: each row with its ``coordinate`` (Airflow 3.4's
    region path, else None), its ``task_instance`` and whether a clear ``replaced`` that execution.
    ``count``: the task's keys matching the page's filter (a capped ``Figure``), when counted."""

    task_id: str
    keys: list[TaskStateStore]
    count: Figure | None = None

    @property
    def regional(self) -> bool:
        return any(row.region_id != SENTINEL_REGION_ID for row in self.keys)

    @property
    def mapped(self) -> bool:
        return any(row.map_index >= 0 for row in self.keys)

    @property
    def coordinates(self) -> list:
        """The coordinates of the rows, each once, in the order shown."""
        seen: dict = {}
        for row in self.keys:
            seen.setdefault((row.region_id, row.map_index), row)
        return list(seen.values())


def _current_first(instances) -> dict:
    """Task instances by (task, region, index): the current execution where a replaced one shares them."""
    found: dict = {}
    for ti in instances:
        coordinate = (ti.task_id, ti.region_id, ti.map_index)
        if coordinate not in found or ti.working_set is True:
            found[coordinate] = ti
    return found


def _replaced(row) -> bool:
    """A clear re-created this execution: its keys are those of the replaced one (a fork covers its
    coordinate, or its task instance left the working set)."""
    if row.coordinate is not None and row.coordinate.replaced:
        return True
    return row.task_instance is not None and row.task_instance.working_set is not True


def _with_instances(run: DagRun, items: list[TaskStateStore], regions: RunRegions | None) -> None:
    """Give each row of a page its ``task_instance``, ``coordinate`` and ``replaced``: one query, of the task
    instances of the page's tasks and map indexes only (a mapped task may have thousands). On Airflow 3.4
    (``regions``) the rows of one task are then shown in the coordinates' order, newest last, within the page."""
    tasks, map_indexes = {item.task_id for item in items}, {item.map_index for item in items}
    instances = TaskInstance.objects.filter(
        dag_id=run.dag_id, run_id=run.run_id, task_id__in=tasks, map_index__in=map_indexes
    )
    if regions is not None:
        instances = instances.filter(region_id__in={item.region_id for item in items})
    by_coordinate = _current_first(instances) if items else {}
    for item in items:
        item.task_instance = by_coordinate.get((item.task_id, item.region_id, item.map_index))
        item.coordinate = regions.coordinate(item.region_id, item.map_index) if regions is not None else None
        item.replaced = _replaced(item)


def _grouped(items: list[TaskStateStore], regional: bool, sort: str) -> list[TaskGroup]:
    groups: OrderedDict[str, TaskGroup] = OrderedDict()
    for item in items:
        groups.setdefault(item.task_id, TaskGroup(item.task_id, [])).keys.append(item)
    if regional and not sort:  # region ids sort as UUIDs: show the coordinates' order instead
        for group in groups.values():
            group.keys.sort(key=lambda row: row.coordinate.order)
    return list(groups.values())


# Sorting and filtering a run's or a task's keys ----------------------------------------------------------------
# The key order is natural on the trailing number (key_2 before key_10): by the key without its trailing digits,
# then by length, then by the key itself. Each is an SQL expression that SQLite and PostgreSQL both compute
# (rtrim with a set of characters, length), so pages stay keyset-paginated in that order; no index serves it, so
# each page sorts the rows of its run or task (a top-N sort). Digits inside a key (part_2_of) sort as text.
SORTS = ("", "key", "-key", "size", "-size", "updated", "-updated", "expiry", "-expiry")
_NATURAL = ["key_stem", "key_length", "key"]
_SORT_FIELDS = {"key": _NATURAL, "size": ["size"], "updated": ["updated_at"], "expiry": ["expiry_order"]}
_NEVER = datetime(9999, 12, 31, tzinfo=UTC)  # "never expires" sorts after every expiry
# What each computed ordering value of a cursor must be (a cursor is user input): else the first page.
_CURSOR_TYPES = {"key_stem": str, "key_length": int, "size": int, "expiry_order": datetime, "region_id": str}


def key_sort(value: str | None) -> str:
    """A page's ``sort`` parameter: one of ``SORTS`` ("" the default: by position, then natural key order)."""
    return value if value in SORTS else ""


def _sorted(rows: QuerySet, position: list[str], sort: str) -> tuple[QuerySet, list[str]]:
    """``rows`` with what ``sort`` orders by, and the unique ordering: the task, then by default ``position``
    (the map index, on 3.4 the region and index) and the natural key order; else the sort's column."""
    rows = rows.annotate(
        key_stem=Func(F("key"), Value("0123456789"), function="RTRIM", output_field=CharField()),
        key_length=Length("key"),
    )
    if sort.lstrip("-") == "expiry":
        rows = rows.annotate(expiry_order=Coalesce("expires_at", Value(_NEVER), output_field=DateTimeField()))
    if not sort:
        return rows, ["task_id", *position, *_NATURAL, "id"]
    sign = "-" if sort.startswith("-") else ""
    return rows, ["task_id", *(sign + name for name in [*_SORT_FIELDS[sort.lstrip("-")], "id"])]


def _cursor_for(cursor: str | None, ordering: list[str]) -> str | None:
    """``cursor`` when its values fit ``ordering`` (a region id one, a length a number …), else None."""
    values = decode_cursor_for(cursor, TaskStateStore, ordering)
    if values is None:
        return None
    for name, value in zip(ordering, values, strict=True):
        expected = _CURSOR_TYPES.get(name.lstrip("-"))
        if expected is not None and (not isinstance(value, expected) or isinstance(value, bool)):
            return None
        if name == "region_id":
            try:
                UUID(value)
            except ValueError:
                return None
    return cursor


def _keys_page(rows: QuerySet, position: list[str], sort: str, prefix: str, cursor: str | None, size: int) -> Page:
    """A keyset page of ``rows`` (with previews) in ``sort``'s order, only keys starting with ``prefix`` (any
    case)."""
    if prefix:
        rows = rows.filter(key__istartswith=prefix)
    rows, ordering = _sorted(with_previews(rows), position, sort)
    return paginate(rows, ordering, _cursor_for(cursor, ordering), size, value_of=_cursor_value)


def _position() -> list[str]:
    return ["region_id", "map_index"] if regions_enabled() else ["map_index"]


def _cursor_value(row, name: str):
    value = getattr(row, name)
    return str(value) if isinstance(value, UUID) else value


# The keys a run page lists at a time. A key's row is about 1 KB of HTML on Airflow 3.4 (its region path, its
# iteration's decision and its task instance's link beside the key, value, size, times and menu): 50 keep a run
# page under 100 KB however many keys the run holds (docs/airflow.md, "A long loop on its run's page").
RUN_PAGE = 50


def run_state(
    run: DagRun,
    cursor: str | None = None,
    size: int = RUN_PAGE,
    regions: RunRegions | None = None,
    sort: str = "",
    prefix: str = "",
) -> tuple[list[TaskGroup], Page]:
    """A page of the run's keys, one group a task, in ``sort``'s order (``SORTS``), only keys starting with
    ``prefix``: with their task instances, two queries a page (and the run's regions on Airflow 3.4, unless
    given: ``run_regions``)."""
    if regions_enabled() and regions is None:
        regions = run_regions(run)
    page = _keys_page(TaskStateStore.objects.filter(dag_run=run), _position(), sort, prefix, cursor, size)
    _with_instances(run, page.items, regions if regions_enabled() else None)
    return _grouped(page.items, regions_enabled(), sort), page


# How many keys each task of a run has: at most RUN_TASKS_SHOWN tasks, each counted up to TASK_COUNT_CAP keys, so
# a run of 10M keys costs the same as one of 10,000 (one index probe per task, a bounded count each).
RUN_TASKS_SHOWN = 100
TASK_COUNT_CAP = 1_000
_DISTINCT_TASKS = """
WITH RECURSIVE tasks(task_id, n) AS (
    SELECT MIN(task_id), 1 FROM task_state_store WHERE dag_run_id = %s
    UNION ALL
    SELECT (SELECT MIN(t.task_id) FROM task_state_store t WHERE t.dag_run_id = %s AND t.task_id > tasks.task_id),
        n + 1
    FROM tasks WHERE tasks.task_id IS NOT NULL AND n < %s
)
SELECT task_id FROM tasks WHERE task_id IS NOT NULL
"""


@dataclass(frozen=True)
class RunTasks:
    """The tasks of a run with keys (``counts``: task id → capped ``Figure`` of its keys matching the filter),
    ``more``: the run has more tasks than are counted; ``matching``: the run's keys matching, capped at what
    one confirmation can list (``LISTED_MAX``)."""

    counts: dict[str, Figure]
    more: bool
    matching: Figure


def run_tasks(run: DagRun, prefix: str = "", listed_max: int = 10_000) -> RunTasks:
    """The run's tasks with keys, by a loose index scan of Airflow's unique index (dag_run_id, task_id, …): one
    probe a task, then a capped count of each task's keys starting with ``prefix`` (with one, only the tasks
    with such keys)."""
    with connections[airflow_alias()].cursor() as db:
        db.execute(_DISTINCT_TASKS, [run.pk, run.pk, RUN_TASKS_SHOWN + 1])
        task_ids = [row[0] for row in db.fetchall()]
    more = len(task_ids) > RUN_TASKS_SHOWN
    task_ids = task_ids[:RUN_TASKS_SHOWN]
    rows = TaskStateStore.objects.filter(dag_run=run)
    if prefix:
        rows = rows.filter(key__istartswith=prefix)
    counts = _capped_counts(rows, task_ids, TASK_COUNT_CAP)
    if prefix:  # the tasks with matching keys only
        counts = {task_id: figure for task_id, figure in counts.items() if figure.value}
    return RunTasks(counts, more, capped_count(rows, listed_max))


def _capped_counts(rows: QuerySet, task_ids: list[str], cap: int) -> dict[str, Figure]:
    """Each task's ``rows`` counted up to ``cap`` (exact, or "more than ``cap``"), in one statement: a UNION ALL of
    one bounded count per task (``count_up_to``'s subquery), so the page's queries do not grow with its tasks."""
    if not task_ids:
        return {}
    parts, params = [], []
    for task_id in task_ids:
        limited = rows.filter(task_id=task_id).annotate(one=RawSQL("1", ())).values("one")[: cap + 1]
        sql, sql_params = limited.query.get_compiler(using=limited.db).as_sql()
        parts.append(f"SELECT %s, (SELECT COUNT(*) FROM ({sql}) capped)")
        params += [task_id, *sql_params]
    with connections[rows.db].cursor() as db:
        db.execute(" UNION ALL ".join(parts), params)
        counted = dict(db.fetchall())
    return {
        task_id: Figure(cap, CAPPED) if counted[task_id] > cap else Figure(counted[task_id]) for task_id in task_ids
    }


# Airflow's DAG run states in which tasks may still write state: their pages refresh themselves.
LIVE_RUN_STATES = ("queued", "running")
AUTO_REFRESH_SECONDS = 10


def auto_refreshes(run: DagRun) -> bool:
    """Whether the pages of ``run`` poll for new state: while it is queued or running, not once finished."""
    return run.state in LIVE_RUN_STATES


def instance_keys(run: DagRun, task_id: str, map_index: int | None) -> QuerySet:
    keys = TaskStateStore.objects.filter(dag_run=run, task_id=task_id)
    return keys if map_index is None else keys.filter(map_index=map_index)


def coordinate_keys(run: DagRun, task_id: str, map_index: int | None, region_id: UUID) -> QuerySet:
    """A task's keys in one Airflow 3.4 region: at ``map_index``, or at every index (None)."""
    return instance_keys(run, task_id, map_index).filter(region_id=region_id)


def shown_keys(run: DagRun, task_id: str, map_index: int | None, region_id: UUID | None) -> QuerySet:
    """The keys the task's page shows at these coordinates (its downloads list the same): a region's with
    ``region_id``; else, on Airflow 3.4, a number is the public map index (``_public_region``), so the keys
    of other loop iterations or expansions at that index are never merged in; ``map_index`` None is every
    coordinate."""
    if region_id is not None:
        return coordinate_keys(run, task_id, map_index, region_id)
    if map_index is None or not regions_enabled():
        return instance_keys(run, task_id, map_index)
    keys = instance_keys(run, task_id, None)
    instances = TaskInstance.objects.filter(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id)
    region = _public_region(instances, keys, task_id, map_index, run_regions(run))
    return keys.filter(region_id=region, map_index=map_index)


def instance_state(run: DagRun, task_id: str, map_index: int, cursor: str | None = None, size: int = 100) -> Page:
    return paginate(with_previews(instance_keys(run, task_id, map_index)), ["key", "id"], cursor, size)


def map_indexes_with_state(run: DagRun, task_id: str) -> list[int]:
    return sorted(set(instance_keys(run, task_id, None).values_list("map_index", flat=True).distinct()))


ALL_MAP_INDEXES = "all"


@dataclass
class TaskView:
    """A task's page in a run: one map index (``map_index``), or every map index of a mapped task
    (``map_index`` None: one table with a map index column). ``task_instance``: the one shown (None for all,
    or if it does not exist); ``map_indexes``: those with state; ``mapped``: the task has map indexes (task
    instances or keys with ``map_index >= 0``); ``has_keys``: what is shown has keys (the actions need some);
    ``first_instance``: the lowest map index with a task instance (where a key can be added). The page's rows
    carry ``task_instance``, ``coordinate`` and ``replaced`` as on the run page.

    On Airflow 3.4 a task in a region (a loop, a mapped task or group) is ``regional``: one coordinate is
    ``region_id`` and ``map_index`` (its path: ``coordinate``), every one is ``map_index`` None, its rows
    with their path; ``coordinates``: those with state, newest last. ``region_id`` is None when the page shows
    coordinates of several regions (no action then covers them all)."""

    map_index: int | None
    task_instance: TaskInstance | None
    map_indexes: list[int]
    mapped: bool
    page: Page
    has_keys: bool
    first_instance: int | None
    regional: bool = False
    region_id: UUID | None = SENTINEL_REGION_ID
    coordinate: Coordinate | None = None
    coordinates: list[Coordinate] = field(default_factory=list)

    @property
    def every_map_index(self) -> bool:
        return self.map_index is None

    @property
    def replaced(self) -> bool:
        if self.coordinate is not None and self.coordinate.replaced:
            return True
        return self.task_instance is not None and self.task_instance.working_set is not True

    @property
    def rows(self) -> list[TaskStateStore]:
        return self.page.items


def task_view(
    run: DagRun,
    task_id: str,
    map_index: str | None,
    cursor: str | None = None,
    size: int = 100,
    region_id: UUID | None = None,
    regions: RunRegions | None = None,
    sort: str = "",
    prefix: str = "",
) -> TaskView:
    """The task's page for the ``map_index`` parameter: a number, ``all`` (every map index), or absent or not a
    number: the unmapped task instance (-1) if it exists or the task is not mapped, else every map index (a
    mapped task has no map index -1). On Airflow 3.4, for a task in a region: ``region_id`` with a number is
    that coordinate; a number alone is the public map index (outside any region, or in the task's own
    top-level expansion, as Airflow's ``map_index`` means); else every coordinate. Keys in ``sort``'s order,
    only those starting with ``prefix``."""
    if not regions_enabled() and region_id not in (None, SENTINEL_REGION_ID):
        message = _("No region %(region)s in DAG run %(run_id)r: this Airflow has no regions.")
        raise NotFound(message % {"region": region_id, "run_id": run.run_id})
    if regions_enabled():
        regional = _regional_task_view(run, task_id, map_index, cursor, size, region_id, regions, sort, prefix)
        if regional is not None:
            return regional
    instances = TaskInstance.objects.filter(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id)
    map_indexes = map_indexes_with_state(run, task_id)
    first_instance = instances.order_by("map_index").values_list("map_index", flat=True).first()
    mapped = (first_instance is not None and first_instance >= 0) or any(mi >= 0 for mi in map_indexes)
    try:
        chosen: int | None = int(map_index)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        chosen = None if map_index == ALL_MAP_INDEXES or (mapped and first_instance != -1) else -1
    page = _keys_page(instance_keys(run, task_id, chosen), _position(), sort, prefix, cursor, size)
    _with_instances(run, page.items, None)
    instance = None if chosen is None else instances.filter(map_index=chosen).first()
    has_keys = bool(page.items) or instance_keys(run, task_id, chosen).exists()
    return TaskView(chosen, instance, map_indexes, mapped, page, has_keys, first_instance)


def _regional_task_view(
    run, task_id, map_index, cursor, size, region_id, regions, sort: str, prefix: str
) -> TaskView | None:
    """``task_view`` for a task with task instances or keys in a region (3.4); None for any other task, whose
    page stays as on 3.3."""
    keys = instance_keys(run, task_id, None)
    instances = TaskInstance.objects.filter(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id)
    in_region = ~Q(region_id=SENTINEL_REGION_ID)
    if region_id in (None, SENTINEL_REGION_ID) and not (
        keys.filter(in_region).exists() or instances.filter(in_region).exists()
    ):
        return None
    regions = run_regions(run) if regions is None else regions
    with_state = sorted(
        (regions.coordinate(r, i) for r, i in keys.values_list("region_id", "map_index").distinct()),
        key=lambda c: c.order,
    )
    map_indexes = sorted({c.index for c in with_state})
    try:
        chosen: int | None = int(map_index)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        chosen = None
    if chosen is not None and region_id is None:
        region_id = _public_region(instances, keys, task_id, chosen, regions)
    first = instances.filter(working_set=True).order_by("region_id", "map_index").first()
    first_instance = None if first is None else first.map_index
    if chosen is None:
        shown = keys.filter(region_id=region_id) if region_id is not None else keys
        page = _keys_page(shown, _position(), sort, prefix, cursor, size)
        _with_instances(run, page.items, regions)
        if not sort:
            page.items.sort(key=lambda row: row.coordinate.order)
        regions_shown = {c.region_id for c in with_state} if region_id is None else {region_id}
        only = next(iter(regions_shown)) if len(regions_shown) == 1 else None
        has_keys = bool(page.items) or shown.exists()
        view = TaskView(None, None, map_indexes, True, page, has_keys, first_instance, True, only)
        view.coordinates = with_state
        return view
    region = SENTINEL_REGION_ID if region_id is None else region_id
    shown = keys.filter(region_id=region, map_index=chosen)
    page = _keys_page(shown, _position(), sort, prefix, cursor, size)
    _with_instances(run, page.items, regions)
    instance = _current_first(instances.filter(region_id=region, map_index=chosen)).get((task_id, region, chosen))
    has_keys = bool(page.items) or shown.exists()
    view = TaskView(chosen, instance, map_indexes, True, page, has_keys, first_instance, True, region)
    view.coordinate, view.coordinates = regions.coordinate(region, chosen), with_state
    return view


def _public_region(instances, keys, task_id: str, index: int, regions: RunRegions) -> UUID:
    """The region Airflow's public ``map_index`` names: outside any region, or the task's own top-level
    expansion (its current execution first)."""
    top = [r.id for r in regions.regions.values() if r.node_id == task_id and r.parent_id is None]
    candidates = [SENTINEL_REGION_ID, *top]
    current = instances.filter(region_id__in=candidates, map_index=index, working_set=True).first()
    if current is not None:
        return current.region_id
    kept = keys.filter(region_id__in=candidates, map_index=index).order_by("-region_id").first()
    return kept.region_id if kept is not None else SENTINEL_REGION_ID


def get_task_key(key_id: int, *, scope: Scope) -> TaskStateStore:
    key = TaskStateStore.objects.select_related("dag_run").filter(pk=key_id).first()
    if key is None or not scope.allows_dag(key.dag_id):
        raise NotFound(_("No task state key with id %(id)s: it may have been deleted.") % {"id": key_id})
    return key
