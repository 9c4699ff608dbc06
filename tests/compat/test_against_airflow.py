"""Prove it against real Airflow 3.3.2 (the 3.3 pin): same rows, same GC result, same API answers (issue: compat stage).

Run with `make test-compat` (`pytest -m compat tests/compat`); `.ci/run` runs it after the main suite.
"""

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from .conftest import DAG_ID, ROOT, VERSIONS, Dashboard, airflow_venv, normalised, query

pytestmark = pytest.mark.compat

TASK_ROWS = (
    "SELECT dag_run_id, task_id, map_index, key, value, updated_at, expires_at FROM task_state_store "
    "ORDER BY dag_run_id, task_id, map_index, key"
)
ASSET_ROWS = (
    "SELECT asset_id, key, value, updated_at, last_updated_by_kind, last_updated_by_dag_id, "
    "last_updated_by_run_id, last_updated_by_task_id, last_updated_by_map_index FROM asset_state_store "
    "ORDER BY asset_id, key"
)


def iso(value):
    return value.isoformat().replace("+00:00", "Z") if value else None


def logged_in(url: str) -> requests.Session:
    session = requests.Session()
    page = session.get(f"{url}/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = session.post(
        f"{url}/login/",
        data={"csrfmiddlewaretoken": token, "username": "compat", "password": "compat-pw-1"},
        headers={"Referer": f"{url}/login/"},
    )
    assert response.ok and "Sign out" in response.text
    return session


# a. The dashboard shows every row as Airflow wrote it --------------------------------------------
def test_dashboard_shows_every_row_airflow_wrote(airflow, golden, servers):
    db = airflow.copy(golden["db"], "view")
    dashboard = Dashboard(airflow, db)
    token = dashboard.setup()
    check = dashboard.manage("check")  # passes, and says which schema it found
    assert check.returncode == 0 and "ERRORS" not in check.stderr, check.stderr
    assert "has the Airflow 3.3 schema, alembic revision d2f4e1b3c5a7" in check.stderr, check.stderr
    process, url = dashboard.server()
    servers.append(process)
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {token}"

    tasks = query(
        db,
        "SELECT dag_id, run_id, task_id, map_index, key, value, updated_at, expires_at, dag_run_id "
        "FROM task_state_store ORDER BY task_id, map_index, key",
    )
    assert len(tasks) >= 14  # 10 from the DAG's tasks, 4 from MetastoreBackend
    assert any(row[7] is None for row in tasks) and any(row[4] == "path/with: spaces" for row in tasks)
    for dag_id, run_id, task_id, map_index, key, value, updated_at, expires_at, _ in tasks:
        url_key = quote(key, safe="")
        entry = api.get(
            f"{url}/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/"
            f"state-store/{url_key}",
            params={"map_index": map_index},
        ).json()
        assert entry == {
            "key": key,
            "value": json.loads(value),
            "updated_at": iso(updated_at),
            "expires_at": iso(expires_at),
        }

    browser = logged_in(url)
    run_page = browser.get(f"{url}/runs/{tasks[0][8]}/").text.replace("<wbr>", "")  # keys wrap at separators
    for row in tasks:
        assert f"<code><bdi>{html.escape(row[4])}</bdi></code>" in run_page, row[4]  # keys are isolated (bidi)
    assert run_page.count("badge-never") == sum(1 for row in tasks if row[7] is None)

    assets = query(golden["db"], ASSET_ROWS)
    assert {row[4] for row in assets} == {"task", "watcher", "api", None}
    listed = api.get(f"{url}/api/v2/assets/{golden['asset_id']}/state-store").json()
    assert listed["total_entries"] == len(assets)
    for entry, row in zip(listed["asset_state_store"], assets, strict=True):
        writer = (
            None
            if row[4] is None
            else {"kind": row[4], "dag_id": row[5], "run_id": row[6], "task_id": row[7], "map_index": row[8]}
        )
        assert entry == {
            "key": row[1],
            "value": json.loads(row[2]),
            "updated_at": iso(row[3]),
            "last_updated_by": writer,
        }
    asset_page = browser.get(f"{url}/assets/{golden['asset_id']}/").text
    for row in assets:
        assert f"<code><bdi>{html.escape(row[1])}</bdi></code>" in asset_page


# b. GC: identical tables after Airflow's and ours ------------------------------------------------
@pytest.mark.parametrize("batch_size", [0, 3])
def test_gc_leaves_identical_tables(airflow, golden, batch_size):
    theirs = airflow.copy(golden["db"], f"gc_airflow_{batch_size}")
    ours = airflow.copy(golden["db"], f"gc_ours_{batch_size}")
    batch = {"AIRFLOW__STATE_STORE__STATE_CLEANUP_BATCH_SIZE": str(batch_size)}
    airflow.run(theirs, "state-store", "clean", **batch)
    done = Dashboard(airflow, ours).migrate().manage("state_store_clean", "--json", **batch)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert query(theirs, TASK_ROWS) == query(ours, TASK_ROWS)
    assert query(theirs, ASSET_ROWS) == query(ours, ASSET_ROWS) == query(golden["db"], ASSET_ROWS)
    deleted = len(query(golden["db"], TASK_ROWS)) - len(query(ours, TASK_ROWS))
    assert deleted == summary["rows_deleted"] >= 6  # expired -60 s, 3 mapped -1 s, 2 by MetastoreBackend
    assert not query(ours, "SELECT 1 FROM task_state_store WHERE expires_at < now()")


def test_gc_with_a_custom_backend_deletes_nothing(airflow, golden):
    theirs = airflow.copy(golden["db"], "gc_custom_airflow")
    ours = airflow.copy(golden["db"], "gc_custom_ours")
    custom = {"AIRFLOW__STATE_STORE__BACKEND": "custom_backend.InMemoryBackend"}
    said = airflow.run(theirs, "state-store", "clean", **custom).stdout
    assert "Custom state store backend configured" in said
    done = Dashboard(airflow, ours).migrate().manage("state_store_clean", **custom)
    assert done.returncode == 0 and "Nothing deleted" in done.stdout
    before = query(golden["db"], TASK_ROWS)
    assert query(theirs, TASK_ROWS) == query(ours, TASK_ROWS) == before


# c. The same requests, the same answers ------------------------------------------------------------
def request_sequence(run_id: str, asset_id: int) -> list[tuple[str, str, dict | None]]:
    ti = f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances"
    odd = quote("new/key: with spaces", safe="")
    asset = f"/api/v2/assets/{asset_id}/state-store"
    return [
        ("GET", f"{ti}/write/state-store", None),
        ("GET", f"{ti}/write/state-store?limit=2&offset=1", None),
        ("GET", f"{ti}/write/state-store?limit=1000", None),
        ("GET", f"{ti}/fold/state-store?map_index=1", None),
        ("GET", f"{ti}/fold/state-store", None),
        ("GET", f"{ti}/ghost/state-store", None),
        ("GET", f"{ti}/write/state-store/never", None),
        ("GET", f"{ti}/write/state-store/{quote('path/with: spaces', safe='')}", None),
        ("GET", f"{ti}/write/state-store/missing", None),
        ("GET", f"{ti}/write/state-store?map_index=-2", None),
        ("PUT", f"{ti}/write/state-store/{odd}", {"value": {"nested": [1, {"a": None}]}}),
        ("GET", f"{ti}/write/state-store/{odd}", None),
        ("PUT", f"{ti}/write/state-store/pinned", {"value": "p", "expires_at": None}),
        ("PUT", f"{ti}/write/state-store/dated", {"value": 1, "expires_at": "2031-01-02T03:04:05+00:00"}),
        ("GET", f"{ti}/write/state-store/dated", None),
        ("PUT", f"{ti}/write/state-store/naive", {"value": 1, "expires_at": "2031-01-02T03:04:05"}),
        ("PUT", f"{ti}/write/state-store/null", {"value": None}),
        ("PUT", f"{ti}/write/state-store/extra", {"value": 1, "other": 2}),
        ("PUT", f"{ti}/write/state-store/nobody", {}),
        ("PUT", f"{ti}/ghost/state-store/k", {"value": 1}),
        ("PUT", f"{ti}/fold/state-store/k?map_index=7", {"value": 1}),
        ("PATCH", f"{ti}/write/state-store/never", {"value": {"patched": True}}),
        ("GET", f"{ti}/write/state-store/never", None),
        ("PATCH", f"{ti}/write/state-store/missing", {"value": 1}),
        ("DELETE", f"{ti}/write/state-store/default", None),
        ("DELETE", f"{ti}/write/state-store/default", None),
        ("DELETE", f"{ti}/ghost/state-store/default", None),
        ("DELETE", f"{ti}/fold/state-store?map_index=0", None),
        ("GET", f"{ti}/fold/state-store?map_index=0", None),
        ("DELETE", f"{ti}/fold/state-store?all_map_indices=true", None),
        ("GET", f"{ti}/fold/state-store?map_index=2", None),
        ("DELETE", f"{ti}/ghost/state-store?all_map_indices=true", None),
        ("GET", f"{ti}/write/state-store", None),
        ("GET", asset, None),
        ("GET", f"{asset}?limit=1&offset=1", None),
        ("GET", f"{asset}/{quote('by task', safe='')}", None),
        ("GET", f"{asset}/missing", None),
        ("PUT", f"{asset}/{quote('by/watcher', safe='')}", {"value": {"now": "api"}}),
        ("GET", f"{asset}/{quote('by/watcher', safe='')}", None),
        ("PUT", f"{asset}/x", {"value": 1, "expires_at": None}),
        ("DELETE", f"{asset}/{quote('no writer', safe='')}", None),
        ("DELETE", f"{asset}/missing", None),
        ("GET", asset, None),
        ("GET", "/api/v2/assets/987654/state-store", None),
        ("PUT", "/api/v2/assets/987654/state-store/k", {"value": 1}),
        ("DELETE", asset, None),
        ("GET", asset, None),
    ]


def exchange(session: requests.Session, base: str, method: str, path: str, body):
    response = (
        session.request(method, base + path, json=body) if body is not None else session.request(method, base + path)
    )
    content = response.json() if response.content else "<empty>"
    return response.status_code, normalised(content)


def test_api_answers_like_airflow(airflow, golden, servers):
    theirs = airflow.copy(golden["db"], "api_airflow")
    ours = airflow.copy(golden["db"], "api_ours")
    process, airflow_url = airflow.api_server(theirs)
    servers.append(process)
    dashboard = Dashboard(airflow, ours)
    token = dashboard.setup()
    process, our_url = dashboard.server()
    servers.append(process)
    airflow_session, our_session = requests.Session(), requests.Session()
    our_session.headers["Authorization"] = f"Bearer {token}"
    differences, statuses = [], set()
    for method, path, body in request_sequence(golden["run_id"], golden["asset_id"]):
        expected = exchange(airflow_session, airflow_url, method, path, body)
        actual = exchange(our_session, our_url, method, path, body)
        statuses.add(expected[0])
        if expected != actual:
            differences.append(f"{method} {path} {body}\n  airflow: {expected}\n  ours:    {actual}")
    assert not differences, "\n".join(differences)
    assert statuses == {200, 204, 404, 422}
    assert query(
        theirs, "SELECT task_id, map_index, key, value, expires_at IS NULL FROM task_state_store ORDER BY 1, 2, 3"
    ) == query(ours, "SELECT task_id, map_index, key, value, expires_at IS NULL FROM task_state_store ORDER BY 1, 2, 3")


# d. What the dashboard writes, Airflow reads back unchanged ------------------------------------------
def test_airflow_reads_what_the_dashboard_writes(airflow, golden, servers):
    db = airflow.copy(golden["db"], "readback")
    dashboard = Dashboard(airflow, db)
    token = dashboard.setup()
    process, url = dashboard.server()
    servers.append(process)
    run_id, asset_id = golden["run_id"], golden["asset_id"]
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {token}"
    ti = f"{url}/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances"
    value = {"nested": {"list": [1, 2.5, None, True], "text": 'Grüße 🚀 "quoted"'}}
    key = "from/api: spaces"
    assert api.put(f"{ti}/write/state-store/{quote(key, safe='')}", json={"value": value}).status_code == 204
    assert api.put(f"{url}/api/v2/assets/{asset_id}/state-store/api-key", json={"value": [value]}).status_code == 204
    assert airflow.python(db, "get-task", DAG_ID, run_id, "write", "-1", key) == {"value": json.dumps(value)}
    assert airflow.python(db, "get-asset", str(asset_id), "api-key") == {"value": json.dumps([value])}

    browser = logged_in(url)
    csrf = browser.cookies["csrftoken"]
    headers = {"X-CSRFToken": csrf, "HX-Request": "true", "Referer": url}
    run_pk = query(db, "SELECT id FROM dag_run WHERE run_id = %s", [run_id])[0][0]
    added = browser.post(
        f"{url}/runs/{run_pk}/tasks/fold/add/",
        headers=headers,
        data={"key": "from/ui: spaces", "value": '{"ui": [1, {"b": false}]}', "map_index": "2", "expiry": "never"},
    )
    assert added.status_code == 204, added.text
    key_id = query(db, "SELECT id FROM task_state_store WHERE task_id = 'write' AND key = 'never'")[0][0]
    edited = browser.post(f"{url}/keys/task/{key_id}/edit/", headers=headers, data={"value": '"edited in the UI"'})
    assert edited.status_code == 204, edited.text
    assert airflow.python(db, "get-task", DAG_ID, run_id, "fold", "2", "from/ui: spaces") == {
        "value": json.dumps({"ui": [1, {"b": False}]})
    }
    assert airflow.python(db, "get-task", DAG_ID, run_id, "write", "-1", "never") == {
        "value": json.dumps("edited in the UI")
    }


# f. AUDIT_TO_AIRFLOW_LOG: Airflow's own audit log lists the dashboard's changes ------------------------
def test_airflow_event_log_lists_the_dashboards_changes(airflow, golden, servers):
    db = airflow.copy(golden["db"], "eventlog")
    dashboard = Dashboard(airflow, db)
    token = dashboard.setup()
    process, url = dashboard.server(AUDIT_TO_AIRFLOW_LOG="1")
    servers.append(process)
    run_id = golden["run_id"]
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {token}"
    key = quote("audited/key: spaces", safe="")
    ti = f"{url}/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances"
    secret = "a value that must not reach the log"
    assert api.put(f"{ti}/write/state-store/{key}", json={"value": {"v": secret}}).status_code == 204
    assert api.put(f"{ti}/fold/state-store/{key}?map_index=1", json={"value": secret}).status_code == 204
    assert api.delete(f"{ti}/write/state-store/{key}").status_code == 204

    process, airflow_url = airflow.api_server(db)  # the simple auth manager, all admins: no token needed
    servers.append(process)
    response = requests.get(
        f"{airflow_url}/api/v2/eventLogs", params={"event_pattern": "statestore.", "order_by": "event_log_id"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    listed = [
        (e["event"], e["dag_id"], e["run_id"], e["task_id"], e["map_index"], e["owner"]) for e in body["event_logs"]
    ]
    assert listed == [
        ("statestore.set", DAG_ID, run_id, "write", -1, "compat"),
        ("statestore.set", DAG_ID, run_id, "fold", 1, "compat"),
        ("statestore.delete", DAG_ID, run_id, "write", -1, "compat"),
    ]
    assert body["total_entries"] == 3
    for entry in body["event_logs"]:
        assert entry["when"] and secret not in entry["extra"]
        assert {k: v for k, v in json.loads(entry["extra"]).items() if k != "audit_event_id"} == {
            "via": "api",
            "store": "task",
            "keys": 1,
        }
        one = requests.get(f"{airflow_url}/api/v2/eventLogs/{entry['event_log_id']}")
        assert one.status_code == 200 and one.json() == entry
    # Airflow's filters find them too, as its Audit Log page asks for them
    by_task = requests.get(
        f"{airflow_url}/api/v2/eventLogs",
        params={"dag_id": DAG_ID, "run_id": run_id, "task_id": "write", "owner": "compat"},
    ).json()
    assert [e["event"] for e in by_task["event_logs"] if e["event"].startswith("statestore.")] == [
        "statestore.set",
        "statestore.delete",
    ]


# e. The committed schema fixtures are what `airflow db migrate` makes, for each pinned version ------------
@pytest.mark.parametrize("version", VERSIONS)
def test_schema_fixtures_match_airflow(version, tmp_path):
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "make_airflow_schema.sh"), version],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "AIRFLOW_VENV": str(airflow_venv(version)),
            "OUT_DIR": str(tmp_path),
        },
    )
    assert done.returncode == 0, done.stderr
    committed = ROOT / "statestore_admin" / "airflow" / "fixtures" / ".".join(version.split(".")[:2])
    for name in ("postgresql.sql", "sqlite.sql"):
        assert (tmp_path / name).read_text() == (committed / name).read_text(), name
    assert Path(tmp_path / "postgresql.sql").stat().st_size > 10_000


def test_airflow_database_url_alone_is_enough(airflow, golden, tmp_path):
    """No AIRFLOW_HOME, no airflow.cfg: only AIRFLOW_DATABASE_URL, pointing at a database Airflow migrated."""
    db = airflow.copy(golden["db"], "url_only")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "STATESTORE_VAR_DIR": str(tmp_path / "var"),
        "AIRFLOW_DATABASE_URL": f"postgresql+psycopg2://postgres@127.0.0.1:5432/{db}",
    }

    def manage(*args):
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )

    check = manage("check")
    assert check.returncode == 0 and "ERRORS" not in check.stderr, check.stderr
    assert "has the Airflow 3.3 schema, alembic revision d2f4e1b3c5a7" in check.stderr, check.stderr
    totals = manage(
        "shell",
        "--no-imports",
        "-c",
        "from statestore_admin.state.selectors import store_totals as s; "
        "from statestore_admin.access.scopes import EVERYTHING; "
        "t = s(EVERYTHING); print(t.task_keys, t.asset_keys)",
    )
    expected = f"{len(query(db, TASK_ROWS))} {len(query(db, ASSET_ROWS))}"
    assert totals.stdout.strip() == expected, totals.stderr
