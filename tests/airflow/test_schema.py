"""The unmanaged models match Airflow's tables, created from the `airflow db migrate` fixture of the series
the test database has (3.3 by default, 3.4 with AIRFLOW_FIXTURE_SERIES=3.4): each versioned field names
the column that series has.

Run on both databases; the PostgreSQL pass is the reference (docs/airflow.md describes PostgreSQL's DDL).
"""

import pytest
from django.db import connections, models

from statestore_admin.airflow.models import (
    Asset,
    AssetActive,
    AssetStateStore,
    DagRun,
    DynamicRegion,
    TaskInstance,
    TaskStateStore,
    column_of,
)
from statestore_admin.airflow.versions import schema_of
from statestore_admin.state.services.rows import natural_key
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

ALL_MODELS = [TaskStateStore, AssetStateStore, DagRun, TaskInstance, Asset, AssetActive]
FULL_MIRRORS = [TaskStateStore, AssetStateStore]


def _column_type(field):
    if isinstance(field, models.ForeignKey):
        field = field.target_field
        kind = "IntegerField" if isinstance(field, models.AutoField) else field.get_internal_type()
    else:
        kind = field.get_internal_type()
    return kind, getattr(field, "max_length", None)


def expected_type(vendor, field):
    kind, length = _column_type(field)
    if vendor == "postgresql":
        return {
            "AutoField": ("integer", None),
            "IntegerField": ("integer", None),
            "CharField": ("character varying", length),
            "TextField": ("text", None),
            "DateTimeField": ("timestamp with time zone", None),
            "UUIDField": ("uuid", None),
            "JSONField": ("json", None),
            "BooleanField": ("boolean", None),
            "BinaryField": ("bytea", None),
        }[kind]
    return {
        "AutoField": ("INTEGER", None),
        "IntegerField": ("INTEGER", None),
        "CharField": (f"VARCHAR({length})", None),
        "TextField": ("TEXT", None),
        "DateTimeField": ("TIMESTAMP", None),
        "UUIDField": ("CHAR(32)", None),
        "JSONField": ("JSON", None),
        "BooleanField": ("BOOLEAN", None),
        "BinaryField": ("BLOB", None),
    }[kind]


def table_columns(connection, table):
    """{column: (type, length, nullable, default)} read from the database catalog."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT column_name, data_type, character_maximum_length, is_nullable = 'YES', column_default "
                "FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s",
                [table],
            )
            return {name: (kind, length, nullable, default) for name, kind, length, nullable, default in cursor}
        cursor.execute(f"PRAGMA table_info({table})")
        return {row[1]: (row[2], None, not row[3], row[4]) for row in cursor}


def foreign_keys(connection, table):
    """{column: (referenced table, referenced column, on delete)}."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT kcu.column_name, ccu.table_name, ccu.column_name, rc.delete_rule "
                "FROM information_schema.referential_constraints rc "
                "JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = rc.constraint_name "
                "JOIN information_schema.constraint_column_usage ccu ON ccu.constraint_name = rc.constraint_name "
                "WHERE kcu.table_name = %s",
                [table],
            )
            return {col: (ref_table, ref_col, rule) for col, ref_table, ref_col, rule in cursor}
        cursor.execute(f"PRAGMA foreign_key_list({table})")
        return {row[3]: (row[2], row[4], row[6]) for row in cursor}


@pytest.mark.parametrize("model", [*ALL_MODELS, DynamicRegion], ids=lambda m: m._meta.db_table)
def test_model_columns_match_airflow(model):
    connection = connections["airflow"]
    schema = schema_of(connection)
    if model is DynamicRegion and not schema.regions:
        pytest.skip("Airflow 3.3 has no dynamic_region table")
    actual = table_columns(connection, model._meta.db_table)
    assert actual, f"{model._meta.db_table} missing from the Airflow schema"
    stored = {field: column_of(field, schema) for field in model._meta.concrete_fields}
    for field, column in stored.items():
        if column is None:  # a column this series does not have
            assert field.column not in actual and field.absent is not None or field.null, field.name
            continue
        kind, length, nullable, _default = actual[column]
        assert (kind, length) == expected_type(connection.vendor, field), column
        assert nullable == field.null, column
    if model in FULL_MIRRORS:
        assert set(actual) == {c for c in stored.values() if c}, "not mirrored column for column"


def test_task_state_store_details():
    connection = connections["airflow"]
    schema = schema_of(connection)
    index = schema.index_column
    columns = table_columns(connection, "task_state_store")
    default = columns[index][3]
    assert default in ("'-1'::integer", "'-1'")
    assert TaskStateStore._meta.get_field("map_index").default == -1
    if schema.regions:  # Airflow's sentinel, "not in a region", in the form each database stores
        assert columns["region_id"][3] in (
            "'00000000-0000-0000-0000-000000000000'::uuid",
            "'00000000000000000000000000000000'",
        )
    if connection.vendor == "postgresql":
        assert columns["id"][3] == "nextval('task_state_store_id_seq'::regclass)"
    assert foreign_keys(connection, "task_state_store") == {
        "dag_run_id": ("dag_run", "id", "CASCADE"),
    }
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "task_state_store")
    unique = constraints["task_state_store_uq"]
    assert unique["unique"] and unique["columns"] == natural_key(TaskStateStore, schema)
    assert unique["columns"] == (
        ["dag_run_id", "task_id", "region_id", "region_index", "key"]
        if schema.regions
        else ["dag_run_id", "task_id", "map_index", "key"]
    )
    primary = [c for c in constraints.values() if c["primary_key"]]
    assert [c["columns"] for c in primary] == [["id"]]
    assert constraints["idx_task_state_store_lookup"]["columns"] == ["dag_id", "run_id", "task_id", index]
    assert constraints["idx_task_state_store_expires_at"]["columns"] == ["expires_at"]


def test_asset_state_store_details():
    connection = connections["airflow"]
    assert "expires_at" not in table_columns(connection, "asset_state_store")
    assert foreign_keys(connection, "asset_state_store") == {"asset_id": ("asset", "id", "CASCADE")}
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "asset_state_store")
    primary = [c["columns"] for c in constraints.values() if c["primary_key"]]
    assert primary == [["asset_id", "key"]]
    assert [f.column for f in AssetStateStore._meta.pk_fields] == ["asset_id", "key"]
    assert AssetStateStore._meta.get_field("asset").remote_field.on_delete is models.CASCADE
    assert TaskStateStore._meta.get_field("dag_run").remote_field.on_delete is models.CASCADE


def test_models_are_unmanaged():
    assert all(not model._meta.managed for model in ALL_MODELS)


def test_cascades_work_through_the_real_constraints(
    dag_run_factory, task_key_factory, asset_factory, asset_key_factory
):
    run = dag_run_factory()
    task_key_factory(run, key="a")
    asset = asset_factory()
    asset_key_factory(asset, key="b")
    with connections["airflow"].cursor() as cursor:  # delete in SQL so that only the database cascades
        cursor.execute("DELETE FROM dag_run WHERE id = %s", [run.id])
        cursor.execute("DELETE FROM asset WHERE id = %s", [asset.id])
    assert not TaskStateStore.objects.exists()
    assert not AssetStateStore.objects.exists()
