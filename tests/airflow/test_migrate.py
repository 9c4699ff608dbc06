"""`migrate` never creates or alters anything in the Airflow database."""

import pytest
from django.core.management import call_command
from django.db import connections

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.airflow.router import AirflowRouter
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


def schema_snapshot(connection):
    """Every relation of the database with its full definition, as the catalog describes it."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT c.relname, c.relkind, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
                "pg_get_expr(d.adbin, d.adrelid) "
                "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
                "LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum "
                "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') "
                "UNION ALL SELECT conname, 'constraint', pg_get_constraintdef(oid), NULL, NULL, NULL "
                "FROM pg_constraint WHERE connamespace = 'public'::regnamespace "
                "ORDER BY 1, 2, 3"
            )
        else:
            cursor.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")
        return cursor.fetchall()


def test_migrate_leaves_the_airflow_database_untouched(capsys):
    connection = connections["airflow"]
    before = schema_snapshot(connection)
    assert before, "the Airflow schema should be there"
    call_command("migrate", verbosity=0)
    call_command("migrate", database="airflow", verbosity=1)
    call_command("migrate", database="airflow", run_syncdb=True, verbosity=0)
    after = schema_snapshot(connection)
    assert after == before
    with connection.cursor() as cursor:
        assert "django_migrations" not in connection.introspection.table_names(cursor)
    assert "Airflow owns that schema" in capsys.readouterr().out


def test_router_sends_airflow_models_to_the_airflow_alias():
    router = AirflowRouter()
    assert router.db_for_read(TaskStateStore) == "airflow"
    assert router.db_for_write(TaskStateStore) == "airflow"
    assert TaskStateStore.objects.all().db == "airflow"
    assert router.allow_migrate("airflow", "auth") is False
    assert router.allow_migrate("default", "airflow") is False
    assert router.allow_migrate("default", "auth") is None
