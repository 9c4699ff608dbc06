"""System checks (``manage.py check``): the Airflow database and Airflow's configuration.

The database check runs with ``manage.py check`` and ``runserver``, and for commands that name the
Airflow alias; it is skipped by commands for other databases (``migrate`` of the dashboard database).
"""

from django.core import checks
from django.db import DatabaseError, connections

from .config import airflow_config
from .models import AssetStateStore, TaskStateStore
from .router import airflow_alias


def _describe(connection) -> str:
    from django.conf import settings

    return settings.AIRFLOW_DATABASE.display_url if connection.alias == airflow_alias() else connection.alias


def inspect_airflow_database(connection) -> list[checks.CheckMessage]:
    """Errors when ``connection`` is unreachable or lacks a state table or one of its columns."""
    where = _describe(connection)
    try:
        with connection.cursor() as cursor:
            tables = set(connection.introspection.table_names(cursor))
            messages = []
            for model in (TaskStateStore, AssetStateStore):
                table = model._meta.db_table
                if table not in tables:
                    messages.append(
                        checks.Error(
                            f"The Airflow database {where} has no table '{table}'.",
                            hint="The state store needs Airflow 3.3 or later: run `airflow db migrate`, "
                            "or point AIRFLOW_DATABASE_URL at the right database.",
                            id="statestore.E002",
                        )
                    )
                    continue
                columns = {c.name for c in connection.introspection.get_table_description(cursor, table)}
                expected = [f.column for f in model._meta.concrete_fields]
                missing = [c for c in expected if c not in columns]
                if missing:
                    messages.append(
                        checks.Error(
                            f"Table '{table}' in the Airflow database {where} lacks the columns {', '.join(missing)}.",
                            hint="statestore-admin expects the schema of Airflow 3.3.2; check the Airflow version.",
                            id="statestore.E003",
                        )
                    )
            return messages
    except DatabaseError as exc:
        return [
            checks.Error(
                f"Cannot reach the Airflow database {where}: {exc}".strip(),
                hint="Check AIRFLOW_DATABASE_URL, or Airflow's [database] sql_alchemy_conn.",
                id="statestore.E001",
            )
        ]


@checks.register("statestore")
def check_airflow_database(app_configs=None, databases=None, **kwargs):
    if databases is not None and airflow_alias() not in databases:
        return []
    return inspect_airflow_database(connections[airflow_alias()])


@checks.register("statestore")
def check_airflow_config(app_configs=None, **kwargs):
    return [
        checks.Error(message, hint="Fix the option where it is set (see the message).", id="statestore.E004")
        for message in airflow_config().errors()
    ]


@checks.register("statestore")
def check_separate_databases(app_configs=None, **kwargs):
    default, airflow = connections["default"].settings_dict, connections[airflow_alias()].settings_dict
    same = all(default.get(k) == airflow.get(k) for k in ("ENGINE", "NAME", "HOST", "PORT"))
    if same:
        return [
            checks.Error(
                "DATABASE_URL points at the Airflow metadata database.",
                hint="The dashboard's own tables must live in a database of their own; Airflow owns its schema.",
                id="statestore.E005",
            )
        ]
    return []
