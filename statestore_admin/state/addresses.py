"""A task instance's address (``TaskAddress``: the coordinates Airflow's task state store keys carry) and the
reads of one address: its keys (``address_keys``), its task instances (``task_instances``, ``task_map_indexes``)
and its run, checked to exist (``require_task_instance``). ``selectors.coordinates`` resolves the address a
request names; every write and read of one task instance's keys goes through these."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.db import connections
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from statestore_admin.airflow.models import DagRun, TaskInstance, TaskStateStore, column_of, select_list
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.versions import SENTINEL_REGION_ID, schema_of
from statestore_admin.core import plain
from statestore_admin.core.errors import NotFound


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
        """The address of a key row (or of anything with the same five fields: a restore's target)."""
        return cls(row.dag_id, row.run_id, row.task_id, row.map_index, row.region_id)

    @property
    def in_region(self) -> bool:
        return self.region_id != SENTINEL_REGION_ID

    def fields(self) -> dict:
        """The address as the columns of Airflow's ``task_state_store`` (a key row's, a filter's)."""
        return {
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "task_id": self.task_id,
            "map_index": self.map_index,
            "region_id": self.region_id,
        }

    def event_location(self) -> dict:
        location = {"dag_id": self.dag_id, "run_id": self.run_id, "task_id": self.task_id, "map_index": self.map_index}
        if self.in_region:
            location["region_id"] = self.region_id
        return location


def address_keys(address: TaskAddress, any_map_index: bool = False) -> QuerySet:
    """The keys at ``address`` (or at every map index of its task in its region)."""
    if any_map_index:
        return TaskStateStore.objects.filter(
            dag_id=address.dag_id, run_id=address.run_id, task_id=address.task_id, region_id=address.region_id
        )
    return TaskStateStore.objects.filter(**address.fields())


# An address's keys in plain statements (core.plain), for Airflow's API routes that read them at every request: one
# page of keys and their number in one round trip (a scalar subquery, counted once and only when the page has a
# row), or one key. The same rows as ``address_keys``.
_PAGE = (
    "SELECT {columns}, (SELECT COUNT(*) FROM {table} WHERE {where}) FROM {table} WHERE {where} "
    "ORDER BY {key} LIMIT %s OFFSET %s"
)
_COUNT = "SELECT COUNT(*) FROM {table} WHERE {where}"
_ONE = "SELECT {columns} FROM {table} WHERE {where} AND {key} = %s"
_INT_COLUMN = range(-(2**31), 2**31)  # a map index outside it is no row's (the ORM's IntegerField lookups agree)


def _where(address: TaskAddress, connection) -> tuple[str, list] | None:
    """The condition of ``address``'s keys and its parameters; None when no row can have them."""
    schema, quote = schema_of(connection), connection.ops.quote_name
    if address.map_index not in _INT_COLUMN:
        return None
    names = ["dag_id", "run_id", "task_id", "map_index", "region_id"]
    values = [address.dag_id, address.run_id, address.task_id, address.map_index, address.region_id]
    conditions, params = [], []
    for name, value in zip(names, values, strict=True):
        field = TaskStateStore._meta.get_field(name)
        column = column_of(field, schema)
        if column is None:  # 3.3 has no regions: only the sentinel, and every row has it
            if value != field.absent:
                return None
            continue
        conditions.append(f"{quote(column)} = %s")
        params.append(field.get_db_prep_value(value, connection))
    return " AND ".join(conditions), params


_SELECT_LISTS: dict[tuple, tuple[str, list]] = {}


def _select_list(connection) -> tuple[str, list]:
    """``select_list`` of a key row, once per schema and database vendor."""
    known = _SELECT_LISTS.get((schema_of(connection), connection.vendor))
    if known is None:
        known = _SELECT_LISTS[(schema_of(connection), connection.vendor)] = select_list(TaskStateStore, connection)
    return known


def _statement_parts(address: TaskAddress):
    """Airflow's connection, the parts of the statements above (select list, quoted table and key column, the
    address's condition) and the parameters of the select list and of the condition; None when no row can be
    at ``address``."""
    connection = connections[airflow_alias()]
    where = _where(address, connection)
    if where is None:
        return None
    condition, params = where
    columns, column_params = _select_list(connection)
    quote = connection.ops.quote_name
    parts = {"columns": columns, "table": quote(TaskStateStore._meta.db_table), "where": condition, "key": quote("key")}
    return connection, parts, column_params, params


def address_key_page(address: TaskAddress, offset: int, limit: int) -> tuple[list[TaskStateStore], int]:
    """``address_keys(address).order_by("key")[offset : offset + limit]`` and the number of all of them."""
    prepared = _statement_parts(address)
    if prepared is None:
        return [], 0
    connection, parts, column_params, params = prepared
    with connection.cursor() as cursor:
        cursor.execute(_PAGE.format(**parts), [*column_params, *params, *params, limit, offset])
        found = cursor.fetchall()
        if found:
            return [plain.instance(TaskStateStore, connection, values[:-1]) for values in found], found[0][-1]
        cursor.execute(_COUNT.format(**parts), params)  # a page past the end, or of none
        return [], cursor.fetchone()[0]


def address_key(address: TaskAddress, key: str) -> TaskStateStore | None:
    """``address_keys(address).filter(key=key).first()``: the key at ``address``, if there is one."""
    prepared = _statement_parts(address)
    if prepared is None:
        return None
    connection, parts, column_params, params = prepared
    with connection.cursor() as cursor:
        cursor.execute(_ONE.format(**parts), [*column_params, *params, key])
        found = cursor.fetchone()
    return None if found is None else plain.instance(TaskStateStore, connection, found)


def task_instances(address: TaskAddress, any_map_index: bool = False) -> QuerySet:
    """The current task instance of ``address`` (or every map index of its task in its region); an execution
    that a clear replaced (3.4 keeps it, outside the working set) is not one."""
    instances = TaskInstance.objects.filter(
        dag_id=address.dag_id,
        run_id=address.run_id,
        task_id=address.task_id,
        region_id=address.region_id,
        working_set=True,
    )
    return instances if any_map_index else instances.filter(map_index=address.map_index)


def task_map_indexes(address: TaskAddress) -> list[int]:
    """The map indexes of the task instances of ``address``'s task in its run, in order: ``[-1]`` for a task
    that is not mapped (or not expanded yet), ``[]`` for a task without a task instance."""
    instances = task_instances(address, any_map_index=True)
    return list(instances.order_by("map_index").values_list("map_index", flat=True))


_RUN_AND_INSTANCE = (
    "SELECT r.id, EXISTS (SELECT 1 FROM task_instance t WHERE t.dag_id = r.dag_id AND t.run_id = r.run_id "
    "AND t.task_id = %s{region}{map_index}) FROM dag_run r WHERE r.dag_id = %s AND r.run_id = %s"
)


def require_task_instance(address: TaskAddress, any_map_index: bool = False) -> DagRun:
    """The DAG run of an existing task instance; NotFound in Airflow's words otherwise. One plain query: every
    write through the API starts with it."""
    found = None
    if -1 <= address.map_index < 2**31:  # beyond an integer column, no such task instance
        connection = connections[airflow_alias()]
        schema = schema_of(connection)
        region, region_params = "", []
        if schema.regions:
            region = " AND t.region_id = %s AND t.working_set IS TRUE"
            region_params = [TaskInstance._meta.get_field("region_id").get_db_prep_value(address.region_id, connection)]
        elif address.in_region:  # 3.3 has no regions: nothing sits in one
            message = _("Task instance not found: %(airflow)s has no region %(region)s")
            raise NotFound(message % {"airflow": schema.name, "region": address.region_id})
        map_index = "" if any_map_index else f" AND t.{schema.index_column} = %s"
        sql = _RUN_AND_INSTANCE.format(region=region, map_index=map_index)
        params = [
            address.task_id,
            *region_params,
            *([] if any_map_index else [address.map_index]),
            address.dag_id,
            address.run_id,
        ]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchone()
    if found is None or not found[1]:
        raise instance_not_found(address, "all_map_indices=True" if any_map_index else None)
    return DagRun(id=found[0], dag_id=address.dag_id, run_id=address.run_id)


def instance_not_found(address: TaskAddress, addressed_by: str | None = None) -> NotFound:
    """Airflow's 404 for a task instance, naming it as addressed (``addressed_by``: its map_index by default)."""
    message = _("Task instance not found for dag_id=%(dag_id)r, run_id=%(run_id)r, task_id=%(task_id)r, %(index)s")
    words = {"dag_id": address.dag_id, "run_id": address.run_id, "task_id": address.task_id}
    return NotFound(message % {**words, "index": addressed_by or f"map_index={address.map_index}"})
