"""Create Airflow's schema from the committed fixtures (made by ``scripts/make_airflow_schema.sh``).

Only for empty databases: the embedded demo, tests and benchmarks. A database that already has
any Airflow table is refused, so this can never alter a real Airflow database.
"""

from pathlib import Path

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

SCHEMA_DIR = Path(__file__).resolve().parent / "schema"
FIXTURES = {"postgresql": SCHEMA_DIR / "postgresql.sql", "sqlite": SCHEMA_DIR / "sqlite.sql"}
STATE_TABLES = ("task_state_store", "asset_state_store")
SENTINEL_TABLES = ("dag_run", "task_instance", "asset", *STATE_TABLES)


class SchemaExists(Exception):
    pass


def fixture_sql(vendor: str) -> str:
    try:
        return FIXTURES[vendor].read_text()
    except KeyError:
        raise ValueError(f"No Airflow schema fixture for the {vendor!r} database backend") from None


def existing_airflow_tables(connection: BaseDatabaseWrapper) -> set[str]:
    with connection.cursor() as cursor:
        tables = set(connection.introspection.table_names(cursor))
    return tables & set(SENTINEL_TABLES)


def create_airflow_schema(connection: BaseDatabaseWrapper) -> None:
    """Run Airflow's DDL on an empty database; raise ``SchemaExists`` if any Airflow table is there."""
    found = existing_airflow_tables(connection)
    if found:
        raise SchemaExists(
            f"The database already has Airflow tables ({', '.join(sorted(found))}); "
            "statestore-admin never alters an existing Airflow schema."
        )
    sql = fixture_sql(connection.vendor)
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        connection.connection.executescript(sql)  # commits; SQLite DDL is transactional per script
        return
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(sql)
