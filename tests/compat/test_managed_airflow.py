"""Managed Airflow: the dashboard with no metadata database, reaching Airflow through its REST API
(``AIRFLOW_API_URL``) with a token that Airflow's own auth manager issues (the simple auth manager, with users and
passwords, not "all admins"), fetched by ``AIRFLOW_API_TOKEN_COMMAND``.

Each pinned Airflow runs its api-server on one copy of its golden database; the dashboard reads and writes through
it. A second dashboard reads a second copy directly (database mode). The same requests to both must give the same
answers and leave the same tables, the same audit trail, and undo must bring both back the same way. Then what
an operator meets: `manage.py check` and /readyz naming the mode, a token Airflow refuses, an Airflow API that
stops answering, refuses connections or answers 503, and the recovery."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import NamedTuple
from urllib.parse import parse_qsl, quote, urlsplit

import psycopg
import pytest
import requests

from tests import chromium
from tests.faults import TcpProxy
from tests.ports import free_port

from .conftest import AIRFLOW_33, AIRFLOW_34, ROOT, SERVER, Dashboard, normalised, query, side_of, wait_for
from .test_against_airflow import exchange
from .test_against_airflow import request_sequence as sequence_33
from .test_regions_against_airflow import TWO_LIVE_EXPANSIONS, ambiguous_sequence, regions
from .test_regions_against_airflow import request_sequence as sequence_34

pytestmark = pytest.mark.compat

USERS = {"ops": ("admin", "ops-pw-1"), "viewer": ("viewer", "viewer-pw-1")}
TOKEN_SCRIPT = """\
import json, sys, urllib.request
url, user, password = sys.argv[1:4]
request = urllib.request.Request(
    url + "/auth/token", data=json.dumps({"username": user, "password": password}).encode(),
    headers={"Content-Type": "application/json"}, method="POST")
print(urllib.request.urlopen(request, timeout=10).read().decode())
"""


def auth_manager(workdir: Path) -> dict[str, str]:
    """Airflow's options for an api-server whose simple auth manager knows USERS and their passwords."""
    passwords = workdir / "passwords.json"
    passwords.write_text(json.dumps({name: pw for name, (_, pw) in USERS.items()}))
    return {
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{n}:{role}" for n, (role, _) in USERS.items()),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
    }


def airflow_api(side, golden: dict, name: str, servers: list, tmp_path: Path) -> tuple[str, str]:
    """A copy of the golden database named ``name`` and Airflow's api-server on it (stopped after the test), whose
    auth manager knows USERS: the database and the server's address."""
    db = side.copy(golden["db"], name)
    process, url = side.api_server(db, **auth_manager(tmp_path))
    servers.append(process)
    return db, url


class Pair(NamedTuple):
    """Two copies of the golden database, each under a dashboard: one reading Airflow's api-server on its copy
    (``remote``), one reading its copy directly; their API tokens and addresses."""

    remote: str
    direct: str
    over_api: Dashboard
    over_db: Dashboard
    api_token: str
    db_token: str
    api_url: str
    db_url: str


def dashboard_pair(side, golden: dict, name: str, servers: list, tmp_path: Path) -> Pair:
    remote, airflow_url = airflow_api(side, golden, f"{name}_api", servers, tmp_path)
    direct = side.copy(golden["db"], f"{name}_db")
    over_api, over_db = Dashboard(side, remote), Dashboard(side, direct)
    api_token, db_token = over_api.setup(), over_db.setup()
    process, api_url = over_api.server(**managed(over_api, airflow_url))
    servers.append(process)
    process, db_url = over_db.server()
    servers.append(process)
    return Pair(remote, direct, over_api, over_db, api_token, db_token, api_url, db_url)


def token_command(workdir: Path, url: str, user: str, password: str | None = None) -> str:
    """A command that asks Airflow's auth manager for a token (its JSON answer, ``access_token``)."""
    script = workdir / "airflow_token.py"
    script.write_text(TOKEN_SCRIPT)
    return f"{sys.executable} {script} {url} {user} {password or USERS[user][1]}"


def managed(dashboard: Dashboard, url: str, user: str = "ops", password: str | None = None, **extra) -> dict:
    """The dashboard's environment for Airflow's API at ``url`` as ``user``."""
    command = token_command(dashboard.airflow.workdir, url, user, password)
    return {"AIRFLOW_API_URL": url, "AIRFLOW_API_TOKEN_COMMAND": command, **extra}


def session(token: str) -> requests.Session:
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {token}"
    return api


def event_ids(url: str, token: str) -> list[int]:
    """Every audit event's id, newest first."""
    ids, cursor = [], ""
    while True:
        page = session(token).get(f"{url}/api/statestore/v1/audit-events", params={"limit": 100, "cursor": cursor})
        assert page.status_code == 200, page.text
        ids += [event["id"] for event in page.json()["items"]]
        cursor = page.json()["next_cursor"]
        if not cursor:
            return ids


def audit_trail(url: str, token: str) -> list[dict]:
    """Every audit event with its keys, oldest first, without what differs between two deployments (ids, times,
    tokens)."""
    kept = ("action", "store", "outcome", "dag_id", "run_id", "task_id", "region_id", "map_index", "asset_id")
    kept += ("asset_name", "key_count")
    trail = []
    for event_id in reversed(event_ids(url, token)):
        event = session(token).get(f"{url}/api/statestore/v1/audit-events/{event_id}").json()
        keys = sorted(
            (k["key"], k["task_id"], k["region_id"], k["map_index"], json.dumps(normalised([k["before"], k["after"]])))
            for k in event["keys"]
        )
        trail.append({**{name: event[name] for name in kept}, "keys": keys})
    return trail


TASK_ROWS = {
    "3.3": "SELECT task_id, map_index, key, value, expires_at FROM task_state_store ORDER BY 1, 2, 3",
    "3.4": "SELECT task_id, region_id, region_index, key, value, expires_at FROM task_state_store ORDER BY 1, 2, 3, 4",
}
ASSET_ROWS = "SELECT asset_id, key, value, last_updated_by_kind FROM asset_state_store ORDER BY 1, 2"


@pytest.mark.parametrize("version", [AIRFLOW_33, AIRFLOW_34])
def test_managed_airflow_answers_and_writes_as_the_database_mode_does(request, version, servers, tmp_path):
    side, golden = side_of(request, version)
    remote, direct, over_api, over_db, api_token, db_token, api_url, db_url = dashboard_pair(
        side, golden, "managed", servers, tmp_path
    )

    if side.series == "3.3":
        steps = [sequence_33(golden["run_id"], golden["asset_id"])]
    else:
        where = regions(direct)
        assert where == regions(remote)
        steps = [sequence_34(golden["run_id"], golden["asset_id"], where), ambiguous_sequence(golden["run_id"], where)]
    differences, statuses = [], set()
    for number, sequence in enumerate(steps):
        if number == 1:  # 3.4: two live expansions of one task, in both databases
            for db in (remote, direct):
                with psycopg.connect(f"{SERVER}/{db}") as conn:
                    conn.execute(TWO_LIVE_EXPANSIONS)
        for method, path, body in sequence:
            expected = exchange(session(db_token), db_url, method, path, body)
            actual = exchange(session(api_token), api_url, method, path, body)
            statuses.add(expected[0])
            if expected != actual:
                differences.append(f"{method} {path} {body}\n  database: {expected}\n  REST API: {actual}")
    assert not differences, f"{len(differences)} differences:\n" + "\n".join(differences)
    assert {200, 204, 404, 422} <= statuses
    rows = TASK_ROWS[side.series]
    assert query(remote, rows) and query(remote, ASSET_ROWS) == query(direct, ASSET_ROWS)
    assert _without_times(query(remote, rows)) == _without_times(query(direct, rows))
    trail, expected_trail = audit_trail(api_url, api_token), audit_trail(db_url, db_token)
    assert [(e["action"], e["task_id"], e["key_count"]) for e in trail] == [
        (e["action"], e["task_id"], e["key_count"]) for e in expected_trail
    ]
    assert trail == expected_trail and len(trail) > 5

    # Undo, newest first, every change of the sequence: both deployments are back where they started.
    for url, token in ((api_url, api_token), (db_url, db_token)):
        for event_id in event_ids(url, token):
            undone = session(token).post(f"{url}/api/statestore/v1/audit-events/{event_id}/restore", json={})
            assert undone.status_code in (200, 422), undone.text  # 422: an event with nothing to restore
    golden_rows = _without_times(query(golden["db"], rows))
    assert _without_times(query(remote, rows)) == _without_times(query(direct, rows)) == golden_rows
    assert [r[:3] for r in query(remote, ASSET_ROWS)] == [r[:3] for r in query(golden["db"], ASSET_ROWS)]


def _without_times(rows: list[tuple]) -> list[tuple]:
    """Rows with their ``expires_at`` kept only as "never" or "set": a default expiry is the writer's clock."""
    return [(*row[:-1], row[-1] is None) for row in rows]


def test_check_and_readyz_name_the_mode_and_follow_airflows_api(airflow, golden, servers, tmp_path):
    db, airflow_url = airflow_api(airflow, golden, "managed_check", servers, tmp_path)
    dashboard = Dashboard(airflow, db)
    token = dashboard.setup()

    done = dashboard.manage("check", **managed(dashboard, airflow_url))
    assert done.returncode == 0, done.stderr
    assert f"Airflow's REST API at {airflow_url} (Airflow {AIRFLOW_33}) answers with the configured token" in (
        done.stdout + done.stderr
    )
    wrong = dashboard.manage("check", **managed(dashboard, airflow_url, password="not-the-password"))
    assert wrong.returncode != 0 and "statestore.E071" in wrong.stderr and "not-the-password" not in wrong.stderr
    with TcpProxy(_port_of(airflow_url)) as proxy:  # refusing: a port where nothing listens
        proxy.refuse()
        unreachable = {"AIRFLOW_API_URL": f"http://127.0.0.1:{proxy.port}", "AIRFLOW_API_TOKEN": "any-token"}
        down = dashboard.manage("check", **unreachable, AIRFLOW_API_RETRIES="0")
    assert down.returncode != 0 and "statestore.E070" in down.stderr and "connection refused" in down.stderr

    gc = dashboard.manage("state_store_clean", **managed(dashboard, airflow_url))
    assert gc.returncode == 2 and "run Airflow's own `airflow state-store clean`" in gc.stderr, gc.stderr

    process, url = dashboard.server(**managed(dashboard, airflow_url))
    servers.append(process)
    ready = requests.get(f"{url}/readyz", timeout=10)
    assert ready.status_code == 200, ready.text
    assert ready.json()["airflow_api"] == {"status": "ok", "version": AIRFLOW_33}
    assert "airflow" not in ready.json()["databases"]

    # The pages: what needs Airflow's database says so (503, never 500); the audit trail and an event's page work.
    run = requests.utils.quote(golden["run_id"], safe="")
    key = f"{url}/api/v2/dags/{golden['dag_id']}/dagRuns/{run}/taskInstances/write/state-store/from-the-api"
    assert session(token).put(key, json={"value": 1}).status_code == 204
    browser = signed_in(url)
    for page in ("/search/?q=x", "/gc/", "/orphans/", "/overview/largest/"):
        answer = browser.get(url + page)
        assert answer.status_code == 503 and "Not available without Airflow's database" in answer.text, page
    # What has a page over the API sends its reader there: the overview and the DAGs to the DAG list, an asset's
    # page to the same asset's.
    for page, lands in (
        ("/", "/browse/dags/"),
        ("/dags/", "/browse/dags/"),
        (f"/assets/{golden['asset_id']}/", f"/browse/assets/{golden['asset_id']}/"),
    ):
        answer = browser.get(url + page)
        assert answer.status_code == 200 and answer.url == url + lands, page
    assert "Read through Airflow's REST API" in browser.get(f"{url}/browse/dags/").text
    assert browser.get(f"{url}/audit/").status_code == 200
    event = session(token).get(f"{url}/api/statestore/v1/audit-events").json()["items"][0]
    assert (event["action"], event["task_id"]) == ("set", "write")
    shown = browser.get(f"{url}/audit/{event['id']}/")
    assert shown.status_code == 200 and "from-the-api" in shown.text and golden["run_id"] in shown.text


def overloaded(status: int, reason: str) -> bytes:
    """What an overloaded gateway answers: try again (now), and this connection ends."""
    return f"HTTP/1.1 {status} {reason}\r\nRetry-After: 0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()


SCOPED_READER = (
    "from django.contrib.auth import get_user_model; from django.contrib.auth.models import Group; "
    "from statestore_admin.records.models import AccessScope; "
    "user = get_user_model().objects.create_user('scoped', password='scoped-pw-1'); "
    "user.groups.add(Group.objects.get(name='Viewer')); "
    "AccessScope.objects.create(user=user, kind=AccessScope.Kind.DAG, pattern='{dag_id}')"
)


def signed_in(url: str, username: str = "compat", password: str = "compat-pw-1") -> requests.Session:
    """A browser session of the compat user (or another)."""
    browser = requests.Session()
    page = browser.get(f"{url}/login/")
    token = page.text.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    landed = browser.post(
        f"{url}/login/",
        data={"csrfmiddlewaretoken": token, "username": username, "password": password},
        headers={"Referer": f"{url}/login/"},
    )
    assert "Sign out" in landed.text, landed.text[:500]
    return browser


def _port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_a_failing_airflow_api_gives_clear_errors_and_recovers(airflow, golden, servers, tmp_path):
    db, airflow_url = airflow_api(airflow, golden, "managed_faults", servers, tmp_path)
    dashboard = Dashboard(airflow, db)
    token = dashboard.setup()
    with TcpProxy(_port_of(airflow_url)) as proxy:
        through = f"http://127.0.0.1:{proxy.port}"
        # The token from Airflow's auth manager directly; every other request through the proxy.
        environment = managed(dashboard, airflow_url, AIRFLOW_API_TIMEOUT="2", AIRFLOW_API_RETRIES="2")
        process, url = dashboard.server(**{**environment, "AIRFLOW_API_URL": through})
        servers.append(process)
        api, browser = session(token), signed_in(url)
        run = requests.utils.quote(golden["run_id"], safe="")
        keys = f"{url}/api/v2/dags/{golden['dag_id']}/dagRuns/{run}/taskInstances/write/state-store"
        before = query(db, "SELECT key, value FROM task_state_store ORDER BY key")
        assert api.get(keys, timeout=30).status_code == 200

        # Airflow stops answering: one deadline, then a 503 that says so; what needs no Airflow still answers.
        proxy.black_hole()
        started = time.monotonic()
        hung = api.get(keys, timeout=60)
        assert hung.status_code == 503, hung.text
        assert hung.json() == {"detail": "Airflow's REST API is unavailable: Airflow's API did not answer within 2s"}
        assert time.monotonic() - started < 30
        assert api.get(f"{url}/api/statestore/v1/audit-events", timeout=30).status_code == 200
        assert requests.get(f"{url}/readyz", timeout=30).status_code == 503
        page = browser.get(f"{url}/browse/dags/", timeout=60)  # a page: the same reason, on the 503 page
        assert page.status_code == 503 and "did not answer within 2s" in page.text, page.text[:300]

        # Airflow stops answering in the middle of a write, after the dashboard read the key it replaces: the
        # change was recorded first, and its event fails with the reason.
        proxy.pass_through()
        proxy.black_hole_on(b"PUT ")
        written = api.put(f"{keys}/new", json={"value": 1}, timeout=60)
        assert written.status_code == 503 and "did not answer within 2s" in written.json()["detail"]

        # Connections refused (the held write is dropped with them): retried, then a 503 naming it.
        proxy.refuse()
        refused = api.get(keys, timeout=60)
        assert refused.status_code == 503
        assert refused.json()["detail"] == (
            "Airflow's REST API is unavailable: cannot connect to Airflow's API: connection refused"
        )

        # An overloaded gateway answers 503 twice: the dashboard tries again and gets the answer.
        proxy.pass_through()
        proxy.answer(overloaded(503, "Service Unavailable"), times=2)
        assert api.get(keys, timeout=60).status_code == 200
        assert proxy.answered == 2
        # Three 429s: more than the two retries allowed; the answer says Airflow asked to slow down.
        proxy.answer(overloaded(429, "Too Many Requests"), times=3)
        slowed = api.get(keys, timeout=60)
        assert slowed.status_code == 503 and "429" in slowed.json()["detail"], slowed.text

        # An asset's name (what scopes match) is read once for several calls on its keys.
        asset = f"{url}/api/v2/assets/{golden['asset_id']}/state-store"
        before_reads = len(proxy.sent)
        assert [api.get(asset, timeout=30).status_code for _ in range(3)] == [200, 200, 200]
        lines = [m.split(b" HTTP/")[0].decode() for m in proxy.sent[before_reads:]]
        path = f"GET /api/v2/assets/{golden['asset_id']}"
        assert lines.count(path) == 1 and sum(line.startswith(f"{path}/state-store") for line in lines) == 3, lines

        # Recovered: reads and writes work again, and the failed write changed nothing.
        assert requests.get(f"{url}/readyz", timeout=30).status_code == 200
        assert golden["dag_id"] in browser.get(f"{url}/browse/dags/", timeout=30).text
        assert query(db, "SELECT key, value FROM task_state_store ORDER BY key") == before
        assert api.put(f"{keys}/new", json={"value": 1}, timeout=30).status_code == 204
        failed = [e for e in api.get(f"{url}/api/statestore/v1/audit-events").json()["items"] if e["outcome"] != "done"]
        assert [(e["action"], e["outcome"]) for e in failed] == [("set", "failed")]


def test_airflows_refusal_of_the_token_is_shown_as_such(airflow, golden, servers, tmp_path):
    """A user allowed to write here, through a token Airflow lets only read: Airflow's 403 is the answer, and it
    says whose refusal it is; nothing is written."""
    db, airflow_url = airflow_api(airflow, golden, "managed_viewer", servers, tmp_path)
    dashboard = Dashboard(airflow, db)
    token = dashboard.setup()
    process, url = dashboard.server(**managed(dashboard, airflow_url, user="viewer"))
    servers.append(process)
    run = requests.utils.quote(golden["run_id"], safe="")
    keys = f"{url}/api/v2/dags/{golden['dag_id']}/dagRuns/{run}/taskInstances/write/state-store"
    assert session(token).get(keys).status_code == 200
    refused = session(token).put(f"{keys}/never", json={"value": "overwritten"})
    assert refused.status_code == 403
    assert refused.json()["detail"].startswith("Airflow refused: the dashboard's token may not do this in Airflow")
    # The same through the pages: a read-only token reads them (no page asks Airflow for a write), and a delete
    # in the dialog is Airflow's refusal, said as such.
    browser = signed_in(url)
    instance = f"dag_id={golden['dag_id']}&run_id={run}&task_id=write&map_index=-1"
    page = browser.get(f"{url}/browse/task/?{instance}")
    assert page.status_code == 200 and ">never<" in page.text, page.text[:300]
    token_field = {"csrfmiddlewaretoken": browser.cookies["csrftoken"]}
    deleted = browser.post(f"{url}/browse/task/delete/?{instance}&key=never", data=token_field)
    assert deleted.status_code == 403 and "Airflow refused" in deleted.text, deleted.text[:300]
    assert query(db, "SELECT value FROM task_state_store WHERE task_id = 'write' AND key = 'never'") == [
        (json.dumps({"job": "j-1"}),)
    ]


def test_undo_in_the_browser_puts_the_key_back_in_airflow(airflow, golden, servers, tmp_path):
    """In a real browser, over Airflow's API: a key deleted through the dashboard's API, found in the audit trail,
    restored from its event's page; Airflow then holds the key again, with its value and expiry."""
    chromium_path = chromium.required()
    from playwright.sync_api import expect, sync_playwright

    db, airflow_url = airflow_api(airflow, golden, "managed_browser", servers, tmp_path)
    dashboard = Dashboard(airflow, db)
    token = dashboard.setup()
    process, url = dashboard.server(**managed(dashboard, airflow_url))
    servers.append(process)
    row = "SELECT value, expires_at FROM task_state_store WHERE task_id = 'write' AND key = 'never'"
    before = query(db, row)
    run = requests.utils.quote(golden["run_id"], safe="")
    key = f"{url}/api/v2/dags/{golden['dag_id']}/dagRuns/{run}/taskInstances/write/state-store/never"
    deleted = session(token).delete(key)
    assert deleted.status_code == 204 and query(db, row) == []
    event_id = deleted.headers["X-Statestore-Audit-Event"]

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium_path), args=chromium.ARGS)
        page = browser.new_page()
        page.goto(f"{url}/login/")
        page.fill("input[name=username]", "compat")
        page.fill("input[name=password]", "compat-pw-1")
        page.click("form.login button[type=submit]")
        expect(page.locator("h1")).to_have_text("DAGs")  # the overview needs the database: the DAG list
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Audit", exact=True).click()
        expect(page.locator("h1")).to_have_text("Audit trail")
        page.get_by_role("link", name=f"#{event_id}", exact=True).click()
        expect(page.locator("section.audit-key code").first).to_have_text("never")
        page.get_by_role("button", name="Restore", exact=True).click()
        dialog = page.locator("dialog#modal")
        expect(dialog.locator("h2")).to_have_text(f"Restore the 1 key of #{event_id}?")
        dialog.get_by_role("button", name="Restore 1 key").click()
        expect(dialog.get_by_test_id("restore-outcome")).to_have_text("Restored 1 key.")
        browser.close()
    assert query(db, row) == before
    assert session(token).get(key).json()["value"] == {"job": "j-1"}


def test_the_readmes_managed_airflow_steps_in_a_fresh_clone(airflow, golden, servers, tmp_path):
    """README, "Managed Airflow", step by step in a fresh clone (its virtualenv is this checkout's: installing is
    tested by the production test): the token command, `manage.py check`, `migrate`, `createsuperuser`,
    `make serve`; then /readyz and the API answer through Airflow's."""
    db, airflow_url = airflow_api(airflow, golden, "managed_readme", servers, tmp_path)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    (clone / ".venv").symlink_to(ROOT / ".venv")
    (
        clone / ".venv" / ".installed"
    ).touch()  # newer than the clone's requirements.txt: `make install` has nothing to do
    port = free_port()
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
    env = {
        **{name: value for name, value in os.environ.items() if name in keep},
        "AIRFLOW_HOME": str(tmp_path / "no-airflow-here"),
        "AIRFLOW_API_URL": airflow_url,
        "AIRFLOW_API_TOKEN_COMMAND": token_command(tmp_path, airflow_url, "ops"),
        "ALLOWED_HOSTS": "127.0.0.1",
        "HOST": "127.0.0.1",
        "PORT": str(port),
    }

    def step(*command: str, **extra: str) -> subprocess.CompletedProcess:
        done = subprocess.run(command, cwd=clone, env={**env, **extra}, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout}\n{done.stderr}"
        return done

    step("make", "install")
    checked = step(".venv/bin/python", "manage.py", "check")
    assert "statestore.I010" in checked.stdout + checked.stderr
    step(".venv/bin/python", "manage.py", "migrate")
    step(
        ".venv/bin/python",
        "manage.py",
        "createsuperuser",
        "--noinput",
        DJANGO_SUPERUSER_USERNAME="operator",
        DJANGO_SUPERUSER_PASSWORD="operator-pw-1",
        DJANGO_SUPERUSER_EMAIL="operator@example.com",
    )
    token = step(".venv/bin/python", "manage.py", "create_api_token", "operator").stdout.strip()
    with open(tmp_path / "serve.log", "w") as log:
        server = subprocess.Popen(
            ["make", "serve"], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(f"{url}/healthz", server, seconds=180)
        ready = requests.get(f"{url}/readyz", timeout=10)
        assert ready.status_code == 200 and ready.json()["airflow_api"]["version"] == AIRFLOW_33, ready.text
        run = requests.utils.quote(golden["run_id"], safe="")
        keys = f"{url}/api/v2/dags/{golden['dag_id']}/dagRuns/{run}/taskInstances/write/state-store"
        listed = session(token).get(keys)
        stored = query(db, "SELECT 1 FROM task_state_store WHERE task_id = 'write'")
        assert listed.status_code == 200 and listed.json()["total_entries"] == len(stored) > 0, listed.text
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # make and the gunicorn it started
        server.wait(timeout=30)


class _Tables(HTMLParser):
    """The rows of a page's tables, each a list of its cells' texts; a ``<time>`` is its instant (``datetime``),
    since the text says "3 minutes ago", which two pages read a moment apart may not agree on."""

    def __init__(self):
        super().__init__()
        self.rows, self.links, self._cell, self._row, self._in_time = [], [], None, None, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "time" and self._cell is not None:
            self._cell.append(attrs.get("datetime", ""))
            self._in_time = True
        elif tag == "a" and (attrs.get("href") or "").startswith("/browse/"):
            self.links.append(attrs["href"])

    def handle_endtag(self, tag):
        if tag == "time":
            self._in_time = False
        elif tag in ("td", "th") and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None and not self._in_time:
            self._cell.append(data)


def tables_of(browser: requests.Session, url: str) -> _Tables:
    answer = browser.get(url, timeout=60)
    assert answer.status_code == 200, f"{url}: {answer.status_code} {answer.text[:300]}"
    parsed = _Tables()
    parsed.feed(answer.text)
    return parsed


def compare_page(golden: dict) -> str:
    run = quote(golden["run_id"], safe="")
    return f"/browse/dags/{golden['dag_id']}/compare/?a={run}&b={run}"  # the golden DAG has one run


def browsed(browser: requests.Session, url: str, golden: dict) -> dict[str, list]:
    """Every browsing page a reader reaches from the DAG list (the golden DAG's), its run, each of its task
    instances and each of their keys across runs, the run compared with itself, the assets and each asset:
    their tables, by address."""
    run = quote(golden["run_id"], safe="")
    seen, pending = {}, ["/browse/dags/", f"/browse/dags/{golden['dag_id']}/", "/browse/assets/", compare_page(golden)]
    while pending:
        path = pending.pop(0)
        if path in seen:
            continue
        page = tables_of(browser, url + path)
        seen[path] = page.rows
        pending += [link for link in page.links if re.match(r"/browse/(run/|task/|story/|assets/\d+/)(\?|$)", link)]
        if path == f"/browse/dags/{golden['dag_id']}/":
            pending = [p for p in pending if "/browse/run/" not in p or run in p]
    return seen


@pytest.mark.parametrize("version", [AIRFLOW_33, AIRFLOW_34])
def test_the_browsing_pages_and_their_actions_match_the_database_mode(request, version, servers, tmp_path):
    """Every browsing page a reader reaches (DAGs, the golden DAG's runs, its run, each task instance, the
    assets and each asset) shows the same rows over Airflow's API as over its database; then the same actions
    clicked in Chromium on both (add, edit, set the expiry of, delete a task key, clear a task instance; add,
    edit, delete an asset key, clear an asset) leave the same tables and the same audit trail."""
    chromium_path = chromium.required()
    side, golden = side_of(request, version)
    remote, direct, over_api, over_db, api_token, db_token, api_url, db_url = dashboard_pair(
        side, golden, "browse", servers, tmp_path
    )

    expected, shown = browsed(signed_in(db_url), db_url, golden), browsed(signed_in(api_url), api_url, golden)
    assert list(shown) == list(expected)
    differences = [
        f"{path}\n  database: {expected[path]}\n  REST API: {shown[path]}"
        for path in expected
        if shown[path] != expected[path]
    ]
    assert not differences, "\n".join(differences)
    # The task instances with keys (a header and a row of five cells); the actions take the first one's.
    tasks = [path for path in expected if path.startswith("/browse/task/") and len(expected[path][1]) == 5]
    assert tasks and len(expected) > len(tasks) + 4 and compare_page(golden) in expected
    assert sum(path.startswith("/browse/story/") for path in expected) >= len(tasks)
    # A run that does not exist: not found in both modes, its page and its export.
    missing = f"dag_id={quote(golden['dag_id'])}&run_id=no_such_run"
    for url in (db_url, api_url):
        reader = signed_in(url)
        assert [reader.get(f"{url}/browse/run/{page}?{missing}").status_code for page in ("", "export/")] == [404] * 2
    # The plugin's links from Airflow's UI (/airflow/<destination>/) land on the browsing page of the same object.
    plain = [dict(parse_qsl(urlsplit(path).query)) for path in tasks if "region_id=" not in path]
    assert plain or side.series == "3.4"
    links = {
        "dag": {"dag_id": golden["dag_id"]},
        "dag_run": {"dag_id": golden["dag_id"], "run_id": golden["run_id"]},
        "asset": {"asset_id": str(golden["asset_id"])},
    }
    if plain:
        links["task"] = {"dag_id": golden["dag_id"], "task_id": plain[0]["task_id"]}
        links["task_instance"] = plain[0]
    reader = signed_in(api_url)
    for destination, params in links.items():
        landed = reader.get(f"{api_url}/airflow/{destination}/", params=params)
        assert (landed.status_code, urlsplit(landed.url).path.startswith("/browse/")) == (200, True), destination
    assert any(golden["run_id"] in " ".join(map(" ".join, rows)) for rows in expected.values())

    # A reader whose scope is the golden DAG and no asset: the same pages in both modes, and nothing else.
    scoped = {}
    for dashboard, url in ((over_db, db_url), (over_api, api_url)):
        made = dashboard.manage("shell", "--no-imports", "-c", SCOPED_READER.format(dag_id=golden["dag_id"]))
        assert made.returncode == 0, made.stderr
        reader = signed_in(url, "scoped", "scoped-pw-1")
        scoped[url] = {path: tables_of(reader, url + path).rows for path in ("/browse/dags/", "/browse/assets/")}
        assert reader.get(f"{url}/browse/assets/{golden['asset_id']}/").status_code == 404
        assert reader.get(f"{url}/browse/dags/not_{golden['dag_id']}/").status_code == 403
    assert scoped[api_url] == scoped[db_url]
    assert [row[0] for row in scoped[db_url]["/browse/dags/"][1:]] == [golden["dag_id"]]
    assert scoped[db_url]["/browse/assets/"][1:] == [["No assets."]]

    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium_path), args=chromium.ARGS)
        for url in (db_url, api_url):
            _act_in_browser(browser.new_page(), url, golden, tasks[0])
        browser.close()

    rows = TASK_ROWS[side.series]
    assert (
        _without_times(query(remote, rows))
        == _without_times(query(direct, rows))
        != _without_times(query(golden["db"], rows))
    )
    assert query(remote, ASSET_ROWS) == query(direct, ASSET_ROWS) != query(golden["db"], ASSET_ROWS)
    assert (
        query(remote, "SELECT expires_at FROM task_state_store WHERE key = 'expiring'")
        == []
        == query(direct, "SELECT expires_at FROM task_state_store WHERE key = 'expiring'")
    )
    trail, expected_trail = audit_trail(api_url, api_token), audit_trail(db_url, db_token)
    changes = [e["action"] for e in trail if e["store"] in ("task", "asset")]
    assert changes == ["set", "patch", "set", "delete", "clear", "set", "set", "delete", "clear"], trail
    assert trail == expected_trail


def _act_in_browser(page, url: str, golden: dict, task_page: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{url}/login/")
    page.fill("input[name=username]", "compat")
    page.fill("input[name=password]", "compat-pw-1")
    page.click("form.login button[type=submit]")
    page.goto(f"{url}/browse/dags/")
    page.get_by_role("link", name=golden["dag_id"], exact=True).click()
    page.get_by_role("link", name=golden["run_id"], exact=True).click()
    expect(page.get_by_test_id("instances")).to_be_visible()
    page.goto(url + task_page)
    dialog, keys = page.locator("dialog#modal"), page.get_by_test_id("keys")

    def row(key: str):
        return keys.get_by_test_id("key-row").filter(has=page.get_by_test_id("key").get_by_text(key, exact=True))

    page.get_by_role("link", name="Add key").click()
    dialog.locator("input[name=key]").fill("expiring")
    dialog.locator("textarea[name=value]").fill('{"n": 1}')
    dialog.locator("input[name=expiry][value=never]").check()
    dialog.get_by_role("button", name="Add key").click()
    expect(row("expiring")).to_contain_text('{"n": 1}')
    row("expiring").get_by_role("link", name="Edit").click()
    dialog.locator("textarea[name=value]").fill('{"n": 2}')
    dialog.get_by_role("button", name="Save").click()
    expect(row("expiring")).to_contain_text('{"n": 2}')
    row("expiring").get_by_role("link", name="Expiry").click()
    dialog.locator("input[name=expiry][value=at]").check()
    dialog.locator("input[name=expires_at]").fill("2031-01-02T03:04")
    dialog.get_by_role("button", name="Save").click()
    expect(row("expiring").get_by_test_id("expires").locator("time")).to_have_attribute(
        "datetime", re.compile("^2031-01-02T03:04")
    )
    row("expiring").get_by_role("link", name="Delete").click()
    dialog.get_by_role("button", name="Delete").click()
    expect(row("expiring")).to_have_count(0)
    page.get_by_role("link", name="Clear all keys").click()
    dialog.get_by_role("button", name="Clear all keys").click()
    expect(keys.get_by_text("No keys.")).to_be_visible()

    page.goto(f"{url}/browse/assets/{golden['asset_id']}/")
    page.get_by_role("link", name="Add key").click()
    dialog.locator("input[name=key]").fill("from-the-browser")
    dialog.locator("textarea[name=value]").fill('"one"')
    dialog.get_by_role("button", name="Add key").click()
    expect(row("from-the-browser")).to_contain_text('"one"')
    row("from-the-browser").get_by_role("link", name="Edit").click()
    dialog.locator("textarea[name=value]").fill('"two"')
    dialog.get_by_role("button", name="Save").click()
    expect(row("from-the-browser")).to_contain_text('"two"')
    first = keys.get_by_test_id("key").first.inner_text()
    row(first).get_by_role("link", name="Delete").click()
    dialog.get_by_role("button", name="Delete").click()
    expect(row(first)).to_have_count(0)
    page.get_by_role("link", name="Clear all keys").click()
    dialog.get_by_role("button", name="Clear all keys").click()
    expect(keys.get_by_text("No keys.")).to_be_visible()
    page.close()
