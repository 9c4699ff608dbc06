"""Least privilege on Airflow's database: a role with exactly the README's grants runs everything, and
`manage.py check` names a grant the role lacks (PostgreSQL only).

Each test creates an Airflow database from Airflow 3.3.2's DDL and a role of its own, applies the SQL
blocks of the README's "Database privileges" section to it word for word, and runs the dashboard in
subprocesses whose AIRFLOW_DATABASE_URL logs in as that role. Role and database are dropped afterwards.
"""

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from django.db import connections

from statestore_admin.airflow.schema import fixture_sql
from tests.airflow_schema import fixture_index_column

ROOT = Path(__file__).resolve().parents[2]
ROLE_IN_README = "statestore_admin"
PASSWORD_IN_README = "change-me"


def readme_grants() -> list[str]:
    """The ```sql blocks of README → Production → Database privileges: the base grants, the log's, then
    Airflow 3.4's."""
    section = (ROOT / "README.md").read_text().split("### Database privileges", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sql\n(.*?)```", section, re.S)


@pytest.fixture
def server():
    """libpq settings of the PostgreSQL server the test Airflow database lives on."""
    if connections["airflow"].vendor != "postgresql":
        pytest.skip("PostgreSQL only (grants): runs in the STATESTORE_TEST_DB=postgres pass")
    db = connections["airflow"].settings_dict
    return {"host": db["HOST"] or "127.0.0.1", "port": db["PORT"] or 5432, "user": db["USER"] or "postgres"}


def connect(server, dbname, **kwargs):
    return psycopg.connect(
        host=server["host"], port=server["port"], user=server["user"], dbname=dbname, autocommit=True, **kwargs
    )


class Deployment:
    """An Airflow database, a role with the README's grants, and a dashboard database of its own."""

    def __init__(self, server, tmp_path):
        suffix = uuid.uuid4().hex[:10]
        self.server, self.tmp_path = server, tmp_path
        self.dbname, self.role = f"grants_airflow_{suffix}", f"grants_role_{suffix}"

    def admin(self):
        return connect(self.server, self.dbname)

    def grant(self, block: str) -> None:
        sql = block.replace(ROLE_IN_README, self.role).replace("DATABASE airflow", f"DATABASE {self.dbname}")
        with self.admin() as conn:
            conn.execute(sql)

    def env(self, **extra) -> dict:
        url = f"postgresql://{self.role}:{PASSWORD_IN_README}@{self.server['host']}:{self.server['port']}/{self.dbname}"
        return {
            "PATH": os.environ["PATH"],
            "HOME": str(self.tmp_path),
            "AIRFLOW_HOME": os.environ["AIRFLOW_HOME"],
            "STATESTORE_VAR_DIR": str(self.tmp_path / "var"),
            "SECRET_KEY": "grants-test",
            "DATABASE_URL": f"sqlite:///{self.tmp_path / 'dashboard.sqlite3'}",
            "AIRFLOW_DATABASE_URL": url,
            "ALLOWED_HOSTS": "testserver",
            **extra,
        }

    def manage(self, *args, **extra):
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=180,
        )

    def scalar(self, sql: str):
        with self.admin() as conn:
            return conn.execute(sql).fetchone()[0]


@pytest.fixture
def deployment(server, tmp_path):
    deployment = Deployment(server, tmp_path)
    with connect(server, "postgres") as conn:
        conn.execute(f'CREATE DATABASE "{deployment.dbname}"')
    try:
        with deployment.admin() as conn:
            conn.execute(fixture_sql("postgresql"))
            run_id = conn.execute(
                "INSERT INTO dag_run (dag_id, run_id, run_type, run_after, state) "
                "VALUES ('etl', 'manual__1', 'manual', now(), 'success') RETURNING id"
            ).fetchone()[0]
            conn.execute(
                "INSERT INTO task_instance (id, dag_id, task_id, run_id, try_number, pool, pool_slots, state) "
                "VALUES (gen_random_uuid(), 'etl', 'load', 'manual__1', 1, 'default_pool', 1, 'success')"
            )
            conn.execute(
                f"INSERT INTO task_state_store (dag_run_id, task_id, {fixture_index_column()}, key, dag_id, run_id, "
                "value, updated_at, expires_at) VALUES "
                f"({run_id}, 'load', -1, 'cursor', 'etl', 'manual__1', '{{\"id\": 1}}', now(), "
                "now() + interval '1 day'),"
                f"({run_id}, 'load', -1, 'old', 'etl', 'manual__1', '1', now(), now() - interval '1 day')"
            )
            conn.execute(
                'INSERT INTO asset (name, uri, "group", extra, created_at, updated_at) '
                "VALUES ('orders', 's3://orders', 'asset', '{}', now(), now())"
            )
            conn.execute("INSERT INTO asset_active (name, uri) VALUES ('orders', 's3://orders')")
            conn.execute(
                "INSERT INTO asset_state_store (asset_id, key, value, updated_at, last_updated_by_kind) "
                "SELECT id, 'watermark', '\"2026-11-30\"', now(), 'api' FROM asset"
            )
        base, _, regions = readme_grants()
        deployment.grant(base)
        if fixture_index_column() == "region_index":  # an Airflow 3.4 database: its tables too
            deployment.grant(regions)
        migrated = deployment.manage("migrate", "--database", "default", "-v", "0")
        assert migrated.returncode == 0, migrated.stderr
        yield deployment
    finally:
        with connect(server, "postgres") as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{deployment.dbname}" WITH (FORCE)')
            conn.execute(f"DROP ROLE IF EXISTS {deployment.role}")


# Runs in the dashboard's process (manage.py shell) as the limited role: pages, page actions, API writes.
PROBE = r"""
import json
from urllib.parse import quote
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.tokens.models import ApiToken

user = get_user_model().objects.create_superuser("ops", password="pw-for-tests")
_, token = ApiToken.issue(user, "grants")
pages, api = Client(), Client(HTTP_AUTHORIZATION=f"Bearer {token}")
pages.force_login(user)
key = TaskStateStore.objects.get(key="cursor")
asset_id = AssetStateStore.objects.get(key="watermark").asset_id
run = key.dag_run_id
seen = {}
static = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
with override_settings(STORAGES={"default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
                                 "staticfiles": static}):  # the pages, not the static files, are tested here
    for path in ["/", "/overview/largest/", "/dags/", "/dags/etl/", f"/runs/{run}/", f"/runs/{run}/tasks/load/",
                 f"/keys/task/{key.id}/", "/assets/", f"/assets/{asset_id}/", f"/assets/{asset_id}/key/?key=watermark",
                 "/search/?key=o", "/audit/"]:
        seen[f"GET {path}"] = pages.get(path).status_code
    seen["POST expiry"] = pages.post(f"/keys/task/{key.id}/expiry/", {"expiry": "never"}).status_code
    seen["POST add key"] = pages.post(
        f"/runs/{run}/tasks/load/add/", {"key": "added", "value": "1", "map_index": "-1", "expiry": "never"}
    ).status_code
tasks = f"/api/v2/dags/etl/dagRuns/{quote(key.run_id)}/taskInstances/load/state-store"
assets = f"/api/v2/assets/{asset_id}/state-store"
put = lambda url, value: api.put(url, json.dumps({"value": value}), content_type="application/json").status_code
seen["PUT new task key"] = put(f"{tasks}/api-new", 1)
seen["PUT task key again"] = put(f"{tasks}/api-new", 2)
seen["DELETE task key"] = api.delete(f"{tasks}/api-new").status_code
seen["PUT new asset key"] = put(f"{assets}/api-new", "a")
seen["DELETE asset key"] = api.delete(f"{assets}/api-new").status_code
print(json.dumps(seen))
"""


def test_the_readme_grants_are_enough_for_check_pages_api_writes_and_gc(deployment):
    check = deployment.manage("check")
    assert check.returncode == 0, check.stderr
    assert "statestore.E" not in check.stdout + check.stderr

    probe = deployment.manage("shell", "--no-imports", "-c", PROBE)
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout.strip().splitlines()[-1])
    pages = {what: status for what, status in seen.items() if what.startswith("GET ")}
    assert set(pages.values()) == {200}, seen
    assert seen["POST expiry"] == seen["POST add key"] == 302, seen  # done: back to the page
    assert [seen[f"{what}"] for what in ("PUT new task key", "PUT task key again", "DELETE task key")] == [204] * 3
    assert seen["PUT new asset key"] == seen["DELETE asset key"] == 204, seen
    assert deployment.scalar("SELECT expires_at IS NULL FROM task_state_store WHERE key = 'cursor'") is True
    assert deployment.scalar("SELECT count(*) FROM task_state_store WHERE key = 'added'") == 1
    assert deployment.scalar("SELECT count(*) FROM task_state_store WHERE key = 'api-new'") == 0

    gc = deployment.manage("state_store_clean", "--json")
    assert gc.returncode == 0, gc.stderr
    assert json.loads(gc.stdout)["rows_deleted"] == 1
    assert deployment.scalar("SELECT count(*) FROM task_state_store WHERE key = 'old'") == 0


def test_a_missing_sequence_grant_fails_check_naming_it(deployment):
    deployment.grant(f"REVOKE USAGE ON SEQUENCE task_state_store_id_seq FROM {ROLE_IN_README};")
    check = deployment.manage("check")
    assert check.returncode != 0
    assert "statestore.E006" in check.stderr
    assert f"The role '{deployment.role}' lacks USAGE on sequence task_state_store_id_seq" in check.stderr
    assert f'GRANT USAGE ON SEQUENCE task_state_store_id_seq TO "{deployment.role}"' in check.stderr
    assert check.stderr.count("statestore.E006") == 1  # nothing else is missing


def test_a_missing_table_grant_fails_check_naming_it(deployment):
    deployment.grant(f"REVOKE UPDATE, DELETE ON asset_state_store FROM {ROLE_IN_README};")
    check = deployment.manage("check")
    assert check.returncode != 0
    assert "lacks UPDATE, DELETE on table asset_state_store" in check.stderr


def test_airflow_log_grants_are_checked_only_when_auditing_to_it(deployment):
    assert deployment.manage("check").returncode == 0
    check = deployment.manage("check", AUDIT_TO_AIRFLOW_LOG="1")
    assert check.returncode != 0
    for missing in ("INSERT on table log", "SELECT on column log.id", "USAGE on sequence log_id_seq"):
        assert f"lacks {missing} " in check.stderr, check.stderr
    assert "GRANT SELECT (id) ON TABLE log" in check.stderr

    _, log_grants, _ = readme_grants()
    deployment.grant(log_grants)
    check = deployment.manage("check", AUDIT_TO_AIRFLOW_LOG="1")
    assert check.returncode == 0, check.stderr
    probe = deployment.manage("shell", "--no-imports", "-c", PROBE, AUDIT_TO_AIRFLOW_LOG="1")
    assert probe.returncode == 0, probe.stderr
    assert json.loads(probe.stdout.strip().splitlines()[-1])["PUT new task key"] == 204
    assert deployment.scalar("SELECT count(*) FROM log") > 0


def test_without_alembic_version_the_columns_decide_and_check_names_the_grant(deployment):
    deployment.grant(f"REVOKE SELECT ON alembic_version FROM {ROLE_IN_README};")
    check = deployment.manage("check")
    assert check.returncode != 0
    assert "statestore.W003" in check.stderr and "may not read alembic_version" in check.stderr
    assert f'GRANT SELECT ON TABLE alembic_version TO "{deployment.role}"' in check.stderr


def test_on_airflow_34_the_region_tables_are_checked(deployment):
    if fixture_index_column() != "region_index":
        pytest.skip("Airflow 3.4's tables: runs with AIRFLOW_FIXTURE_SERIES=3.4")
    deployment.grant(f"REVOKE SELECT ON dynamic_region, serialized_dag, xcom_v2 FROM {ROLE_IN_README};")
    check = deployment.manage("check")
    assert check.returncode != 0
    for table in ("dynamic_region", "serialized_dag", "xcom_v2"):
        assert f"lacks SELECT on table {table} " in check.stderr, check.stderr
