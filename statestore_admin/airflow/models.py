"""Unmanaged mirrors of Airflow's tables, for Airflow 3.3 and 3.4 at once (docs/airflow.md).

Airflow owns these tables: ``managed = False`` everywhere, and ``AirflowRouter`` keeps every
migration away from the Airflow database. ``task_state_store`` and ``asset_state_store`` are mirrored
column for column (``tests/airflow/test_schema.py`` proves it against the schemas made by ``airflow db
migrate``); the other tables carry only the columns the dashboard reads, plus the NOT NULL ones
without a database default that the demo data must fill.

The columns that differ between the two series are ``VersionedColumn`` fields: each knows its column
in each series (``map_index`` is 3.4's ``region_index``; ``region_id`` exists in 3.4 only) and asks
``versions.schema_of(connection)`` which one to write in the SQL, so one model serves both databases.
In the code, ``map_index`` keeps its 3.3 name: the task instance's index in its (innermost) region,
which is the map index for a mapped task outside any loop.
"""

import copy
import json
import uuid

from django.core.exceptions import FieldError
from django.db import connections, models
from django.db.models.expressions import Col
from django.utils.functional import cached_property

from statestore_admin.airflow.versions import SENTINEL_REGION_ID, schema_of


class VersionedCol(Col):
    """A column reference compiled for the schema of the connection that runs the query."""

    def as_sql(self, compiler, connection):
        column = self.target.column_in(schema_of(connection))
        if column is None:  # not in this series: the value every row would have there
            return "%s", (self.target.get_db_prep_value(self.target.absent, connection),)
        identifiers = (self.alias, column) if self.alias else (column,)
        return ".".join(map(compiler.quote_name_unless_alias, identifiers)), ()


class VersionedColumn:
    """A field whose column depends on Airflow's series: ``columns`` maps "3.3"/"3.4" to the column
    name, or to None where that series has no such column; ``absent`` is then the value it stands for
    (reads see it, writes may only write it)."""

    def __init__(self, *args, columns: dict[str, str | None], absent=None, **kwargs):
        self.columns, self.absent = columns, absent
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        return name, path, args, {**kwargs, "columns": self.columns, "absent": self.absent}

    def column_in(self, schema) -> str | None:
        return self.columns[schema.series]

    def get_col(self, alias, output_field=None):
        if alias == self.model._meta.db_table and (output_field is None or output_field == self):
            return self.cached_col
        return VersionedCol(alias, self, output_field)

    @cached_property
    def cached_col(self):
        return VersionedCol(self.model._meta.db_table, self)

    def for_write(self, schema, values):
        """This field as an INSERT or UPDATE of ``schema`` must name it (a copy with its column), or None
        where the series has no such column, which only ``absent`` values may meet."""
        column = self.column_in(schema)
        if column is None:
            wrong = [v for v in values if v != self.absent]
            if wrong:
                raise FieldError(f"{self.name}={wrong[0]!r}: {schema.name} has no such column")
            return None
        if column == self.column:
            return self
        clone = copy.copy(self)
        clone.column = column
        return clone


class AirflowQuerySet(models.QuerySet):
    """Writes name the columns of the series the database has (``VersionedColumn``)."""

    def _schema(self, using=None):
        return schema_of(connections[using or self.db])

    def _insert(self, objs, fields, *args, using=None, **kwargs):
        schema = self._schema(using)
        written = []
        for field in fields:
            if isinstance(field, VersionedColumn):
                field = field.for_write(schema, [field.pre_save(obj, add=True) for obj in objs])
            if field is not None:
                written.append(field)
        return super()._insert(objs, written, *args, using=using, **kwargs)

    def _update(self, values):
        schema = self._schema()
        written = []
        for field, model, value in values:
            if isinstance(field, VersionedColumn):
                field = field.for_write(schema, [value])
            if field is not None:
                written.append((field, model, value))
        return super()._update(written)

    def update(self, **kwargs):
        # update() names fields; a renamed column cannot be passed on by name, and coordinates never
        # change: only values of columns that this series has, or absent values, are accepted.
        schema = self._schema()
        for name in list(kwargs):
            field = self.model._meta.get_field(name)
            if isinstance(field, VersionedColumn):
                written = field.for_write(schema, [kwargs[name]])
                if written is None:
                    del kwargs[name]
                elif written is not field:
                    raise FieldError(f"update() of {name}: a task instance's coordinates never change")
        return super().update(**kwargs)


AirflowManager = models.Manager.from_queryset(AirflowQuerySet)


def column_of(field, schema) -> str | None:
    """``field``'s column in the database of ``schema`` (None: that series has no such column)."""
    return field.column_in(schema) if isinstance(field, VersionedColumn) else field.column


def stored_fields(model, schema) -> list:
    """The concrete fields of ``model`` that the database of ``schema`` has a column for."""
    return [f for f in model._meta.concrete_fields if column_of(f, schema) is not None]


def select_list(model, connection) -> tuple[str, list]:
    """Raw SQL naming every concrete field of ``model`` under its Django column name (what ``raw()`` maps
    back to fields), for the database behind ``connection``; a column its series lacks is its absent value."""
    schema, quote = schema_of(connection), connection.ops.quote_name
    parts, params = [], []
    for f in model._meta.concrete_fields:
        column = column_of(f, schema)
        if column is None:
            parts.append(f"%s AS {quote(f.column)}")
            params.append(f.get_db_prep_value(f.absent, connection))
        else:
            parts.append(quote(column) if column == f.column else f"{quote(column)} AS {quote(f.column)}")
    return ", ".join(parts), params


class VersionedInteger(VersionedColumn, models.IntegerField):
    pass


class VersionedUUID(VersionedColumn, models.UUIDField):
    pass


class VersionedBoolean(VersionedColumn, models.BooleanField):
    pass


def map_index_field():
    """Airflow 3.3's ``map_index``, which 3.4 renames ``region_index``."""
    return VersionedInteger(default=-1, db_column="map_index", columns={"3.3": "map_index", "3.4": "region_index"})


def region_id_field():
    """Airflow 3.4's ``region_id``; on 3.3 every task instance is outside any region."""
    return VersionedUUID(
        default=SENTINEL_REGION_ID, columns={"3.3": None, "3.4": "region_id"}, absent=SENTINEL_REGION_ID
    )


def since_34(field_class, **kwargs):
    """A nullable column that Airflow 3.4 adds: NULL (unknown) on 3.3."""
    return field_class(null=True, columns={"3.3": None, "3.4": kwargs.pop("column")}, absent=None, **kwargs)


class JsonColumn(models.JSONField):
    """A ``json`` (not ``jsonb``) column: psycopg decodes it itself on PostgreSQL."""

    def from_db_value(self, value, expression, connection):
        if connection.vendor == "postgresql":
            return value
        return super().from_db_value(value, expression, connection)


class Dag(models.Model):
    """A DAG Airflow has parsed (``dag``); only what the pages list. ``is_stale``: its file is gone."""

    dag_id = models.CharField(max_length=250, primary_key=True)
    is_paused = models.BooleanField()
    is_stale = models.BooleanField()

    class Meta:
        managed = False
        db_table = "dag"

    def __str__(self) -> str:
        return self.dag_id


class DagRun(models.Model):
    id = models.AutoField(primary_key=True)
    dag_id = models.CharField(max_length=250)
    run_id = models.CharField(max_length=250)
    state = models.CharField(max_length=50, null=True)
    run_type = models.CharField(max_length=50)
    logical_date = models.DateTimeField(null=True)
    start_date = models.DateTimeField(null=True)
    end_date = models.DateTimeField(null=True)
    run_after = models.DateTimeField()
    queued_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField(null=True)
    updated_at = models.DateTimeField(null=True)

    class Meta:
        managed = False
        db_table = "dag_run"
        constraints = [models.UniqueConstraint(fields=["dag_id", "run_id"], name="dag_run_dag_id_run_id_key")]

    def __str__(self) -> str:
        return f"{self.dag_id} / {self.run_id}"


class TaskInstance(models.Model):
    id = models.UUIDField(primary_key=True)
    dag_id = models.CharField(max_length=250)
    task_id = models.CharField(max_length=250)
    run_id = models.CharField(max_length=250)
    map_index = map_index_field()
    region_id = region_id_field()
    # 3.4: TRUE for the current attempt of a coordinate; an execution replaced by a clear keeps its rows
    # with NULL here (archived_reason says why). 3.3 keeps no replaced rows.
    working_set = VersionedBoolean(null=True, default=True, columns={"3.3": None, "3.4": "working_set"}, absent=True)
    state = models.CharField(max_length=20, null=True)
    try_number = models.IntegerField()
    pool = models.CharField(max_length=256)
    pool_slots = models.IntegerField()
    start_date = models.DateTimeField(null=True)
    end_date = models.DateTimeField(null=True)
    operator = models.CharField(max_length=1000, null=True)
    rendered_map_index = models.CharField(max_length=250, null=True)
    task_display_name = models.CharField(max_length=2000, null=True)

    objects = AirflowManager()

    class Meta:
        managed = False
        db_table = "task_instance"
        base_manager_name = "objects"  # saves go through it too (AirflowQuerySet)

    def __str__(self) -> str:
        return f"{self.dag_id}.{self.task_id} [{self.map_index}] {self.run_id}"


class Asset(models.Model):
    id = models.AutoField(primary_key=True)
    name = models.CharField(max_length=1500)
    uri = models.CharField(max_length=1500)
    group = models.CharField(max_length=1500)
    extra = JsonColumn(default=dict)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        managed = False
        db_table = "asset"
        constraints = [models.UniqueConstraint(fields=["name", "uri"], name="asset_name_uri_unique")]

    def __str__(self) -> str:
        return self.name


class AssetActive(models.Model):
    """An asset is active while it has a row here (FK ``(name, uri)`` → ``asset``, cascade)."""

    pk = models.CompositePrimaryKey("name", "uri")
    name = models.CharField(max_length=1500)
    uri = models.CharField(max_length=1500)

    class Meta:
        managed = False
        db_table = "asset_active"


class JsonValueMixin:
    """``value`` holds ``json.dumps`` text; a worker-side backend stores a reference object instead,
    ``{"__airflow_state_ref__": "<ref>"}`` (docs/airflow.md). ``REF_KEY`` is the one definition of that
    marker in the code base; ``REF_PREFIX`` is how the stored text of such a value starts."""

    REF_KEY = "__airflow_state_ref__"
    REF_PREFIX = "{" + json.dumps(REF_KEY) + ": "  # json.dumps({REF_KEY: ref}) with Airflow's default separators

    @property
    def value_size(self) -> int:
        return len(self.value.encode())

    @property
    def worker_ref(self) -> str | None:
        return worker_ref_of(self.value)


def worker_ref_of(text: str | None) -> str | None:
    """The reference a stored value holds, when it is a worker-side reference (and nothing else)."""
    if text is None:
        return None
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to be a reference
        return None
    if isinstance(decoded, dict) and set(decoded) == {JsonValueMixin.REF_KEY}:
        return decoded[JsonValueMixin.REF_KEY]
    return None


class TaskStateStore(JsonValueMixin, models.Model):
    id = models.AutoField(primary_key=True)
    dag_run = models.ForeignKey(DagRun, on_delete=models.CASCADE, db_column="dag_run_id", related_name="state_keys")
    task_id = models.CharField(max_length=250)
    map_index = map_index_field()
    region_id = region_id_field()
    key = models.CharField(max_length=512)
    dag_id = models.CharField(max_length=250)
    run_id = models.CharField(max_length=250)
    value = models.TextField()
    updated_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True)

    objects = AirflowManager()

    class Meta:
        managed = False
        db_table = "task_state_store"
        base_manager_name = "objects"  # saves go through it too (AirflowQuerySet)
        # Airflow's unique key is (dag_run_id, task_id, map_index, key) on 3.3 and (dag_run_id, task_id,
        # region_id, region_index, key) on 3.4: NATURAL_KEYS (state.services.rows) writes whichever the
        # database has. Its indexes are not declared: unmanaged models never create any, and
        # tests/airflow/test_schema.py checks them against Airflow's.

    def __str__(self) -> str:
        return f"{self.dag_id}.{self.task_id}[{self.map_index}] {self.run_id}: {self.key}"


class AssetStateStore(JsonValueMixin, models.Model):
    WRITER_KINDS = ("task", "watcher", "api")

    pk = models.CompositePrimaryKey("asset_id", "key")
    asset = models.ForeignKey(Asset, on_delete=models.CASCADE, db_column="asset_id", related_name="state_keys")
    key = models.CharField(max_length=512)
    value = models.TextField()
    updated_at = models.DateTimeField()
    last_updated_by_kind = models.CharField(max_length=16, null=True)
    last_updated_by_dag_id = models.CharField(max_length=250, null=True)
    last_updated_by_run_id = models.CharField(max_length=250, null=True)
    last_updated_by_task_id = models.CharField(max_length=250, null=True)
    last_updated_by_map_index = models.IntegerField(null=True)
    # 3.4 records the task writer's identity; task writers set all four, other writers none.
    last_updated_by_task_instance_id = since_34(VersionedUUID, column="last_updated_by_task_instance_id")
    last_updated_by_region_id = since_34(VersionedUUID, column="last_updated_by_region_id")
    last_updated_by_region_index = since_34(VersionedInteger, column="last_updated_by_region_index")
    last_updated_by_try_number = since_34(VersionedInteger, column="last_updated_by_try_number")

    objects = AirflowManager()

    class Meta:
        managed = False
        db_table = "asset_state_store"
        base_manager_name = "objects"  # saves go through it too (AirflowQuerySet)

    def __str__(self) -> str:
        return f"asset {self.asset_id}: {self.key}"


class DynamicRegion(models.Model):
    """Airflow 3.4's ``dynamic_region``: one execution of a loop, or of a mapped task or task group's
    expansion, in a DAG run (no such table on 3.3: read it only where ``schema.regions``). Task instances
    and task state carry its ``id`` as ``region_id``. ``parent_region_*``: the region and index it sits
    in (an iteration of a loop around a mapped task); ``forked_from_region_id``: the execution a clear
    replaced by this one. Rows never change once written."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    dag_id = models.CharField(max_length=250)
    run_id = models.CharField(max_length=250)
    node_id = models.CharField(max_length=250)
    parent_region_id = models.UUIDField(null=True)
    parent_region_index = models.IntegerField(null=True)
    forked_from_region_id = models.UUIDField(null=True)
    family_root_id = models.UUIDField()
    path = models.BinaryField()
    resumes_from_index = models.IntegerField(default=0)
    created_at = models.DateTimeField()

    class Meta:
        managed = False
        db_table = "dynamic_region"

    def __str__(self) -> str:
        return f"{self.node_id} ({self.id})"


class Log(models.Model):
    """Airflow's audit log (Browse → Audit Log, ``/api/v2/eventLogs``): the dashboard only appends to it,
    and only with ``AUDIT_TO_AIRFLOW_LOG=1``."""

    id = models.AutoField(primary_key=True)
    dttm = models.DateTimeField(null=True)
    dag_id = models.CharField(max_length=250, null=True)
    task_id = models.CharField(max_length=250, null=True)
    map_index = models.IntegerField(null=True)
    event = models.CharField(max_length=60)
    logical_date = models.DateTimeField(null=True)
    run_id = models.CharField(max_length=250, null=True)
    owner = models.CharField(max_length=500, null=True)
    owner_display_name = models.CharField(max_length=500, null=True)
    extra = models.TextField(null=True)
    try_number = models.IntegerField(null=True)

    class Meta:
        managed = False
        db_table = "log"
