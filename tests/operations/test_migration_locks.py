"""While `airflow db migrate` runs, its ALTER TABLEs hold Airflow's tables (docs/operations.md, "During an
Airflow upgrade"): the dashboard's queries wait at most ``lock_timeout``, then answer 503 naming the session
that holds the table and Airflow's alembic revision, never a 500 and never the 30 s query deadline; once
the lock is gone, everything answers 200 again. A row held by another writer answers 503 in the same time,
and a write that met it changed and recorded nothing. PostgreSQL only (the STATESTORE_TEST_DB=postgres pass), except the
setting checks at the end.

tests/compat/test_upgrade_in_place.py proves the same against a real 3.3.2 → 3.4.0b2 migration.
"""

import json
import threading
import time

import psycopg
import pytest
from django.db import connections

from statestore_admin.airflow import versions
from statestore_admin.airflow.backends.postgresql.base import LOCK_TIMEOUT, lock_timeout_ms
from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.airflow.versions import REVISION_33, REVISION_34, REVISIONS_BETWEEN, revision_phrase, schema_of
from statestore_admin.records.models import AuditEvent
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True)

TASKS = "/api/v2/dags/etl/dagRuns/manual__locks/taskInstances/t/state-store"
MARGIN = 2.5


@pytest.fixture
def other_session(postgres_only):
    """A session of another client (Airflow's migration, a writer of Airflow's) on the test Airflow database."""
    settings = connections["airflow"].settings_dict
    conn = psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        user=settings["USER"],
        dbname=settings["NAME"],
        application_name="airflow db migrate (test)",
    )
    yield conn
    conn.rollback()
    conn.close()


@pytest.fixture
def scene(committed_airflow_tables, operator, dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="manual__locks")
    task_instance_factory(run, task_id="t")
    task_key_factory(run, task_id="t", key="k", value=1)
    return {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(operator, 'locks')[1]}"}


def timed(call):
    start = time.monotonic()
    result = call()
    return result, time.monotonic() - start


def test_the_session_waits_for_locks_at_most_lock_timeout(postgres_only):
    with connections["airflow"].cursor() as cursor:
        cursor.execute("SHOW lock_timeout")
        assert cursor.fetchone()[0] == f"{LOCK_TIMEOUT:g}s"


def test_a_schema_change_answers_503_naming_it_then_200(scene, other_session, client, operator):
    token = scene
    assert client.get(TASKS, **token).status_code == 200
    other_session.execute("ALTER TABLE task_state_store ADD COLUMN migrating integer")  # uncommitted: holds it
    response, elapsed = timed(lambda: client.get(TASKS, **token))
    assert response.status_code == 503, response.content[:300]
    assert LOCK_TIMEOUT - 0.5 < elapsed < LOCK_TIMEOUT + MARGIN  # the lock timeout, not the query deadline
    detail = response.json()["detail"]
    assert detail.startswith("Airflow's metadata database is unavailable: a schema change holds Airflow's tables")
    assert "`airflow db migrate` running?" in detail and "pages answer again once it has finished" in detail
    assert "(airflow db migrate (test)) holds an exclusive lock on task_state_store" in detail, detail
    assert "ALTER TABLE task_state_store ADD COLUMN migrating" in detail
    assert f"alembic revision {REVISION_33 if not schema_of(connections['airflow']).regions else REVISION_34}" in detail

    client.force_login(operator)
    page = client.get("/")
    assert page.status_code == 503 and "a schema change holds Airflow" in page.content.decode().replace("&#x27;", "'")

    other_session.rollback()
    assert client.get(TASKS, **token).status_code == 200
    assert client.get("/").status_code == 200


def wait_until_waiting_for_a_lock(session, statement: str, seconds: float = 30) -> None:
    """Until a session of ``session``'s database is blocked on a lock, running ``statement``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        session.execute("SELECT pg_stat_clear_snapshot()")  # a transaction sees one snapshot of the activity else
        found = session.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            " AND query LIKE %s",
            [statement + "%"],
        ).fetchone()
        if found:
            return
        time.sleep(0.05)
    raise AssertionError(f"no session waits for a lock running {statement!r}")


def test_a_migration_queued_behind_a_reader_is_named_too(scene, other_session, client):
    """The usual case: a long reader holds the table, the ALTER TABLE waits for it, and every query queues
    behind the ALTER TABLE."""
    token = scene
    settings = connections["airflow"].settings_dict
    reader = psycopg.connect(host=settings["HOST"] or "127.0.0.1", user=settings["USER"], dbname=settings["NAME"])
    try:
        reader.execute("SELECT count(*) FROM task_state_store").fetchone()
        other_session.execute("SET lock_timeout = '20s'")
        alter = threading.Thread(
            target=lambda: other_session.execute("ALTER TABLE task_state_store ADD COLUMN migrating integer"),
            daemon=True,
        )
        alter.start()
        wait_until_waiting_for_a_lock(reader, "ALTER TABLE task_state_store")
        response = client.get(TASKS, **token)
        assert response.status_code == 503
        assert "waits for an exclusive lock on task_state_store: ALTER TABLE" in response.json()["detail"]
    finally:
        reader.close()
        alter.join(timeout=30)
    other_session.rollback()
    assert client.get(TASKS, **token).status_code == 200


def test_a_row_held_by_another_writer_answers_503_and_changes_nothing(scene, other_session, client):
    token = scene
    other_session.execute("SELECT 1 FROM task_state_store WHERE key = 'k' FOR UPDATE")
    put = {"data": json.dumps({"value": 2}), "content_type": "application/json", **token}
    response, elapsed = timed(lambda: client.put(f"{TASKS}/k", **put))
    assert response.status_code == 503 and elapsed < LOCK_TIMEOUT + MARGIN
    detail = response.json()["detail"]
    assert "a lock on Airflow's tables was not granted within 3 s (lock_timeout): another transaction holds it" in (
        detail
    )
    other_session.rollback()
    assert TaskStateStore.objects.get(key="k").value == "1"
    assert not AuditEvent.objects.exists()  # the row is locked before its change is recorded: nothing happened
    assert client.put(f"{TASKS}/k", **put).status_code == 204


def test_lock_timeout_is_under_the_statement_timeout():
    assert lock_timeout_ms(30.0) == 3000  # statement_timeout 29 s
    assert lock_timeout_ms(3.0) == 1350  # statement_timeout 2.7 s: half of it
    assert lock_timeout_ms(None) == 3000  # no deadline: still no endless wait behind a migration


def test_revisions_between_the_series_are_named():
    assert revision_phrase(REVISION_33) == f"alembic revision {REVISION_33} (Airflow 3.3's)"
    assert revision_phrase("54a27b6f9d01") == (
        "alembic revision 54a27b6f9d01 (done up to 0143_3_4_0_add_dynamic_region_storage, on the way from 3.3 to 3.4)"
    )
    assert all(revision in revision_phrase(revision) for revision in REVISIONS_BETWEEN)
    assert revision_phrase(None) == "no alembic revision recorded"


def test_a_kept_connection_notices_the_revision_moved_before_its_next_request(postgres_only, other_session):
    """The health check of a kept connection reads the alembic revision (instead of SELECT 1): once
    `airflow db migrate` has committed a step, the next request reads the schema again, and one at a revision
    between 3.3's and 3.4's is refused by name, not run against columns that are being renamed."""
    connection = connections["airflow"]
    known = schema_of(connection)
    assert connection.is_usable() and versions.cached_schema(connection) is known  # nothing moved
    (revision,) = other_session.execute("SELECT version_num FROM alembic_version").fetchone()
    other_session.execute("UPDATE alembic_version SET version_num = %s", [REVISIONS_BETWEEN[13]])
    other_session.commit()
    try:
        assert connection.is_usable()  # the connection is fine; what it knew of the schema is not
        assert versions.cached_schema(connection) is None
        with pytest.raises(versions.UnsupportedAirflowSchema, match="`airflow db migrate` has not finished"):
            schema_of(connection)
    finally:
        other_session.execute("UPDATE alembic_version SET version_num = %s", [revision])
        other_session.commit()
    assert schema_of(connection) == known
