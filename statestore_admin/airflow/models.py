"""Unmanaged mirrors of Airflow 3.3.2's tables (docs/airflow.md).

Airflow owns these tables: ``managed = False`` everywhere, and ``AirflowRouter`` keeps every
migration away from the Airflow database. ``task_state_store`` and ``asset_state_store`` are mirrored
column for column (``tests/test_schema.py`` proves it against the schema made by ``airflow db
migrate``); the other tables carry only the columns the dashboard reads, plus the NOT NULL ones
without a database default that the demo data must fill.
"""

import json

from django.db import models


class JsonColumn(models.JSONField):
    """A ``json`` (not ``jsonb``) column: psycopg decodes it itself on PostgreSQL."""

    def from_db_value(self, value, expression, connection):
        if connection.vendor == "postgresql":
            return value
        return super().from_db_value(value, expression, connection)


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
    map_index = models.IntegerField(default=-1)
    state = models.CharField(max_length=20, null=True)
    try_number = models.IntegerField()
    pool = models.CharField(max_length=256)
    pool_slots = models.IntegerField()
    start_date = models.DateTimeField(null=True)
    end_date = models.DateTimeField(null=True)
    operator = models.CharField(max_length=1000, null=True)
    rendered_map_index = models.CharField(max_length=250, null=True)
    task_display_name = models.CharField(max_length=2000, null=True)

    class Meta:
        managed = False
        db_table = "task_instance"
        constraints = [
            models.UniqueConstraint(
                fields=["dag_id", "task_id", "run_id", "map_index"], name="task_instance_composite_key"
            )
        ]

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
    map_index = models.IntegerField(default=-1)
    key = models.CharField(max_length=512)
    dag_id = models.CharField(max_length=250)
    run_id = models.CharField(max_length=250)
    value = models.TextField()
    updated_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True)

    class Meta:
        managed = False
        db_table = "task_state_store"
        constraints = [
            models.UniqueConstraint(fields=["dag_run", "task_id", "map_index", "key"], name="task_state_store_uq")
        ]
        # Airflow's indexes, idx_task_state_store_lookup (dag_id, run_id, task_id, map_index) and
        # idx_task_state_store_expires_at (expires_at), are not declared: Django caps index names at
        # 30 characters, and unmanaged models never create indexes anyway. tests/test_schema.py checks them.

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

    class Meta:
        managed = False
        db_table = "asset_state_store"

    def __str__(self) -> str:
        return f"asset {self.asset_id}: {self.key}"


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
