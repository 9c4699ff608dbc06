"""System checks (``manage.py check``): the Airflow database and Airflow's configuration.

The database check runs with ``manage.py check`` and ``runserver``, and for commands that name the
Airflow alias; it is skipped by commands for other databases (``migrate`` of the dashboard database).
"""

from django.core import checks
from django.db import DatabaseError, connections

from .config import airflow_config
from .models import Asset, AssetActive, AssetStateStore, DagRun, Log, TaskInstance, TaskStateStore
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


def required_privileges(audit_to_airflow_log: bool) -> list[tuple[str, str, str]]:
    """(object kind, name, privilege) the dashboard needs on Airflow's database: README, Production →
    Database privileges. Reads of Airflow's tables; reads and writes of the two state tables; the
    sequence of ``task_state_store.id`` for adds; with ``AUDIT_TO_AIRFLOW_LOG`` appends to ``log``."""
    read_only = [DagRun, TaskInstance, Asset, AssetActive]
    needed = [("table", model._meta.db_table, "SELECT") for model in read_only]
    needed += [
        ("table", model._meta.db_table, privilege)
        for model in (TaskStateStore, AssetStateStore)
        for privilege in ("SELECT", "INSERT", "UPDATE", "DELETE")
    ]
    needed.append(("sequence", f"{TaskStateStore._meta.db_table}_id_seq", "USAGE"))
    if audit_to_airflow_log:  # INSERT … RETURNING id: SELECT on that one column
        log = Log._meta.db_table
        needed += [("table", log, "INSERT"), ("column", f"{log}.id", "SELECT"), ("sequence", f"{log}_id_seq", "USAGE")]
    return needed


def _has_privilege(cursor, kind: str, name: str, privilege: str) -> bool | None:
    """None when the object does not exist (the oid form of the functions, instead of an error)."""
    if kind == "column":
        table, column = name.split(".")
        cursor.execute("SELECT has_column_privilege(to_regclass(%s), %s, %s)", [table, column, privilege])
    else:
        cursor.execute(f"SELECT has_{kind}_privilege(to_regclass(%s), %s)", [name, privilege])
    return cursor.fetchone()[0]


def _grant(kind: str, name: str, privileges: list[str], role: str) -> str:
    if kind == "column":
        table, column = name.split(".")
        return f'GRANT {", ".join(f"{p} ({column})" for p in privileges)} ON TABLE {table} TO "{role}";'
    return f'GRANT {", ".join(privileges)} ON {kind.upper()} {name} TO "{role}";'


def inspect_privileges(connection, audit_to_airflow_log: bool) -> list[checks.CheckMessage]:
    """On PostgreSQL, an error naming each grant the connected role lacks (objects that do not exist
    are left to the checks above: E002 names a missing state table)."""
    if connection.vendor != "postgresql":
        return []
    missing: dict[tuple[str, str], list[str]] = {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        role = cursor.fetchone()[0]
        for kind, name, privilege in required_privileges(audit_to_airflow_log):
            if _has_privilege(cursor, kind, name, privilege) is False:
                missing.setdefault((kind, name), []).append(privilege)
    return [
        checks.Error(
            f"The role '{role}' lacks {', '.join(privileges)} on {kind} {name} in the Airflow database "
            f"{_describe(connection)}.",
            hint=f"{_grant(kind, name, privileges, role)} (README, Production: Database privileges).",
            id="statestore.E006",
        )
        for (kind, name), privileges in missing.items()
    ]


@checks.register("statestore")
def check_airflow_database(app_configs=None, databases=None, **kwargs):
    from django.conf import settings

    if databases is not None and airflow_alias() not in databases:
        return []
    connection = connections[airflow_alias()]
    messages = inspect_airflow_database(connection)
    if any(message.id == "statestore.E001" for message in messages):
        return messages
    return messages + inspect_privileges(connection, settings.AUDIT_TO_AIRFLOW_LOG)


@checks.register("statestore")
def check_airflow_config(app_configs=None, **kwargs):
    return [
        checks.Error(message, hint="Fix the option where it is set (see the message).", id="statestore.E004")
        for message in airflow_config().errors()
    ]


@checks.register("statestore")
def check_separate_databases(app_configs=None, **kwargs):
    default, airflow = connections["default"], connections[airflow_alias()]
    # By vendor, not ENGINE: the Airflow alias's PostgreSQL engine is our deadline backend.
    same = default.vendor == airflow.vendor and all(
        default.settings_dict.get(k) == airflow.settings_dict.get(k) for k in ("NAME", "HOST", "PORT")
    )
    if same:
        return [
            checks.Error(
                "DATABASE_URL points at the Airflow metadata database.",
                hint="The dashboard's own tables must live in a database of their own; Airflow owns its schema.",
                id="statestore.E005",
            )
        ]
    return []
