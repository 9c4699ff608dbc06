"""Worker-side backends against real Airflow 3.3.2 (issue 15): common.io's ``StateStoreObjectStorageBackend`` on
``file://``, with and without gzip, a threshold of 16 bytes (short values inline, long ones objects).

Airflow writes through its task SDK (``airflow dags test compat.worker-backend``, and ``airflow_side.py
sdk-set-task`` for the task keys with non-ASCII characters that ``dags test`` cannot write); every test works on
a copy of that database and on the state directory restored from its golden copy, at the same path (the
references in the rows are absolute). Then:

a. the dashboard (``WORKER_BACKEND_READ=1``) shows the values Airflow's SDK reads back, API and key pages;
b. its deletes and clears remove the rows and the objects;
c. an object it cannot delete (read-only directory) leaves the row deleted, is reported (answer, audit
   event, orphan report) and is overwritten by the next SDK write of the same key;
d. the orphan report (API and ``state_store_orphans --json``) lists exactly the objects no row references
   after ``airflow state-store clean`` and rows deleted behind its back, and the rows whose object is missing;
e. ``state_store_clean --with-objects`` deletes the rows Airflow's GC deletes, and their objects.
"""

import contextlib
import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from .conftest import PREFIX, Dashboard, admin, query
from .test_against_airflow import logged_in

pytestmark = pytest.mark.compat

DAG = "compat.worker-backend"
WRITER = "schreibe_größe"
ORDERS = ("compat wb/orders: größe", "s3://compat-wb/orders")
EVENTS = ("compat_wb_events", "s3://compat-wb/events/2026")
MARKER = "__airflow_state_ref__"
BACKEND = "airflow.providers.common.io.state_store.backend.StateStoreObjectStorageBackend"
THRESHOLD = 16


def q(text) -> str:
    return quote(str(text), safe="")


def unicode_rows(run_id: str) -> list:
    """Task keys with non-ASCII characters, written the SDK's way by ``airflow_side.py sdk-set-task``."""
    return [
        [DAG, run_id, WRITER, -1, "ключ/ünïcødé 🚀", {"marker": "marker-unicode-v1", "text": "Grüße 🚀 " * 4}],
        [DAG, run_id, "fold", 1, "ü: kurz", 5],
    ]


def stored_ref(value: str):
    stored = json.loads(value)
    return stored.get(MARKER) if isinstance(stored, dict) else None


def task_rows(db: str) -> list[tuple]:
    return query(
        db,
        "SELECT id, task_id, map_index, key, value FROM task_state_store WHERE dag_id = %s "
        "ORDER BY task_id, map_index, key",
        [DAG],
    )


def asset_rows(db: str) -> list[tuple]:
    return query(
        db,
        "SELECT s.asset_id, s.key, s.value FROM asset_state_store s JOIN asset a ON a.id = s.asset_id "
        "WHERE a.name IN (%s, %s) ORDER BY s.asset_id, s.key",
        [ORDERS[0], EVENTS[0]],
    )


def object_refs_on_disk(state: Path) -> dict[str, int]:
    """Every object under the state directory, by the reference a row would hold (``file://`` + its path;
    the quoted segments are the files' literal names), with its size."""
    return {f"file://{path}": path.stat().st_size for path in state.rglob("*") if path.is_file()}


def refs_in_rows(db: str) -> set[str]:
    sql = "SELECT value FROM task_state_store UNION ALL SELECT value FROM asset_state_store"
    values = [row[0] for row in query(db, sql)]
    return {ref for ref in map(stored_ref, values) if isinstance(ref, str) and ref.startswith("file://")}


def file_of(ref: str) -> Path:
    assert ref.startswith("file:///"), ref
    return Path(ref[len("file://") :])


@contextlib.contextmanager
def undeletable(directory: Path):
    """Files in ``directory`` cannot be deleted: mode 0555 and, since root ignores modes (as here), the
    immutable attribute (``chattr +i``); both undone on exit."""
    mode = directory.stat().st_mode & 0o777
    directory.chmod(0o555)
    immutable = False
    try:
        probe = directory / ".probe"
        try:
            probe.touch()
        except PermissionError:
            pass
        else:
            probe.unlink()
            subprocess.run(["chattr", "+i", str(directory)], check=True, capture_output=True)
            immutable = True
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(directory)], check=True, capture_output=True)
        directory.chmod(mode)


# The golden database and state directory, one per compression ------------------------------------------------
@pytest.fixture(scope="session")
def migrated(airflow):
    """Airflow's schema, migrated once: each golden database is a copy of it."""
    db = f"{PREFIX}_wb_schema"
    admin(f'DROP DATABASE IF EXISTS "{db}"')
    admin(f'CREATE DATABASE "{db}"')
    airflow.databases.append(db)
    airflow.run(db, "db", "migrate")
    return db


@pytest.fixture(scope="session", params=["gzip", "none"])
def worker_golden(request, airflow, migrated):
    compression = request.param
    folder = airflow.workdir / f"wb-{compression}"
    state = folder / "state"
    state.mkdir(parents=True)
    db = f"{PREFIX}_wb_{compression}"
    admin(f'DROP DATABASE IF EXISTS "{db}"')
    admin(f'CREATE DATABASE "{db}" TEMPLATE "{migrated}"')
    airflow.databases.append(db)
    airflow.extra_cfg[db] = (
        f"[workers]\nstate_store_backend = {BACKEND}\n"
        "[common.io]\n"
        f"state_store_objectstorage_path = file://{state}/\n"
        f"state_store_objectstorage_threshold = {THRESHOLD}\n"
        + (f"state_store_objectstorage_compression = {compression}\n" if compression != "none" else "")
    )
    airflow.run(db, "dags", "test", DAG)
    run_id = query(db, "SELECT run_id FROM dag_run WHERE dag_id = %s", [DAG])[0][0]
    airflow.python(db, "sdk-set-task", json.dumps(unicode_rows(run_id)))
    named = query(db, "SELECT id, name FROM asset WHERE name IN (%s, %s)", [ORDERS[0], EVENTS[0]])
    assets = {name: id_ for id_, name in named}

    # What Airflow's SDK reads back: airflow_side.py sdk-read (the accessors' get), checked against what the
    # DAG's tasks read through the accessors themselves.
    tasks, asset_keys = task_rows(db), asset_rows(db)
    asks = [["task", DAG, run_id, t, m, k] for _, t, m, k, _ in tasks] + [["asset", a, k] for a, k, _ in asset_keys]
    values = airflow.python(db, "sdk-read", json.dumps(asks))["values"]
    entries = [
        {"kind": "task", "id": id_, "task_id": t, "map_index": m, "key": k, "ref": stored_ref(v), "value": value}
        for (id_, t, m, k, v), value in zip(tasks, values[: len(tasks)], strict=True)
    ] + [
        {"kind": "asset", "asset_id": a, "key": k, "ref": stored_ref(v), "value": value}
        for (a, k, v), value in zip(asset_keys, values[len(tasks) :], strict=True)
    ]
    readback = {}
    for file in (airflow.home(db) / "readback").glob("*.json"):
        readback[file.stem] = json.loads(file.read_text())
    by_id = {assets[ORDERS[0]]: (ORDERS[0], ORDERS[1]), assets[EVENTS[0]]: (EVENTS[0], EVENTS[1])}
    checked = 0
    for entry in entries:
        if entry["kind"] == "task":
            read = readback.get(f"{entry['task_id']}.{entry['map_index']}", {}).get("task", {})
        else:
            name, uri = by_id[entry["asset_id"]]
            read = {**readback.get(f"{WRITER}.-1", {}).get(f"asset:{name}", {})}
            read.update(readback.get("by_uri.-1", {}).get(f"uri:{uri}", {}))
        if entry["key"] in read:
            assert read[entry["key"]] == entry["value"], entry
            checked += 1
    assert checked == len(entries) - 2  # all but the two keys sdk-set-task wrote
    assert all(isinstance(e["ref"], str) for e in entries)

    golden_state = folder / "state.golden"
    shutil.copytree(state, golden_state)
    return {
        "db": db,
        "run_id": run_id,
        "state": state,
        "golden_state": golden_state,
        "compression": compression,
        "assets": assets,
        "entries": entries,
    }


def fresh(airflow, golden: dict, name: str) -> str:
    """A copy of the golden database, and the state directory as the golden run left it."""
    db = airflow.copy(golden["db"], f"{name}_{golden['compression']}")
    shutil.rmtree(golden["state"])
    shutil.copytree(golden["golden_state"], golden["state"])
    return db


def start(airflow, db: str, servers) -> tuple[str, requests.Session, Dashboard]:
    dashboard = Dashboard(airflow, db)
    token = dashboard.setup()
    process, url = dashboard.server(WORKER_BACKEND_READ="1")
    servers.append(process)
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {token}"
    return url, api, dashboard


def ti_url(url: str, run_id: str, task_id: str) -> str:
    return f"{url}/api/v2/dags/{q(DAG)}/dagRuns/{q(run_id)}/taskInstances/{q(task_id)}/state-store"


def entry_url(url: str, golden: dict, entry: dict) -> tuple[str, dict]:
    if entry["kind"] == "task":
        return f"{ti_url(url, golden['run_id'], entry['task_id'])}/{q(entry['key'])}", {"map_index": entry["map_index"]}
    return f"{url}/api/v2/assets/{entry['asset_id']}/state-store/{q(entry['key'])}", {}


def find(golden: dict, key: str, **where) -> dict:
    found = [e for e in golden["entries"] if e["key"] == key and all(e.get(k) == v for k, v in where.items())]
    assert len(found) == 1, (key, where, found)
    return found[0]


def orphan_report(api: requests.Session, url: str) -> dict:
    response = api.get(f"{url}/api/statestore/v1/orphans")
    assert response.status_code == 200, response.text
    return response.json()


def listed(section: dict) -> set[str]:
    return {item["ref"] if isinstance(item, dict) else item for item in section["sample"]}


# a. The dashboard shows what the SDK reads back ------------------------------------------------------------
def test_dashboard_shows_what_the_sdk_reads_back(airflow, worker_golden, servers):
    golden = worker_golden
    db = fresh(airflow, golden, "wb_view")
    url, api, _ = start(airflow, db, servers)
    entries = golden["entries"]
    objects = [e for e in entries if e["ref"].startswith("file://")]
    inline = [e for e in entries if not e["ref"].startswith("file://")]
    assert len(objects) >= 15 and len(inline) >= 6
    suffix = ".gz" if golden["compression"] == "gzip" else ""
    assert all(e["ref"].endswith(suffix) and file_of(e["ref"]).is_file() for e in objects)
    # the object paths quote every segment: the files' names are the quoted texts, literally
    percent = find(golden, "100%/encoded%20key")
    assert file_of(percent["ref"]).name == f"100%25%2Fencoded%2520key{suffix}"
    assert f"/{q(DAG)}/{q(golden['run_id'])}/{q(WRITER)}/-1/" in percent["ref"] and "%3A" in q(golden["run_id"])
    assert find(golden, "via uri/ü")["ref"].startswith(f"file://{golden['state']}/assets/{q(ORDERS[1])}/")
    assert find(golden, "watermark")["ref"].startswith(f"file://{golden['state']}/assets/{q(ORDERS[0])}/")
    if suffix:
        assert file_of(percent["ref"]).read_bytes()[:2] == b"\x1f\x8b"
    else:
        assert json.loads(file_of(percent["ref"]).read_text()) == percent["value"]

    differences = []
    for entry in entries:
        address, params = entry_url(url, golden, entry)
        response = api.get(address, params={**params, "resolve": "true"})
        body = response.json() if response.status_code == 200 else response.text
        if (
            response.status_code != 200
            or body.get("value") != entry["value"]
            or body.get("reference") != entry["ref"]
            or body.get("resolved") is not True
            or body.get("resolve_error")
        ):
            where = f"{entry['kind']} {entry.get('task_id')} {entry.get('map_index')} {entry['key']!r}"
            differences.append(
                f"{where}:\n  sdk: value={entry['value']!r} ref={entry['ref']!r}\n"
                f"  ours: {response.status_code} {body!r}"
            )
        # without resolve=true, Airflow's shape: the stored marker as the value
        plain = api.get(address, params=params).json()
        assert plain["value"] == {MARKER: entry["ref"]}, plain
    assert not differences, "\n".join(differences)

    # a value that is no reference: reference null
    run_ti = ti_url(url, golden["run_id"], WRITER)
    assert api.put(f"{run_ti}/plain", json={"value": {"plain": True}}).status_code == 204
    plain = api.get(f"{run_ti}/plain", params={"resolve": "true"}).json()
    assert plain["value"] == {"plain": True} and plain["reference"] is None

    # the key pages show the resolved value (escaped) and the reference
    browser = logged_in(url)
    for entry in objects:
        if entry["kind"] == "task":
            page = browser.get(f"{url}/keys/task/{entry['id']}/")
        else:
            page = browser.get(f"{url}/assets/{entry['asset_id']}/key/", params={"key": entry["key"]})
        assert page.status_code == 200, (entry["key"], page.status_code)
        text = page.text
        assert entry["value"]["marker"] in text, (entry["key"], "resolved value not shown")
        assert entry["ref"] in text or html.escape(entry["ref"]) in text, (entry["key"], "reference not shown")
    html_key = find(golden, "html <b>&amp;</b>")
    text = browser.get(f"{url}/keys/task/{html_key['id']}/").text
    assert "&lt;b&gt;&amp;amp;&lt;/b&gt;" in text and "<b>&amp;</b>" not in text


# b. Deletes and clears remove the rows and the objects --------------------------------------------------------
def test_dashboard_deletes_remove_rows_and_objects(airflow, worker_golden, servers):
    golden = worker_golden
    db = fresh(airflow, golden, "wb_delete")
    url, api, _ = start(airflow, db, servers)
    before = object_refs_on_disk(golden["state"])
    run_ti = ti_url(url, golden["run_id"], WRITER)
    gone: set[str] = set()

    def deleted(response, *refs):
        assert response.status_code == 204, response.text
        assert response.headers.get("X-Statestore-Objects-Failed", "0") == "0"
        gone.update(refs)
        assert set(object_refs_on_disk(golden["state"])) == set(before) - gone

    # one task key (an object), one inline task key, one unicode task key
    for key in ("path/with: spaces", "short", "ключ/ünïcødé 🚀"):
        ref = find(golden, key, task_id=WRITER)["ref"]
        deleted(api.delete(f"{run_ti}/{q(key)}"), *([ref] if ref.startswith("file://") else []))
    # one asset key (an object), accessed by name
    orders = golden["assets"][ORDERS[0]]
    ref = find(golden, "watermark")["ref"]
    deleted(api.delete(f"{url}/api/v2/assets/{orders}/state-store/watermark"), ref)
    # clears: one map index of a mapped task, then an asset's keys (written by URI)
    fold2 = [e["ref"] for e in golden["entries"] if e.get("task_id") == "fold" and e["map_index"] == 2]
    deleted(
        api.delete(f"{ti_url(url, golden['run_id'], 'fold')}", params={"map_index": 2}),
        *[r for r in fold2 if r.startswith("file://")],
    )
    events = golden["assets"][EVENTS[0]]
    refs = [e["ref"] for e in golden["entries"] if e.get("asset_id") == events and e["ref"].startswith("file://")]
    deleted(api.delete(f"{url}/api/v2/assets/{events}/state-store"), *refs)
    # every other map index at once
    rest = [e["ref"] for e in golden["entries"] if e.get("task_id") == "fold" and e["ref"].startswith("file://")]
    deleted(api.delete(f"{ti_url(url, golden['run_id'], 'fold')}", params={"all_map_indices": "true"}), *rest)

    keys = {(row[1], row[2], row[3]) for row in task_rows(db)}
    assert not {k for k in keys if k[0] == "fold"}
    assert not keys & {(WRITER, -1, "path/with: spaces"), (WRITER, -1, "short"), (WRITER, -1, "ключ/ünïcødé 🚀")}
    assert not query(db, "SELECT 1 FROM asset_state_store WHERE asset_id = %s", [events])
    assert not query(db, "SELECT 1 FROM asset_state_store WHERE asset_id = %s AND key = 'watermark'", [orders])
    assert refs_in_rows(db) == set(object_refs_on_disk(golden["state"]))  # nothing orphaned, nothing dangling
    report = orphan_report(api, url)
    assert report["orphans"]["count"] == 0 and report["dangling"]["count"] == 0


# c. An object that cannot be deleted: row deleted, orphan reported, overwritten by the next SDK write ----------
def test_failed_object_delete_leaves_an_orphan_the_next_write_overwrites(airflow, worker_golden, servers):
    golden = worker_golden
    db = fresh(airflow, golden, "wb_fail")
    url, api, _ = start(airflow, db, servers)
    task_entry = find(golden, "never", task_id=WRITER)
    asset_entry = find(golden, "wm/größe: x")
    orders = golden["assets"][ORDERS[0]]
    task_file, asset_file = file_of(task_entry["ref"]), file_of(asset_entry["ref"])
    events = []
    with undeletable(task_file.parent), undeletable(asset_file.parent):
        for address, entry in (
            (f"{ti_url(url, golden['run_id'], WRITER)}/never", task_entry),
            (f"{url}/api/v2/assets/{orders}/state-store/{q('wm/größe: x')}", asset_entry),
        ):
            response = api.delete(address)
            assert response.status_code == 204, response.text
            assert response.headers.get("X-Statestore-Objects-Failed") == "1", dict(response.headers)
            events.append((response.headers.get("X-Statestore-Audit-Event"), entry["ref"]))
        # the UI's delete (confirmation, then the listed keys): a warning toast naming the orphaned object
        ui_entry = find(golden, "100%/encoded%20key", task_id=WRITER)
        browser = logged_in(url)
        headers = {"X-CSRFToken": browser.cookies["csrftoken"], "HX-Request": "true", "Referer": url}
        dialog = browser.get(f"{url}/keys/task/delete/", params={"ids": ui_entry["id"]}, headers=headers)
        assert dialog.status_code == 200, dialog.text
        token = html.unescape(re.search(r'name="listed" value="([^"]*)"', dialog.text).group(1))
        done = browser.post(
            f"{url}/keys/task/delete/", headers=headers, data={"ids": ui_entry["id"], "listed": token, "next": ""}
        )
        assert done.status_code == 204, done.text
        toast = json.loads(done.headers["HX-Trigger"])["toast"]
        assert toast["level"] == "warning" and ui_entry["ref"] in toast["message"], toast
    ui_file = file_of(ui_entry["ref"])
    assert task_file.is_file() and asset_file.is_file() and ui_file.is_file()
    assert not query(db, "SELECT 1 FROM task_state_store WHERE id = %s", [ui_entry["id"]])
    assert not query(db, "SELECT 1 FROM task_state_store WHERE dag_id = %s AND key = 'never'", [DAG])
    assert not query(db, "SELECT 1 FROM asset_state_store WHERE asset_id = %s AND key = %s", [orders, "wm/größe: x"])
    for event_id, ref in events:
        assert event_id and event_id.isdigit(), event_id
        event = api.get(f"{url}/api/statestore/v1/audit-events/{event_id}")
        assert event.status_code == 200, event.text
        assert ref in json.dumps(event.json()), event.json()
    report = orphan_report(api, url)
    assert listed(report["orphans"]) == {task_entry["ref"], asset_entry["ref"], ui_entry["ref"]}
    assert report["orphans"]["count"] == 3 and report["dangling"]["count"] == 0
    assert report["orphans"]["bytes"] == sum(f.stat().st_size for f in (task_file, asset_file, ui_file))

    # the SDK writes the same keys again, with new content (the writing task, run again by `airflow tasks
    # test`): both orphans are overwritten and referenced again
    airflow.run(db, "tasks", "test", DAG, WRITER, golden["run_id"], COMPAT_VARIANT="2")
    read = json.loads((airflow.home(db) / "readback" / f"{WRITER}.-1.json").read_text())
    new_task, new_asset = read["task"]["never"], read[f"asset:{ORDERS[0]}"]["wm/größe: x"]
    assert new_task["marker"] == "marker-never-v2" and new_asset["marker"] == "marker-wm-v2"
    (row,) = query(db, "SELECT value FROM task_state_store WHERE dag_id = %s AND key = 'never'", [DAG])
    assert stored_ref(row[0]) == task_entry["ref"]
    (row,) = query(db, "SELECT value FROM asset_state_store WHERE asset_id = %s AND key = %s", [orders, "wm/größe: x"])
    assert stored_ref(row[0]) == asset_entry["ref"]
    for file, value in ((task_file, new_task), (asset_file, new_asset)):
        content = (
            subprocess.run(["gzip", "-dc", str(file)], capture_output=True, check=True).stdout
            if golden["compression"] == "gzip"
            else file.read_bytes()
        )
        assert json.loads(content) == value
    report = orphan_report(api, url)
    assert report["orphans"]["count"] == 0 and not listed(report["orphans"])
    body = api.get(f"{ti_url(url, golden['run_id'], WRITER)}/never", params={"resolve": "true"}).json()
    assert body["value"] == new_task and body["reference"] == task_entry["ref"]
    body = api.get(f"{url}/api/v2/assets/{orders}/state-store/{q('wm/größe: x')}", params={"resolve": "true"}).json()
    assert body["value"] == new_asset and body["reference"] == asset_entry["ref"]


# d. The orphan report lists exactly the objects without rows (and the rows without objects) ----------------------
def test_orphan_report_is_exact(airflow, worker_golden, servers):
    golden = worker_golden
    db = fresh(airflow, golden, "wb_orphans")
    airflow.run(db, "state-store", "clean")  # Airflow's GC: expired rows only, their objects stay
    assert not query(db, "SELECT 1 FROM task_state_store WHERE key IN ('expired long', 'stale long')")
    orders = golden["assets"][ORDERS[0]]
    query_delete = "DELETE FROM asset_state_store WHERE asset_id = %s AND key = %s RETURNING 1"
    assert query(db, query_delete, [orders, "via uri/ü"])  # a row deleted behind the dashboard's back
    dangling_entry = find(golden, "checkpoint/x", task_id="fold", map_index=0)
    file_of(dangling_entry["ref"]).unlink()  # a row whose object is gone

    on_disk = object_refs_on_disk(golden["state"])
    referenced = refs_in_rows(db)
    orphans = set(on_disk) - referenced
    assert len(orphans) == 5  # expired long, 3 x stale long, via uri/ü
    dangling = {ref for ref in referenced if ref not in on_disk}
    assert dangling == {dangling_entry["ref"]}

    url, api, dashboard = start(airflow, db, servers)
    report = orphan_report(api, url)
    assert report["orphans"]["count"] == len(orphans)
    assert report["orphans"]["bytes"] == sum(on_disk[ref] for ref in orphans)
    assert listed(report["orphans"]) == orphans
    assert report["dangling"]["count"] == 1 and listed(report["dangling"]) == dangling

    done = dashboard.manage("state_store_orphans", "--json")
    assert done.returncode == 0, done.stderr
    cli = json.loads(done.stdout)
    assert cli["orphans"]["count"] == len(orphans) and listed(cli["orphans"]) == orphans
    assert cli["orphans"]["bytes"] == report["orphans"]["bytes"]
    assert cli["dangling"]["count"] == 1 and listed(cli["dangling"]) == dangling

    done = dashboard.manage("state_store_orphans", "--delete", "--older-than", "0")
    assert done.returncode == 0, done.stderr
    assert set(object_refs_on_disk(golden["state"])) == set(on_disk) - orphans  # only the orphans went
    assert refs_in_rows(db) == referenced
    report = orphan_report(api, url)
    assert report["orphans"]["count"] == 0 and report["dangling"]["count"] == 1


# e. state_store_clean --with-objects: Airflow's rows, and their objects ---------------------------------------------
def test_clean_with_objects_deletes_the_objects_of_the_rows_airflow_deletes(airflow, worker_golden):
    golden = worker_golden
    theirs = airflow.copy(golden["db"], f"wb_gc_airflow_{golden['compression']}")
    airflow.run(theirs, "state-store", "clean")
    kept = refs_in_rows(theirs)
    ours = fresh(airflow, golden, "wb_gc_ours")
    before = object_refs_on_disk(golden["state"])
    done = Dashboard(airflow, ours).migrate().manage("state_store_clean", "--with-objects", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = "SELECT task_id, map_index, key, value FROM task_state_store ORDER BY 1, 2, 3"
    assert query(ours, rows) == query(theirs, rows)
    expired = set(before) - kept
    assert len(expired) == 4  # expired long, 3 x stale long
    assert set(object_refs_on_disk(golden["state"])) == set(before) - expired
    assert refs_in_rows(ours) == kept


# f. Configured by environment variables only, as Airflow reads them -------------------------------------------------
def test_environment_variables_airflow_reads_configure_the_dashboard(airflow, worker_golden, servers):
    """``[common.io]`` given only as environment variables, named as Airflow names them (the section's dot
    becomes ``_``: ``AIRFLOW__COMMON_IO__…``), to Airflow and to the dashboard alike."""
    golden = worker_golden
    db = fresh(airflow, golden, "wb_env")
    airflow.extra_cfg[db] = f"[workers]\nstate_store_backend = {BACKEND}\n"
    env = {
        "AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_PATH": f"file://{golden['state']}/",
        "AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_THRESHOLD": str(THRESHOLD),
    }
    if golden["compression"] != "none":
        env["AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_COMPRESSION"] = golden["compression"]
    said = airflow.run(db, "config", "get-value", "common.io", "state_store_objectstorage_path", **env)
    assert said.stdout.strip() == env["AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_PATH"]
    dashboard = Dashboard(airflow, db)
    token = dashboard.setup()
    process, url = dashboard.server(WORKER_BACKEND_READ="1", **env)
    servers.append(process)
    entry = find(golden, "path/with: spaces", task_id=WRITER)
    address, params = entry_url(url, golden, entry)
    body = requests.get(address, params={**params, "resolve": "true"}, headers={"Authorization": f"Bearer {token}"})
    assert body.status_code == 200, body.text
    assert body.json()["value"] == entry["value"] and body.json()["reference"] == entry["ref"], body.json()
