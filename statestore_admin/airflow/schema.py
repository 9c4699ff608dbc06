"""Create Airflow's schema from the committed fixtures (made by ``scripts/make_airflow_schema.sh``).

Only for empty databases: the embedded demo, tests and benchmarks. A database that already has
any Airflow table is refused, so this can never alter a real Airflow database. One fixture per Airflow
series and database (``fixtures/3.3/postgresql.sql``, ``fixtures/3.4/sqlite.sql``, …), each the output of
``airflow db migrate`` of the version pinned in ``scripts/airflow_versions``, with its alembic revision.
"""

from pathlib import Path

from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper

FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"
SERIES = ("3.3", "3.4")
DEFAULT_SERIES = "3.3"
STATE_TABLES = ("task_state_store", "asset_state_store")
SENTINEL_TABLES = ("dag_run", "task_instance", "asset", *STATE_TABLES)


class SchemaExists(Exception):
    pass


def fixture_sql(vendor: str, series: str | None = None) -> str:
    """Airflow's DDL for ``vendor`` ("postgresql", "sqlite"); ``series`` default: ``default_series()``."""
    series = series or default_series()
    path = FIXTURES_DIR / series / f"{vendor}.sql"
    if series not in SERIES or not path.exists():
        raise ValueError(f"No Airflow {series} schema fixture for the {vendor!r} database backend")
    return path.read_text()


def default_series() -> str:
    """The series new embedded and test databases get: ``settings.AIRFLOW_FIXTURE_SERIES``."""
    from django.conf import settings

    return getattr(settings, "AIRFLOW_FIXTURE_SERIES", DEFAULT_SERIES)


def existing_airflow_tables(connection: BaseDatabaseWrapper) -> set[str]:
    with connection.cursor() as cursor:
        tables = set(connection.introspection.table_names(cursor))
    return tables & set(SENTINEL_TABLES)


def has_state_tables(connection: BaseDatabaseWrapper) -> bool:
    """Whether both state tables exist already (create_airflow_schema --if-missing, demo_setup)."""
    return set(STATE_TABLES) <= existing_airflow_tables(connection)


def create_airflow_schema(connection: BaseDatabaseWrapper, series: str | None = None) -> None:
    """Run Airflow's DDL on an empty database; raise ``SchemaExists`` if any Airflow table is there."""
    found = existing_airflow_tables(connection)
    if found:
        raise SchemaExists(
            f"The database already has Airflow tables ({', '.join(sorted(found))}); "
            "statestore-admin never alters an existing Airflow schema."
        )
    sql = fixture_sql(connection.vendor, series)
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        connection.connection.executescript(sql)  # commits; SQLite DDL is transactional per script
        return
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(sql)
