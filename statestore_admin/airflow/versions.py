"""Which Airflow schema the metadata database has, read from the database itself (docs/airflow.md).

Airflow 3.3 (3.3.0 to 3.3.2 share one schema) addresses a task instance's state by ``map_index``.
Airflow 3.4 renames that column ``region_index`` in ``task_instance`` and ``task_state_store`` and adds
``region_id`` (the dynamic region, a UUID; all zeros outside any region), so two task instances of one
task and index can sit in different regions (two iterations of a loop) with separate state. It also
records the task writer of an asset key. Operators upgrade Airflow in place, so the dashboard reads the
columns (and Airflow's alembic revision) on every new connection and compiles its SQL for what it
finds: ``AirflowSchema`` says which, and the model fields of ``airflow.models`` ask it for their column.

Anything else (columns neither version has, a migration that has not finished) is refused with
``UnsupportedAirflowSchema``, which names what differs: a 503 on pages and the API, an error in
``manage.py check``, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from statestore_admin.airflow.availability import AirflowDatabaseUnavailable

# Airflow's own value of region_id for a task instance outside any region (``SENTINEL_REGION_ID``).
SENTINEL_REGION_ID = UUID(int=0)

# Alembic heads (airflow/utils/db.py, _REVISION_HEADS_MAP): 3.3.0 to 3.3.2 share one; 3.4.0b2's.
REVISION_33 = "d2f4e1b3c5a7"
REVISION_34 = "9cffe90fa0c0"
# The 3.4 migrations between those heads, oldest first: while `airflow db migrate` runs, the alembic
# revision is one of them (migrations commit one by one).
REVISIONS_BETWEEN = (
    "76c46545c91e",
    "c7f0a5d2e9b4",
    "8d3f1a6b2c47",
    "f8c2a1d94e03",
    "b6a9c2e7d410",
    "5182d0596ee2",
    "3b7a91c5df20",
    "c9f4b3e7a218",
    "a61f0c9d2b47",
    "ca8499dc1004",
    "e5a91c7f42b3",
    "90e4d18ccadf",
    "e7c2a91bd540",
    "54a27b6f9d01",
    "7f8c9a2d410e",
    "c3e7a9182f64",
    "a5d7b9c13e40",
)

# Airflow's own names of those migrations (airflow/migrations/versions/, 3.4.0b2), to name the one a
# database is at while `airflow db migrate` runs.
MIGRATION_NAMES = {
    "76c46545c91e": "0130_3_4_0_add_new_index_for_trigger",
    "c7f0a5d2e9b4": "0131_3_4_0_lower_case_team_names",
    "8d3f1a6b2c47": "0132_3_4_0_add_team_name_to_log",
    "f8c2a1d94e03": "0133_3_4_0_add_scope_columns_to_job",
    "b6a9c2e7d410": "0134_3_4_0_add_dag_draining_state",
    "5182d0596ee2": "0135_3_4_0_widen_revoked_token_jti",
    "3b7a91c5df20": "0136_3_4_0_fold_task_map_into_xcom_mapped_length",
    "c9f4b3e7a218": "0137_3_4_0_add_job_team_association_table",
    "a61f0c9d2b47": "0138_3_4_0_allocate_pending_task_attempt_numbers",
    "ca8499dc1004": "0139_3_4_0_add_source_reference_to_import_error",
    "e5a91c7f42b3": "0140_3_4_0_add_language_to_dag_code",
    "90e4d18ccadf": "0141_3_4_0_add_timetable_asset_gated_to_dagmodel",
    "e7c2a91bd540": "0142_3_4_0_unify_task_attempt_ownership",
    "54a27b6f9d01": "0143_3_4_0_add_dynamic_region_storage",
    "7f8c9a2d410e": "0144_3_4_0_rename_stored_map_index",
    "c3e7a9182f64": "0145_3_4_0_add_task_identity_to_events",
    "a5d7b9c13e40": "0146_3_4_0_add_asset_state_writer_identity",
    REVISION_34: "0147_3_4_0_add_commit_allows_update_to_connection_test",
}


def revision_phrase(revision: str | None) -> str:
    """Where ``revision`` stands on the way from 3.3 to 3.4, for a reason shown to people."""
    if revision is None:
        return "no alembic revision recorded"
    for series, head in REVISIONS.items():
        if revision == head:
            return f"alembic revision {revision} ({NAMES[series]}'s)"
    if revision in REVISIONS_BETWEEN:
        return f"alembic revision {revision} (done up to {MIGRATION_NAMES[revision]}, on the way from 3.3 to 3.4)"
    return f"alembic revision {revision}"


_TASK_STATE = {"id", "dag_run_id", "task_id", "key", "dag_id", "run_id", "value", "updated_at", "expires_at"}
_ASSET_STATE = {
    "asset_id",
    "key",
    "value",
    "updated_at",
    "last_updated_by_kind",
    "last_updated_by_dag_id",
    "last_updated_by_run_id",
    "last_updated_by_task_id",
    "last_updated_by_map_index",
}
_ASSET_WRITER_34 = {
    "last_updated_by_task_instance_id",
    "last_updated_by_region_id",
    "last_updated_by_region_index",
    "last_updated_by_try_number",
}
_TASK_INSTANCE = {"id", "dag_id", "task_id", "run_id", "state", "try_number"}

# The columns each series has in the tables the dashboard reads and writes.
COLUMNS = {
    "3.3": {
        "task_state_store": _TASK_STATE | {"map_index"},
        "asset_state_store": _ASSET_STATE,
        "task_instance": _TASK_INSTANCE | {"map_index"},
    },
    "3.4": {
        "task_state_store": _TASK_STATE | {"region_id", "region_index"},
        "asset_state_store": _ASSET_STATE | _ASSET_WRITER_34,
        "task_instance": _TASK_INSTANCE | {"region_id", "region_index", "working_set"},
    },
}
# The state tables are written: a column we do not know there could be one we fail to fill.
WRITTEN_TABLES = ("task_state_store", "asset_state_store")
REVISIONS = {"3.3": REVISION_33, "3.4": REVISION_34}
NAMES = {"3.3": "Airflow 3.3", "3.4": "Airflow 3.4 (dynamic regions)"}


class UnsupportedAirflowSchema(AirflowDatabaseUnavailable):
    """The metadata database has neither the 3.3 nor the 3.4 schema (or is between them)."""

    @property
    def detail(self) -> str:
        return f"Airflow's metadata database has a schema this dashboard does not support: {self.reason}"


class AirflowSchemaChanged(AirflowDatabaseUnavailable):
    """A query met a column or table that is not there any more: Airflow's schema changed under us."""

    @property
    def detail(self) -> str:
        return f"Airflow's schema changed while the dashboard was using it ({self.reason}); try again"


@dataclass(frozen=True)
class AirflowSchema:
    """The schema of one Airflow series, as found in a database: ``series`` "3.3" or "3.4"."""

    series: str
    revision: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def regions(self) -> bool:
        """Task state addressed by (region_id, region_index) rather than by map_index."""
        return self.series == "3.4"

    @property
    def index_column(self) -> str:
        return "region_index" if self.regions else "map_index"

    @property
    def name(self) -> str:
        return NAMES[self.series]

    @property
    def known_revision(self) -> bool:
        return self.revision == REVISIONS[self.series]

    def describe(self) -> str:
        """One line for the overview, ``manage.py check`` and ``/readyz``."""
        revision = f"alembic revision {self.revision}" if self.revision else "no alembic revision recorded"
        return f"{self.name} schema, {revision}"

    def has(self, table: str, column: str) -> bool:
        return column in COLUMNS[self.series][table]

    def as_dict(self) -> dict:
        return {"series": self.series, "revision": self.revision, "regions": self.regions, "name": self.name}


SCHEMA_33 = AirflowSchema("3.3", REVISION_33)
SCHEMA_34 = AirflowSchema("3.4", REVISION_34)


def classify(columns: dict[str, set[str]], revision: str | None) -> AirflowSchema:
    """The series whose columns ``columns`` (table → column names) has; ``UnsupportedAirflowSchema``
    naming the differences otherwise. An unknown alembic revision with known columns is accepted, with
    a note (a later release of the same series, e.g. 3.4.0 after 3.4.0b2)."""
    if revision in REVISIONS_BETWEEN:
        raise UnsupportedAirflowSchema(
            f"its alembic revision {revision} lies between Airflow 3.3's ({REVISION_33}) and 3.4's ({REVISION_34}): "
            "`airflow db migrate` has not finished (or failed); pages answer again once it has"
        )
    missing_tables = [t for t in COLUMNS["3.3"] if not columns.get(t)]
    if missing_tables:
        raise UnsupportedAirflowSchema(
            f"it has no table {', '.join(missing_tables)}: the state store needs Airflow 3.3 or later "
            "(run `airflow db migrate`, or point AIRFLOW_DATABASE_URL at the right database)"
        )
    differences = {}
    for series, tables in COLUMNS.items():
        problems = []
        for table, expected in tables.items():
            found = columns[table]
            missing = sorted(expected - found)
            unknown = sorted(found - expected) if table in WRITTEN_TABLES else []
            if missing:
                problems.append(f"{table} lacks {', '.join(missing)}")
            if unknown:
                problems.append(f"{table} has unknown columns {', '.join(unknown)}")
        if not problems:
            notes = ()
            if revision == UNREADABLE:
                revision = None
                notes = (
                    "the dashboard's role may not read alembic_version (GRANT SELECT ON alembic_version), so "
                    f"only the columns tell the schema: {NAMES[series]}'s",
                )
            elif revision != REVISIONS[series]:
                notes = (
                    f"alembic revision {revision or '(none)'} is not {NAMES[series]}'s {REVISIONS[series]}; "
                    f"the columns are {NAMES[series]}'s, so the dashboard uses them",
                )
            return AirflowSchema(series, revision, notes)
        differences[series] = problems
    described = "; ".join(f"against {NAMES[s]}: {', '.join(p)}" for s, p in differences.items())
    between = "map_index" in columns["task_state_store"] and "region_id" in columns["task_state_store"]
    hint = " (a migration to 3.4 that has not finished?)" if between else ""
    raise UnsupportedAirflowSchema(f"alembic revision {revision or '(none)'}{hint}: {described}")


def _columns(connection) -> dict[str, set[str]]:
    tables = tuple(COLUMNS["3.3"])
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = ANY(%s)",
                [list(tables)],
            )
            found: dict[str, set[str]] = {t: set() for t in tables}
            for table, column in cursor.fetchall():
                found[table].add(column)
            return found
        # PRAGMA table_info, not Django's get_table_description: that one first probes JSON support inside a
        # transaction, and on an Airflow alias in IMMEDIATE mode that waits for any writer's lock (up to the
        # busy timeout) for a read that needs no lock at all.
        existing = set(connection.introspection.table_names(cursor))
        found = {}
        for table in tables:
            cursor.execute(f"PRAGMA table_info({connection.ops.quote_name(table)})")
            found[table] = {row[1] for row in cursor.fetchall()} if table in existing else set()
        return found


UNREADABLE = "unreadable"  # the role may not read alembic_version: the columns alone decide


def _revision(connection) -> str | None:
    """Airflow's alembic revision, None without one, ``UNREADABLE`` when the role lacks SELECT on it (asked
    first: a refused query would abort the caller's transaction)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT to_regclass('alembic_version') IS NOT NULL, "
                "has_table_privilege(to_regclass('alembic_version'), 'SELECT')"
            )
            exists, readable = cursor.fetchone()
            if not exists:
                return None
            if not readable:
                return UNREADABLE
        elif "alembic_version" not in connection.introspection.table_names(cursor):
            return None
        cursor.execute("SELECT version_num FROM alembic_version")
        row = cursor.fetchone()
    return row[0] if row else None


def detect(connection) -> AirflowSchema:
    """Read the schema of the database behind ``connection`` (a few small catalog queries). The columns are
    read between two reads of the alembic revision, again while those differ: `airflow db migrate` commits each
    migration's columns with its revision, so columns read while the revision stayed the same belong to it. (Read
    once each, a migration committed between the two reads paired 3.4's revision with columns from before it:
    a schema refused as unknown instead of a migration named.)"""
    for _ in range(3):
        before = _revision(connection)
        columns = _columns(connection)
        revision = _revision(connection)
        if revision == before:
            break
    return classify(columns, revision)


_CACHE = "_statestore_airflow_schema"


def schema_of(connection) -> AirflowSchema:
    """The schema behind ``connection``, read once per database connection (a reconnect reads it again,
    and ``forget`` drops it when a query finds the schema changed)."""
    connection.ensure_connection()
    cached = getattr(connection, _CACHE, None)
    if cached is not None and cached[0] is connection.connection:
        return cached[1]
    schema = detect(connection)
    setattr(connection, _CACHE, (connection.connection, schema))
    return schema


def cached_schema(connection) -> AirflowSchema | None:
    """What ``schema_of`` knows of ``connection``'s current database connection, without reading anything."""
    cached = connection.__dict__.get(_CACHE)
    return cached[1] if cached is not None and cached[0] is connection.connection else None


def forget(connection) -> bool:
    """Drop what ``schema_of`` knows of ``connection``; True when it knew something."""
    return connection.__dict__.pop(_CACHE, None) is not None
