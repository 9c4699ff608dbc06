"""Which task instance a request's coordinates name, as Airflow 3.4's ``/api/v2`` resolves them
(``resolve_task_scope`` and ``TaskCoordinateResolver``): ``map_index`` alone is the public map index,
``region_id`` with ``region_index`` a stored address taken as given, and a task that sits in a dynamic
region is looked up among its current executions (``working_set``) with its definition read, read-only,
from the DAG version's serialized DAG (``serialized_dag``; the task's own versions, else the run's),
which says whether the task is mapped (or in a mapped task group) and whether a loop encloses it. The
result is a ``TaskAddress``; what Airflow refuses is refused with its words: ``Unaddressable`` (400),
``Ambiguous`` (409), ``NotFound`` (404). On Airflow 3.3 there are no regions: ``map_index`` is the
address. docs/airflow.md, "Addressing on 3.4", states the rule and its limits.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from uuid import UUID

from django.db import connections, models
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from statestore_admin.airflow import rest
from statestore_admin.airflow.models import DynamicRegion, TaskInstance
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.versions import SENTINEL_REGION_ID, schema_of
from statestore_admin.core.errors import Ambiguous, NotFound, Unaddressable
from statestore_admin.state import api_errors
from statestore_admin.state.addresses import TaskAddress

SELECT_REGION = gettext_lazy("Select a region and index for this task instance")
NOT_AT_COORDINATES = gettext_lazy("Task instance not found for selected coordinates")
DEFINITIONS_DIFFER = gettext_lazy("Producer definitions differ between the live task instances of the requested task")


@dataclass(frozen=True)
class RequestedAddress(TaskAddress):
    """Over Airflow's REST API: the coordinates as the request named them (``requested``), which Airflow's API
    server resolves itself when they leave the region or the index open."""

    requested: tuple[tuple[str, object], ...] = ()


def addresses_regions() -> bool:
    """Whether Airflow addresses task state by region (3.4) rather than by map index (3.3): its database's
    schema, or over its REST API the version its API server reports."""
    if rest.api_mode():
        return api_errors.call_series(rest.client()) == "3.4"
    return schema_of(connections[airflow_alias()]).regions


@dataclass(frozen=True)
class TaskDefinition:
    """What the serialized DAG says of a task: mapped (or in a mapped task group), and its innermost
    enclosing loop group (None outside any loop)."""

    mapped: bool
    loop: str | None


def resolve_address(
    dag_id: str,
    run_id: str,
    task_id: str,
    *,
    map_index: int = -1,
    region_id: UUID | None = None,
    region_index: int | None = None,
    all_map_indices: bool = False,
) -> TaskAddress:
    """The address the coordinates name (Airflow's ``resolve_task_scope``). With ``all_map_indices`` the
    address is the first task instance of the expansion; ``clears_expansion`` says whether a clear takes
    the whole of it."""
    if region_index is not None and region_id is None:
        raise Unaddressable(_("region_index requires region_id"))
    if region_id is not None and region_index is not None:
        if map_index not in (-1, region_index):
            raise Unaddressable(_("map_index conflicts with region_index"))
        return TaskAddress(dag_id, run_id, task_id, region_index, region_id)
    if rest.api_mode():  # Airflow's API server resolves the rest itself, and answers what it refuses
        requested = {"map_index": map_index, **({"region_id": str(region_id)} if region_id is not None else {})}
        return RequestedAddress(
            dag_id, run_id, task_id, map_index, region_id or SENTINEL_REGION_ID, requested=tuple(requested.items())
        )
    if not addresses_regions() or region_id == SENTINEL_REGION_ID or not _has_regions(dag_id, run_id, task_id):
        return TaskAddress(dag_id, run_id, task_id, map_index, region_id or SENTINEL_REGION_ID)
    definitions = _Definitions(dag_id, run_id)
    task = definitions.producer(task_id, region_id)
    if task is not None and task.loop is not None and (region_id is None or not task.mapped):
        raise Unaddressable(str(SELECT_REGION))
    wanted = None if all_map_indices else map_index
    found = _candidates(dag_id, run_id, task_id, task, region_id, wanted)
    if not found:
        raise NotFound(str(NOT_AT_COORDINATES))
    if len({region for region, _ in found}) != 1 or (not all_map_indices and len(found) != 1):
        raise Unaddressable(str(SELECT_REGION))
    region, index = found[0]
    return TaskAddress(dag_id, run_id, task_id, index, region)


def clears_expansion(address: TaskAddress, all_map_indices: bool) -> bool:
    """Whether ``all_map_indices`` clears every index of the address's region (Airflow's
    ``_clear_all_map_indices``): outside any region, or in the task's own expansion; a task of a mapped
    task group or a loop has its region shared with other tasks, and only its one index is cleared."""
    if not all_map_indices or not address.in_region or rest.api_mode():
        return all_map_indices
    node = DynamicRegion.objects.filter(id=address.region_id).values_list("node_id", flat=True).first()
    return node == address.task_id


def _current(dag_id: str, run_id: str, task_id: str):
    return TaskInstance.objects.filter(dag_id=dag_id, run_id=run_id, task_id=task_id, working_set=True)


# Asked at every request of Airflow's task routes on 3.4 (does the 3.3 rule apply?): a plain statement, as the key
# reads are (core.plain says why: the ORM's exists() cost twice what the database spends answering it). The rows of
# ``_current(...).exclude(region_id=SENTINEL_REGION_ID)``; on 3.4 only, whose table has both columns.
_IN_A_REGION = (
    "SELECT 1 FROM {table} WHERE dag_id = %s AND run_id = %s AND task_id = %s AND working_set = %s AND region_id <> %s "
    "LIMIT 1"
)


def _has_regions(dag_id: str, run_id: str, task_id: str) -> bool:
    connection = connections[airflow_alias()]
    fields = TaskInstance._meta
    params = [
        dag_id,
        run_id,
        task_id,
        fields.get_field("working_set").get_db_prep_value(True, connection),
        fields.get_field("region_id").get_db_prep_value(SENTINEL_REGION_ID, connection),
    ]
    with connection.cursor() as cursor:
        cursor.execute(_IN_A_REGION.format(table=connection.ops.quote_name(fields.db_table)), params)
        return cursor.fetchone() is not None


def _candidates(dag_id, run_id, task_id, task: TaskDefinition | None, region_id, wanted) -> list[tuple[UUID, int]]:
    """The current task instances the coordinates may name, as (region_id, index), in Airflow's order;
    two at one public index of one task are Ambiguous (``_check_producers_unambiguous``)."""
    rows = _current(dag_id, run_id, task_id)
    if region_id is not None:
        rows = rows.filter(region_id=region_id)
    regions = DynamicRegion.objects.filter(dag_id=dag_id, run_id=run_id)
    if task is None:  # the DAG no longer has the task: its own expansions only, unchecked (as in Airflow)
        rows = rows.filter(region_id__in=regions.filter(node_id=task_id).values("id"))
        if wanted is not None:
            rows = rows.filter(map_index=wanted)
        return list(rows.order_by("map_index").values_list("region_id", "map_index"))
    if region_id is None:  # the top level: no region, or a region nested in none
        if task.mapped:
            top = regions.filter(parent_region_id__isnull=True).values("id")
            rows = rows.filter(models.Q(region_id=SENTINEL_REGION_ID) | models.Q(region_id__in=top))
        else:
            rows = rows.filter(region_id=SENTINEL_REGION_ID, map_index=-1)
    if wanted is not None:
        if task.mapped:
            rows = rows.filter(map_index=wanted)
        elif wanted != -1:
            return []
    found = list(rows.values_list("region_id", "map_index"))
    seen: set[int] = set()
    for _region, index in found:
        public = index if task.mapped else -1
        if public in seen:
            message = _("Multiple live producers for %(dag_id)s/%(run_id)s/%(task_id)s index %(index)s")
            raise Ambiguous(message % {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "index": public})
        seen.add(public)
    return sorted(found, key=lambda found: found[1] if task.mapped else -1)


class _Definitions:
    """The serialized DAGs of one run's DAG versions, each read once (Airflow's ``_producer_task``)."""

    def __init__(self, dag_id: str, run_id: str):
        self.dag_id, self.run_id = dag_id, run_id
        self.connection = connections[airflow_alias()]
        self._dags: dict[UUID, dict | None] = {}

    def producer(self, task_id: str, region_id: UUID | None) -> TaskDefinition | None:
        """The definition of ``task_id`` in the versions its current task instances ran (the run's version
        for those that record none); None when a version lacks the task (Airflow's TaskNotFound)."""
        versions = self._task_versions(task_id, region_id)
        if not versions or None in versions:
            versions.discard(None)
            version = self._run_version()
            if version is None:
                raise self._not_pinned()
            versions.add(version)
        definitions = set()
        for version in versions:
            definition = self._task(version, task_id)
            if definition is None:
                return None
            definitions.add(definition)
        if len(definitions) != 1:
            raise Ambiguous(str(DEFINITIONS_DIFFER))
        return definitions.pop()

    def _uuid(self, value) -> UUID | None:
        if value is None or isinstance(value, UUID):
            return value
        return UUID(str(value))

    def _param(self, value: UUID):
        return models.UUIDField().get_db_prep_value(value, self.connection)

    def _task_versions(self, task_id: str, region_id: UUID | None) -> set[UUID | None]:
        sql = (
            "SELECT DISTINCT dag_version_id FROM task_instance WHERE working_set IS TRUE "
            "AND dag_id = %s AND run_id = %s AND task_id = %s"
        )
        params = [self.dag_id, self.run_id, task_id]
        if region_id is not None:
            sql += " AND region_id = %s"
            params.append(self._param(region_id))
        with self.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return {self._uuid(row[0]) for row in cursor.fetchall()}

    def _run_version(self) -> UUID | None:
        with self.connection.cursor() as cursor:
            cursor.execute(
                "SELECT created_dag_version_id FROM dag_run WHERE dag_id = %s AND run_id = %s",
                [self.dag_id, self.run_id],
            )
            row = cursor.fetchone()
        return self._uuid(row[0]) if row else None

    def _dag(self, version: UUID) -> dict | None:
        if version not in self._dags:
            with self.connection.cursor() as cursor:
                cursor.execute(
                    "SELECT data, data_compressed FROM serialized_dag WHERE dag_version_id = %s",
                    [self._param(version)],
                )
                row = cursor.fetchone()
            self._dags[version] = _decoded(row) if row else None
        return self._dags[version]

    def _task(self, version: UUID, task_id: str) -> TaskDefinition | None:
        data = self._dag(version)
        dag = (data or {}).get("dag") or {}
        if dag.get("dag_id") != self.dag_id:
            raise self._not_pinned()
        return definition_of(dag, task_id)

    def _not_pinned(self) -> Unaddressable:
        message = _("Pinned Dag for %(dag_id)s/%(run_id)s not found")  # Airflow's own words (its API)
        return Unaddressable(message % {"dag_id": self.dag_id, "run_id": self.run_id})


def _decoded(row) -> dict | None:
    """A serialized DAG's JSON: the ``data`` column, or ``data_compressed`` (zlib) when Airflow compresses."""
    data, compressed = row
    if data is None and compressed is not None:
        data = zlib.decompress(bytes(compressed))
    if isinstance(data, (str, bytes, bytearray)):
        data = json.loads(data)
    return data


def definition_of(dag: dict, task_id: str) -> TaskDefinition | None:
    """``task_id``'s definition in a serialized DAG's ``dag`` object (Airflow's ``DagSerialization``
    format): mapped when the operator is (``_is_mapped``) or needs expansion (a mapped task group's
    member: ``_needs_expansion``); its loop, the innermost task group with a ``loop`` entry around it.
    None when the DAG has no such task."""
    operator = next(
        (t.get("__var", {}) for t in dag.get("tasks", []) if t.get("__var", {}).get("task_id") == task_id), None
    )
    if operator is None:
        return None
    mapped = bool(operator.get("_is_mapped") or operator.get("_needs_expansion"))
    groups = _enclosing_groups(dag.get("task_group") or {}, task_id) or []
    loops = [group["_group_id"] for group in groups if "loop" in group]
    return TaskDefinition(mapped, loops[-1] if loops else None)


def _enclosing_groups(group: dict, task_id: str) -> list[dict] | None:
    """The task groups from the root down to ``task_id``'s own, or None when ``task_id`` is not below ``group``."""
    for kind, child in (group.get("children") or {}).values():
        if kind == "operator" and child == task_id:
            return [group]
        if kind == "taskgroup":
            below = _enclosing_groups(child, task_id)
            if below is not None:
                return [group, *below]
    return None
