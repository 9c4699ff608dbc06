"""System checks (``manage.py check``): the Airflow database and Airflow's configuration.

The database check runs with ``manage.py check`` and ``runserver``, and for commands that name the
Airflow alias; it is skipped by commands for other databases (``migrate`` of the dashboard database).
"""

from django.core import checks
from django.db import DatabaseError, connections

from statestore_admin.airflow import rest, versions
from statestore_admin.airflow.config import airflow_config
from statestore_admin.airflow.models import (
    Asset,
    AssetActive,
    AssetStateStore,
    DagRun,
    DynamicRegion,
    Log,
    TaskInstance,
    TaskStateStore,
)
from statestore_admin.airflow.router import airflow_alias


def _describe(connection) -> str:
    from django.conf import settings

    return settings.AIRFLOW_DATABASE.display_url if connection.alias == airflow_alias() else connection.alias


def inspect_airflow_database(connection) -> list[checks.CheckMessage]:
    """Which Airflow schema ``connection`` has (an Info naming it), or errors when it is unreachable,
    lacks a state table (E002) or has a schema neither Airflow 3.3 nor 3.4 has (E003, naming what differs)."""
    where = _describe(connection)
    try:
        versions.forget(connection)  # a check reads the database as it is now
        try:
            schema = versions.schema_of(connection)
        except versions.UnsupportedAirflowSchema as exc:
            missing_table = "it has no table" in exc.reason
            return [
                checks.Error(
                    f"The Airflow database {where} is not supported: {exc.reason}.",
                    hint="statestore-admin supports the schemas of Airflow 3.3 and 3.4 (README, Supported "
                    "versions); check the Airflow version, and let `airflow db migrate` finish.",
                    id="statestore.E002" if missing_table else "statestore.E003",
                )
            ]
        messages: list[checks.CheckMessage] = [
            checks.Info(f"The Airflow database {where} has the {schema.describe()}.", id="statestore.I001")
        ]
        messages += [
            checks.Warning(f"The Airflow database {where}: {note}.", id="statestore.W003") for note in schema.notes
        ]
        return messages
    except DatabaseError as exc:
        return [
            checks.Error(
                f"Cannot reach the Airflow database {where}: {exc}".strip(),
                hint="Check AIRFLOW_DATABASE_URL, or Airflow's [database] sql_alchemy_conn.",
                id="statestore.E001",
            )
        ]


def required_privileges(audit_to_airflow_log: bool, regions: bool = False) -> list[tuple[str, str, str]]:
    """(object kind, name, privilege) the dashboard needs on Airflow's database: README, Production →
    Database privileges. Reads of Airflow's tables; reads and writes of the two state tables; the
    sequence of ``task_state_store.id`` for adds; with ``AUDIT_TO_AIRFLOW_LOG`` appends to ``log``; on
    Airflow 3.4 (``regions``) reads of ``dynamic_region``, ``serialized_dag`` and ``xcom_v2``."""
    read_only = [DagRun, TaskInstance, Asset, AssetActive]
    needed = [("table", model._meta.db_table, "SELECT") for model in read_only]
    needed.append(("table", "alembic_version", "SELECT"))  # which Airflow schema (airflow/versions.py)
    if regions:  # the regions, the DAG structure that resolves coordinates, the loops' decisions (an XCom)
        needed += [("table", name, "SELECT") for name in (DynamicRegion._meta.db_table, "serialized_dag", "xcom_v2")]
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


def inspect_privileges(connection, audit_to_airflow_log: bool, regions: bool = False) -> list[checks.CheckMessage]:
    """On PostgreSQL, an error naming each grant the connected role lacks (objects that do not exist
    are left to the checks above: E002 names a missing state table)."""
    if connection.vendor != "postgresql":
        return []
    missing: dict[tuple[str, str], list[str]] = {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        role = cursor.fetchone()[0]
        for kind, name, privilege in required_privileges(audit_to_airflow_log, regions):
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
    if settings.AIRFLOW_API_MODE:
        return inspect_airflow_api()
    connection = connections[airflow_alias()]
    messages = inspect_airflow_database(connection)
    if any(message.is_serious() for message in messages):
        return messages
    regions = versions.schema_of(connection).regions
    return messages + inspect_privileges(connection, settings.AUDIT_TO_AIRFLOW_LOG, regions)


def inspect_airflow_api() -> list[checks.CheckMessage]:
    """Managed Airflow (``AIRFLOW_API_URL``): an Info naming the mode and the Airflow that answers with the token,
    or an error saying what failed: no answer (E070), the token refused or not obtained (E071)."""
    api = rest.client()
    where = api.describe()
    answer = rest.probe(api)
    if "version" in answer:
        return [
            checks.Info(
                f"Airflow's REST API at {where} (Airflow {answer['version']}) answers with the configured token: "
                "the dashboard reads and writes Airflow's state through it, with no metadata database.",
                id="statestore.I010",
            )
        ]
    status = answer["status"]
    if status in (401, 403) or (status is None and "token command" in answer["error"]):
        return [
            checks.Error(
                f"Airflow's REST API at {where} does not accept the dashboard's token: {answer['error']}.",
                hint="Check AIRFLOW_API_TOKEN or AIRFLOW_API_TOKEN_COMMAND (README, Managed Airflow); the token "
                "needs at least read access to DAGs and assets in Airflow.",
                id="statestore.E071",
            )
        ]
    return [
        checks.Error(
            f"Airflow's REST API at {where} does not answer: {answer['error']}.",
            hint="Check AIRFLOW_API_URL (the address of Airflow's API server, without /api/v2), and that this host "
            "can reach it.",
            id="statestore.E070",
        )
    ]


@checks.register("statestore")
def check_airflow_api_settings(app_configs=None, **kwargs):
    """Settings of managed Airflow that contradict each other or what the mode can do."""
    from django.conf import settings

    messages: list[checks.CheckMessage] = []
    if settings.AIRFLOW_API_URL and not settings.AIRFLOW_API_MODE and not settings.AIRFLOW_DATABASE.embedded:
        messages.append(
            checks.Warning(
                "AIRFLOW_API_URL is ignored: AIRFLOW_DATABASE_URL is set, and the database is read instead.",
                hint="Unset one of them (README, Managed Airflow).",
                id="statestore.W070",
            )
        )
    if not settings.AIRFLOW_API_MODE:
        return messages
    if settings.AIRFLOW_API_TOKEN and settings.AIRFLOW_API_TOKEN_COMMAND:
        messages.append(
            checks.Error(
                "Both AIRFLOW_API_TOKEN and AIRFLOW_API_TOKEN_COMMAND are set.",
                hint="Set the token, or the command that prints one, not both.",
                id="statestore.E072",
            )
        )
    if settings.AUDIT_TO_AIRFLOW_LOG:
        messages.append(
            checks.Error(
                "AUDIT_TO_AIRFLOW_LOG needs Airflow's metadata database; with AIRFLOW_API_URL there is none.",
                hint="Unset AUDIT_TO_AIRFLOW_LOG: the dashboard's own audit trail records every change.",
                id="statestore.E073",
            )
        )
    for name in ("AIRFLOW_API_TIMEOUT", "AIRFLOW_API_TOKEN_TTL"):
        if getattr(settings, name) <= 0:
            messages.append(checks.Error(f"{name} must be more than 0.", id="statestore.E074"))
    if settings.AIRFLOW_API_CONCURRENCY < 1 or settings.AIRFLOW_API_RETRIES < 0:
        messages.append(
            checks.Error(
                "AIRFLOW_API_CONCURRENCY must be 1 or more and AIRFLOW_API_RETRIES 0 or more.", id="statestore.E074"
            )
        )
    return messages


@checks.register("statestore")
def check_airflow_config(app_configs=None, **kwargs):
    return [
        checks.Error(message, hint="Fix the option where it is set (see the message).", id="statestore.E004")
        for message in airflow_config().errors()
    ]


@checks.register("statestore")
def check_separate_databases(app_configs=None, **kwargs):
    from django.conf import settings

    if settings.AIRFLOW_API_MODE:
        return []
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
