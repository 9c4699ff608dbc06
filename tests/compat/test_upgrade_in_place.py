"""The upgrade in place, with real Airflow: a database made by Airflow 3.3.2 (`airflow db migrate`, state
written by `airflow dags test` and by its MetastoreBackend), a dashboard serving it with audit events (a
delete among them), then Airflow 3.4.0b2's `airflow db migrate` while the dashboard keeps being asked.

During the migration the pages and the API answer 503 saying a migration is under way (never a 500, never a
30 s wait); afterwards every key is there with its coordinates (ids unchanged, map_index now region_index in
the sentinel region), old links to keys resolve, `manage.py check` names the 3.4 schema, and the undo of the
delete made before the upgrade puts the key back onto its 3.4 coordinates.

On a database this small the whole migration takes seconds: a reader of Airflow's own (a transaction that
has read task_state_store and stays open, like a long query of the scheduler) makes the migration's ALTER
TABLE wait for ten seconds, which is when a real installation's pages would otherwise hang.

Run with `pytest -m compat tests/compat/test_upgrade_in_place.py -s` to see the figures it prints.
"""

import html
import json
import re
import subprocess
import time
from urllib.parse import quote

import pytest
import requests

from .conftest import DAG_ID, Dashboard, query
from .upgrade_harness import Poller, TableReader, airflow_34, logged_in, waiting_ddl

pytestmark = pytest.mark.compat

SENTINEL = "00000000-0000-0000-0000-000000000000"
HOLD_SECONDS = 10
# What a 503 during the migration says: the lock held by the schema change, the alembic revision between
# 3.3's and 3.4's, or a column that went away under a query.
NAMES_THE_MIGRATION = re.compile(r"schema change|db migrate|schema changed|migration")


def task_rows(db: str, index_column: str) -> dict[int, tuple]:
    rows = query(
        db, f"SELECT id, dag_id, run_id, task_id, {index_column}, key, value, expires_at FROM task_state_store"
    )
    return {row[0]: row[1:] for row in rows}


def key_url(url: str, dag_id: str, run_id: str, task_id: str, key: str) -> str:
    return (
        f"{url}/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/"
        f"state-store/{quote(key, safe='')}"
    )


def test_upgrade_in_place_from_332_to_340b2(airflow, golden, servers):
    new_airflow = airflow_34(airflow)
    db = airflow.copy(golden["db"], "upgrade")
    run_id = golden["run_id"]
    dashboard = Dashboard(airflow, db)
    token = dashboard.setup()
    check = dashboard.manage("check")
    assert check.returncode == 0 and "Airflow 3.3 schema" in check.stdout + check.stderr, check.stdout + check.stderr
    process, url = dashboard.server()
    servers.append(process)
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {token}"
    page = logged_in(url)
    run_pk = query(db, "SELECT id FROM dag_run WHERE dag_id = %s", [DAG_ID])[0][0]

    # Before: audit events through the dashboard, among them the delete of a mapped task's key.
    deleted = ("fold", 1, "checkpoint")
    assert api.get(key_url(url, DAG_ID, run_id, "fold", "checkpoint"), params={"map_index": 1}).status_code == 200
    before_value = query(
        db,
        "SELECT value, expires_at FROM task_state_store "
        "WHERE task_id = 'fold' AND map_index = 1 AND key = 'checkpoint'",
    )[0]
    response = api.delete(key_url(url, DAG_ID, run_id, *deleted[::2]), params={"map_index": 1})
    assert response.status_code == 204, response.text
    response = api.put(
        key_url(url, DAG_ID, run_id, "write", "upgrade/marker"), json={"value": {"before": "3.4"}, "expires_at": None}
    )
    assert response.status_code == 204, response.text
    events = api.get(f"{url}/api/statestore/v1/audit-events").json()["items"]
    delete_event = next(e for e in events if e["action"] == "delete")
    assert (delete_event["task_id"], delete_event["map_index"], delete_event["region_id"]) == ("fold", 1, None)
    export = page.get(f"{url}/runs/{run_pk}/export/", params={"format": "json"})
    assert export.status_code == 200, export.text[:300]
    document = export.json()
    assert all(entry["region_id"] is None for entry in document["keys"])

    rows_before = task_rows(db, "map_index")
    assets_before = query(db, "SELECT asset_id, key, value FROM asset_state_store ORDER BY asset_id, key")
    links = {key_id: f"{url}/keys/task/{key_id}/" for key_id in rows_before}
    for key_id, link in links.items():
        shown = page.get(link)
        assert shown.status_code == 200 and html.escape(rows_before[key_id][4]) in shown.text, link

    # The migration, while the dashboard is asked what it has, every 0.1 s.
    targets = {
        "page /": (page, f"{url}/"),
        "page run": (logged_in(url), f"{url}/runs/{run_pk}/"),  # a session per thread
        "api list": (api, key_url(url, DAG_ID, run_id, "write", "")[:-1]),
    }
    reader = TableReader(db, "task_state_store")
    started = time.monotonic()
    with Poller(targets) as poller:
        time.sleep(1)
        migrate = subprocess.Popen(
            [str(new_airflow.venv / "bin" / "airflow"), "db", "migrate"],
            env=new_airflow.env(db),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not waiting_ddl(db) and time.monotonic() < deadline and migrate.poll() is None:
                time.sleep(0.2)
            queued = waiting_ddl(db)
            time.sleep(HOLD_SECONDS)
        finally:
            reader.release()
        output, _ = migrate.communicate(timeout=600)
        migrated_in = time.monotonic() - started
        time.sleep(2)
    assert migrate.returncode == 0, output[-3000:]
    assert query(db, "SELECT version_num FROM alembic_version") == [("9cffe90fa0c0",)]
    assert queued, "the migration never waited for the reader's table"

    answers = poller.answers
    statuses = poller.statuses()
    unavailable = [a for a in answers if a.status == 503]
    print(f"\nmigration: {migrated_in:.1f} s (the ALTER TABLE held {HOLD_SECONDS} s behind a reader: {queued[0]})")
    print(f"polls: {len(answers)}, statuses seen: {statuses}, 503s: {len(unavailable)}")
    for what in targets:
        mine = [a for a in answers if a.what == what]
        counts = {s: sum(a.status == s for a in mine) for s in sorted({a.status for a in mine})}
        print(f"  {what}: {len(mine)} polls, statuses {counts}")
    print(f"longest answer: {max(a.seconds for a in answers):.1f} s")
    for reason in sorted({(a.what, a.text.strip()[:600]) for a in unavailable}):
        print(f"  503 {reason[0]}: {reason[1]}")
    assert set(statuses) <= {200, 503}, [a for a in answers if a.status not in (200, 503)][:3]
    assert unavailable, "no poll fell into the migration"
    assert all(NAMES_THE_MIGRATION.search(a.text) for a in unavailable), [
        a.text for a in unavailable if not NAMES_THE_MIGRATION.search(a.text)
    ][:3]
    assert any("schema change holds Airflow's tables" in a.text for a in unavailable)
    assert max(a.seconds for a in answers) < 15  # the lock_timeout, not the 30 s query deadline
    last = {a.what: a.status for a in answers}  # each target's last answer, after the migration
    assert last == {what: 200 for what in targets}, last

    # After: the same rows, ids and values; map_index is now region_index, in the sentinel region.
    rows_after = task_rows(db, "region_index")
    regions = query(db, "SELECT DISTINCT region_id::text FROM task_state_store")
    assets_after = query(db, "SELECT asset_id, key, value FROM asset_state_store ORDER BY asset_id, key")
    print(
        f"task rows before: {len(rows_before)}, after: {len(rows_after)}; asset rows before: "
        f"{len(assets_before)}, after: {len(assets_after)}; regions after: {regions}"
    )
    assert rows_after == rows_before and assets_after == assets_before
    assert regions == [(SENTINEL,)]
    check = dashboard.manage("check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "Airflow 3.4 (dynamic regions) schema, alembic revision 9cffe90fa0c0" in check.stdout + check.stderr
    print(f"manage.py check: {[line for line in (check.stdout + check.stderr).splitlines() if 'schema' in line]}")

    for key_id, (dag_id, run, task_id, index, key, value, _) in rows_after.items():
        entry = api.get(key_url(url, dag_id, run, task_id, key), params={"map_index": index})
        assert entry.status_code == 200 and entry.json()["value"] == json.loads(value), (key_id, entry.text)
        shown = page.get(links[key_id])
        assert shown.status_code == 200 and html.escape(key) in shown.text, links[key_id]

    # The undo of the delete made on 3.3 restores the key onto its 3.4 coordinates.
    response = api.post(f"{url}/api/statestore/v1/audit-events/{delete_event['id']}/restore")
    assert response.status_code == 200 and response.json()["restored"] == 1, response.text
    restored = query(
        db,
        "SELECT region_id::text, region_index, value, expires_at FROM task_state_store "
        "WHERE task_id = 'fold' AND region_index = 1 AND key = 'checkpoint'",
    )
    assert restored == [(SENTINEL, 1, *before_value)]
    undo = api.get(f"{url}/api/statestore/v1/audit-events/{response.json()['events'][0]}").json()
    assert (undo["map_index"], undo["region_id"], undo["keys"][0]["region_id"]) == (1, None, None)

    # An export made on 3.3 restores onto the same key after the upgrade.
    assert api.delete(key_url(url, DAG_ID, run_id, "write", "never")).status_code == 204
    response = api.post(f"{url}/api/statestore/v1/restore", json=document)
    assert response.status_code == 200 and response.json()["restored"] == 1, response.text
    assert query(
        db, "SELECT region_id::text, region_index FROM task_state_store WHERE task_id = 'write' AND key = 'never'"
    ) == [(SENTINEL, -1)]
    print(
        f"restored after the upgrade: event {delete_event['id']} onto (region {SENTINEL}, index 1), export onto "
        "(sentinel, -1)"
    )
