"""A run's and a task instance's keys: the task address (``TaskAddress``), the run page's blocks, the task
page, live refresh and one key."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from uuid import UUID

from django.db import connections
from django.db.models import (
    QuerySet,
)

from statestore_admin.airflow.models import DagRun, TaskInstance, TaskStateStore
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.versions import SENTINEL_REGION_ID, schema_of

from ..errors import NotFound
from ..pagination import Page, paginate
from ..scopes import Scope
from .asset_keys import with_previews


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
class TaskAddress:
    """A task instance's full coordinates: its task in a run, its region (Airflow 3.4's ``region_id``; the
    all-zero sentinel outside any region, and always on 3.3) and its index in that region (``map_index``:
    3.3's map index, 3.4's ``region_index``). Keys of one address never appear under another."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    region_id: UUID = SENTINEL_REGION_ID

    @classmethod
    def of(cls, row) -> TaskAddress:
        return cls(row.dag_id, row.run_id, row.task_id, row.map_index, row.region_id)

    @property
    def in_region(self) -> bool:
        return self.region_id != SENTINEL_REGION_ID

    def event_location(self) -> dict:
        location = {"dag_id": self.dag_id, "run_id": self.run_id, "task_id": self.task_id, "map_index": self.map_index}
        if self.in_region:
            location["region_id"] = self.region_id
        return location


def address_keys(scope: TaskAddress) -> QuerySet:
    return TaskStateStore.objects.filter(
        dag_id=scope.dag_id,
        run_id=scope.run_id,
        task_id=scope.task_id,
        region_id=scope.region_id,
        map_index=scope.map_index,
    )


def task_instances(scope: TaskAddress, any_map_index: bool = False) -> QuerySet:
    """The current task instance of ``scope`` (or every map index of its task in its region); an execution
    that a clear replaced (3.4 keeps it, outside the working set) is not one."""
    instances = TaskInstance.objects.filter(
        dag_id=scope.dag_id, run_id=scope.run_id, task_id=scope.task_id, region_id=scope.region_id, working_set=True
    )
    return instances if any_map_index else instances.filter(map_index=scope.map_index)


def task_map_indexes(scope: TaskAddress) -> list[int]:
    """The map indexes of the task instances of ``scope``'s task in its run, in order: ``[-1]`` for a task
    that is not mapped (or not expanded yet), ``[]`` for a task without a task instance."""
    return list(task_instances(scope, any_map_index=True).order_by("map_index").values_list("map_index", flat=True))


_RUN_AND_INSTANCE = (
    "SELECT r.id, EXISTS (SELECT 1 FROM task_instance t WHERE t.dag_id = r.dag_id AND t.run_id = r.run_id "
    "AND t.task_id = %s{region}{map_index}) FROM dag_run r WHERE r.dag_id = %s AND r.run_id = %s"
)


def require_task_instance(scope: TaskAddress, any_map_index: bool = False) -> DagRun:
    """The DAG run of an existing task instance; NotFound in Airflow's words otherwise. One plain query: every
    write through the API starts with it."""
    found = None
    if -1 <= scope.map_index < 2**31:  # beyond an integer column, no such task instance
        connection = connections[airflow_alias()]
        schema = schema_of(connection)
        region, region_params = "", []
        if schema.regions:
            region = " AND t.region_id = %s AND t.working_set IS TRUE"
            region_params = [TaskInstance._meta.get_field("region_id").get_db_prep_value(scope.region_id, connection)]
        elif scope.in_region:  # 3.3 has no regions: nothing sits in one
            raise NotFound(f"Task instance not found: {schema.name} has no region {scope.region_id}")
        map_index = "" if any_map_index else f" AND t.{schema.index_column} = %s"
        sql = _RUN_AND_INSTANCE.format(region=region, map_index=map_index)
        params = [
            scope.task_id,
            *region_params,
            *([] if any_map_index else [scope.map_index]),
            scope.dag_id,
            scope.run_id,
        ]
        with connection.cursor() as cursor:
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
