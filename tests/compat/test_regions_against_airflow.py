"""Prove it against real Airflow 3.4.0b2: state written inside dynamic regions (a loop, a mapped task in a
loop, a mapped task group, an asset key written from a loop) shows at its coordinates, GC leaves Airflow's
table, our /api/v2 answers like `airflow api-server` with region parameters, and Airflow's SDK reads back
what the dashboard wrote into an iteration.

The golden database is written by `airflow dags test compat_regions` (tests/compat/dags34/compat_regions.py);
every test works on copies of it. Run with `make test-compat`.
"""

import html
import json
import re
import uuid
from collections import defaultdict
from urllib.parse import quote

import psycopg
import pytest
import requests

from .conftest import DAG_ID_34, SERVER, Dashboard, query, stop
from .test_against_airflow import exchange, iso, logged_in

pytestmark = pytest.mark.compat

SENTINEL = uuid.UUID(int=0)
TASK_ROWS = (
    "SELECT dag_run_id, task_id, region_id, region_index, key, value, updated_at, expires_at FROM task_state_store "
    "ORDER BY dag_run_id, task_id, region_id, region_index, key"
)
ASSET_ROWS = (
    "SELECT asset_id, key, value, updated_at, last_updated_by_kind, last_updated_by_dag_id, "
    "last_updated_by_run_id, last_updated_by_task_id, last_updated_by_map_index, last_updated_by_task_instance_id, "
    "last_updated_by_region_id, last_updated_by_region_index, last_updated_by_try_number FROM asset_state_store "
    "ORDER BY asset_id, key"
)


def regions(db: str) -> dict:
    """The region ids the DAG run made: the loop's, each iteration's expansion of refine.work (by
    iteration), the mapped task group's; and the task instance ids by (task_id, region_id, region_index)."""
    rows = query(db, "SELECT id, node_id, parent_region_index FROM dynamic_region")
    loop = [r[0] for r in rows if r[1] == "refine"]
    work = {r[2]: r[0] for r in rows if r[1] == "refine.work"}
    table = [r[0] for r in rows if r[1] == "per_table.load"]
    assert len(loop) == 1 and sorted(work) == [0, 1, 2] and len(table) == 1, rows
    tis = {
        (t, r, i): str(ti)
        for ti, t, r, i in query(db, "SELECT id, task_id, region_id, region_index FROM task_instance")
    }
    return {"loop": loop[0], "work": work, "table": table[0], "tis": tis}


def task_rows(db: str) -> list[tuple]:
    return query(
        db,
        "SELECT id, dag_id, run_id, task_id, region_id, region_index, key, value, updated_at, expires_at, dag_run_id "
        "FROM task_state_store ORDER BY task_id, region_id, region_index, key",
    )


def api_session(token: str) -> requests.Session:
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {token}"
    return api


def ti_url(run_id: str) -> str:
    return f"/api/v2/dags/{DAG_ID_34}/dagRuns/{quote(run_id, safe='')}/taskInstances"


def at(region_id, region_index) -> dict:
    return {"region_id": str(region_id), "region_index": region_index}


def writer(row) -> dict | None:
    """Airflow 3.4's `last_updated_by` for an asset row: region_id and region_index left out for a writer
    outside every region (api_fastapi/common/region.py), the other new fields null when unknown."""
    if row[4] is None:
        return None
    entry = {
        "kind": row[4],
        "dag_id": row[5],
        "run_id": row[6],
        "task_id": row[7],
        "map_index": row[8],
        "task_instance_id": str(row[9]) if row[9] else None,
        "try_number": row[12],
    }
    if row[10] is not None and row[10] != SENTINEL:
        entry |= {"region_id": str(row[10]), "region_index": row[11]}
    return entry


# a. Every row at its coordinates, in the API and on the pages ---------------------------------------
@pytest.fixture(scope="module")
def viewed(airflow34, golden34):
    """The dashboard on a copy of the golden database, for the tests that only read."""
    db = airflow34.copy(golden34["db"], "view")
    dashboard = Dashboard(airflow34, db)
    token = dashboard.setup()
    process, url = dashboard.server()
    yield {"db": db, "dashboard": dashboard, "api": api_session(token), "url": url, "rows": task_rows(db)}
    stop(process)


def test_check_names_the_34_schema(viewed):
    check = viewed["dashboard"].manage("check")  # passes, and says which schema it found
    assert check.returncode == 0 and "ERRORS" not in check.stderr, check.stderr
    assert "has the Airflow 3.4 (dynamic regions) schema, alembic revision 9cffe90fa0c0" in check.stderr


def test_api_shows_every_row_at_its_coordinates(viewed, golden34):
    db, api, url, rows = viewed["db"], viewed["api"], viewed["url"], viewed["rows"]
    where = regions(db)
    # what the task SDK wrote: 3 iterations x 2 (step), 3 x (2 + 1) (work), 3 x 2 (per_table), 1 outside
    assert len(rows) == 22
    cursors_at_0 = [r for r in rows if r[3] == "refine.work" and r[5] == 0 and r[6] == "cursor"]
    assert {r[4] for r in cursors_at_0} == set(where["work"].values())  # three rows, one index, three regions
    for _id, dag_id, run_id, task_id, region_id, region_index, key, value, updated_at, expires_at, _ in rows:
        entry = api.get(
            f"{url}/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/"
            f"state-store/{quote(key, safe='')}",
            params=at(region_id, region_index),
        )
        assert entry.status_code == 200, (task_id, region_id, region_index, key, entry.text)
        assert entry.json() == {
            "key": key,
            "value": json.loads(value),
            "updated_at": iso(updated_at),
            "expires_at": iso(expires_at),
        }
    by_coordinates = defaultdict(list)
    for row in rows:
        by_coordinates[(row[3], row[4], row[5])].append(row)
    assert len(by_coordinates) == 13
    for (task_id, region_id, region_index), expected in by_coordinates.items():
        listed = api.get(
            f"{url}{ti_url(golden34['run_id'])}/{task_id}/state-store",
            params=at(region_id, region_index) | {"limit": 100},
        )
        assert listed.status_code == 200, (task_id, region_id, region_index, listed.text)
        body = listed.json()
        assert body["total_entries"] == len(expected)
        assert [(e["key"], e["value"]) for e in body["task_state_store"]] == [
            (r[6], json.loads(r[7])) for r in sorted(expected, key=lambda r: r[6])
        ]

    assets = query(db, ASSET_ROWS)
    assert {row[1] for row in assets} == {"regions/watermark", "regions/published", "regions/last work"}
    last_work = next(row for row in assets if row[1] == "regions/last work")
    assert (last_work[10], last_work[11]) == (where["work"][2], 0)  # the last iteration's writer, in its region
    listed = api.get(f"{url}/api/v2/assets/{golden34['asset_id']}/state-store")
    assert listed.status_code == 200, listed.text
    assert listed.json()["total_entries"] == len(assets)
    for entry, row in zip(listed.json()["asset_state_store"], assets, strict=True):
        assert entry == {
            "key": row[1],
            "value": json.loads(row[2]),
            "updated_at": iso(row[3]),
            "last_updated_by": writer(row),
        }


def test_pages_list_every_row_at_its_coordinates(viewed, golden34):
    url, rows = viewed["url"], viewed["rows"]
    browser = logged_in(url)
    run_pk = rows[0][10]
    pages, next_url = [], f"{url}/runs/{run_pk}/"
    while next_url:
        page = browser.get(next_url)
        assert page.status_code == 200, page.text[:2000]
        pages.append(page.text)
        more = re.search(r'<a rel="next" href="([^"]+)"', page.text)
        next_url = f"{url}/runs/{run_pk}/{html.unescape(more.group(1))}" if more else None
    run_page = "".join(pages).replace("<wbr>", "")  # a key in a table may wrap after its separators
    for row in rows:  # every row listed (each links to its own page), its key escaped
        assert f'href="/keys/task/{row[0]}/"' in run_page, row
        assert f"<code><bdi>{html.escape(row[6])}</bdi></code>" in run_page, row[6]
    for row in rows:  # each key's page names the row's coordinates: the region, and the index inside it
        page = browser.get(f"{url}/keys/task/{row[0]}/")
        assert page.status_code == 200, (row, page.text[:2000])
        assert html.escape(row[6]) in page.text
        if row[4] != SENTINEL:
            assert str(row[4]) in page.text, (row[3], row[4], row[5], row[6])
    asset_page = browser.get(f"{url}/assets/{golden34['asset_id']}/")
    assert asset_page.status_code == 200
    for row in query(viewed["db"], ASSET_ROWS):
        assert f"<code><bdi>{html.escape(row[1])}</bdi></code>" in asset_page.text


# b. GC: Airflow 3.4's `state-store clean` and ours leave the same table --------------------------------
@pytest.mark.parametrize("batch_size", [0, 3])
def test_gc_leaves_identical_tables_on_34(airflow34, golden34, batch_size):
    theirs = airflow34.copy(golden34["db"], f"gc_airflow_{batch_size}")
    ours = airflow34.copy(golden34["db"], f"gc_ours_{batch_size}")
    batch = {"AIRFLOW__STATE_STORE__STATE_CLEANUP_BATCH_SIZE": str(batch_size)}
    airflow34.run(theirs, "state-store", "clean", **batch)
    done = Dashboard(airflow34, ours).migrate().manage("state_store_clean", "--json", **batch)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    survivors = query(theirs, TASK_ROWS)
    assert survivors == query(ours, TASK_ROWS)
    assert query(theirs, ASSET_ROWS) == query(ours, ASSET_ROWS) == query(golden34["db"], ASSET_ROWS)
    deleted = len(query(golden34["db"], TASK_ROWS)) - len(survivors)
    assert deleted == summary["rows_deleted"] == 9  # 3 in the loop's step, 3 in work's iterations, 3 per table
    assert not query(ours, "SELECT 1 FROM task_state_store WHERE expires_at < now()")
    # the three refine.work cursors at index 0 (three regions) all survive, each in its own region
    assert len({r[2] for r in survivors if r[1] == "refine.work" and r[3] == 0}) == 3


def test_gc_dry_run_names_the_coordinates(airflow34, golden34):
    db = airflow34.copy(golden34["db"], "gc_dry_run")
    expired = query(
        db,
        "SELECT dag_id, run_id, task_id, region_id, region_index, key FROM task_state_store WHERE expires_at < now()",
    )
    theirs = airflow34.run(db, "state-store", "clean", "--dry-run").stdout
    listed = re.findall(r"Dag '([^']*)', run '([^']*)', task '([^']*)', region_index (-?\d+), key '([^']*)'", theirs)
    assert sorted(listed) == sorted((d, r, t, str(i), k) for d, r, t, _, i, k in expired)
    done = Dashboard(airflow34, db).migrate().manage("state_store_clean", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert f"Dry run: {len(expired)} task state rows" in done.stdout, done.stdout
    lines = [line for line in done.stdout.splitlines() if line.startswith("  dag ")]
    assert len(lines) == 5, done.stdout  # the sample
    for line in lines:  # each names a row Airflow would delete, by its region and its index in it
        match = re.search(r"task '([^']*)' region_id ([0-9a-f-]{36}) region_index (-?\d+) key '([^']*)'", line)
        assert match, line
        task_id, region_id, region_index, key = match.groups()
        assert any((t, str(r), i, k) == (task_id, region_id, int(region_index), key) for _, _, t, r, i, k in expired), (
            line
        )
    assert query(db, TASK_ROWS) == query(golden34["db"], TASK_ROWS)  # dry runs delete nothing


# c. The same requests, the same answers, with region parameters ----------------------------------------
def request_sequence(run_id: str, asset_id: int, where: dict) -> list[tuple[str, str, dict | None]]:
    ti = ti_url(run_id)
    loop, work, table = where["loop"], where["work"], where["table"]
    nowhere = uuid.UUID("0badc0de-0000-4000-8000-000000000001")
    asset = f"/api/v2/assets/{asset_id}/state-store"
    new = quote("new/key: with spaces", safe="")

    def q(**params) -> str:
        return "?" + "&".join(f"{k}={v}" for k, v in params.items())

    return [
        # outside any region: 3.3's addresses keep working
        ("GET", f"{ti}/plain/state-store", None),
        ("GET", f"{ti}/plain/state-store/{quote('outside/any: region', safe='')}", None),
        ("GET", f"{ti}/plain/state-store{q(region_id=SENTINEL, region_index=-1)}", None),
        # the loop's unmapped task: one region, an index per iteration
        ("GET", f"{ti}/refine.step/state-store", None),
        ("GET", f"{ti}/refine.step/state-store{q(region_id=loop, region_index=1)}", None),
        ("GET", f"{ti}/refine.step/state-store/iteration{q(region_id=loop, region_index=2)}", None),
        ("GET", f"{ti}/refine.step/state-store{q(region_id=loop)}", None),
        ("GET", f"{ti}/refine.step/state-store{q(region_index=1)}", None),
        ("GET", f"{ti}/refine.step/state-store{q(region_id=loop, region_index=1, map_index=2)}", None),
        ("GET", f"{ti}/refine.step/state-store{q(region_id=loop, region_index=1, map_index=1)}", None),
        ("GET", f"{ti}/refine.step/state-store{q(map_index=1)}", None),
        # the mapped task inside the loop: index 0 in three regions
        ("GET", f"{ti}/refine.work/state-store{q(map_index=0)}", None),
        ("GET", f"{ti}/refine.work/state-store", None),
        ("GET", f"{ti}/refine.work/state-store{q(region_id=work[1], region_index=0)}", None),
        ("GET", f"{ti}/refine.work/state-store{q(region_id=work[1])}", None),
        ("GET", f"{ti}/refine.work/state-store{q(region_id=work[0], map_index=1)}", None),
        ("GET", f"{ti}/refine.work/state-store/cursor{q(region_id=work[2], region_index=1)}", None),
        ("GET", f"{ti}/refine.work/state-store/cursor{q(region_id=work[2], region_index=5)}", None),
        ("GET", f"{ti}/refine.work/state-store{q(region_id=nowhere, region_index=0)}", None),
        ("GET", f"{ti}/refine.work/state-store{q(region_id=nowhere)}", None),
        ("GET", f"{ti}/refine.work/state-store{q(region_id='not-a-uuid', region_index=0)}", None),
        ("GET", f"{ti}/refine.work/state-store{q(region_id=work[1], region_index=-2)}", None),
        ("GET", f"{ti}/refine.work/state-store{q(region_id=work[1], region_index='x')}", None),
        # the mapped task group: its public map index, or its region
        ("GET", f"{ti}/per_table.load/state-store{q(map_index=1)}", None),
        ("GET", f"{ti}/per_table.load/state-store/rows{q(map_index=2)}", None),
        ("GET", f"{ti}/per_table.load/state-store{q(region_id=table, region_index=0)}", None),
        ("GET", f"{ti}/per_table.load/state-store", None),
        ("GET", f"{ti}/ghost/state-store{q(region_id=loop, region_index=0)}", None),
        # writes
        ("PUT", f"{ti}/refine.work/state-store/{new}{q(region_id=work[1], region_index=0)}", {"value": {"w": [1]}}),
        ("GET", f"{ti}/refine.work/state-store/{new}{q(region_id=work[1], region_index=0)}", None),
        ("GET", f"{ti}/refine.work/state-store/{new}{q(region_id=work[0], region_index=0)}", None),
        ("PUT", f"{ti}/refine.work/state-store/k{q(region_id=nowhere, region_index=0)}", {"value": 1}),
        ("PUT", f"{ti}/refine.work/state-store/k{q(region_id=work[1], region_index=7)}", {"value": 1}),
        ("PUT", f"{ti}/refine.work/state-store/k{q(map_index=0)}", {"value": 1}),
        ("PUT", f"{ti}/refine.step/state-store/k", {"value": 1}),
        ("PUT", f"{ti}/refine.step/state-store/k{q(region_index=0)}", {"value": 1}),
        ("PUT", f"{ti}/refine.step/state-store/k{q(region_id=loop, region_index=0, map_index=1)}", {"value": 1}),
        (
            "PUT",
            f"{ti}/refine.step/state-store/pinned{q(region_id=loop, region_index=0)}",
            {"value": "p", "expires_at": None},
        ),
        ("PUT", f"{ti}/per_table.load/state-store/by-map-index{q(map_index=2)}", {"value": "m"}),
        ("GET", f"{ti}/per_table.load/state-store{q(region_id=table, region_index=2)}", None),
        (
            "PATCH",
            f"{ti}/refine.step/state-store/iteration{q(region_id=loop, region_index=0)}",
            {"value": {"patched": True}},
        ),
        ("GET", f"{ti}/refine.step/state-store/iteration{q(region_id=loop, region_index=0)}", None),
        ("PATCH", f"{ti}/refine.step/state-store/missing{q(region_id=loop, region_index=0)}", {"value": 1}),
        ("PATCH", f"{ti}/refine.step/state-store/iteration", {"value": 1}),
        # deletes and clears
        ("DELETE", f"{ti}/refine.work/state-store/cursor{q(region_id=work[0], region_index=1)}", None),
        ("DELETE", f"{ti}/refine.work/state-store/cursor{q(region_id=work[0], region_index=1)}", None),
        ("GET", f"{ti}/refine.work/state-store{q(region_id=work[0], region_index=1)}", None),
        ("DELETE", f"{ti}/refine.work/state-store/cursor{q(region_id=nowhere, region_index=1)}", None),
        ("DELETE", f"{ti}/refine.work/state-store/cursor{q(map_index=0)}", None),
        ("DELETE", f"{ti}/refine.work/state-store{q(region_id=work[2], region_index=0)}", None),
        ("GET", f"{ti}/refine.work/state-store{q(region_id=work[2], region_index=0)}", None),
        ("GET", f"{ti}/refine.work/state-store{q(region_id=work[2], region_index=1)}", None),
        ("DELETE", f"{ti}/refine.work/state-store{q(region_id=work[1], all_map_indices='true')}", None),
        ("GET", f"{ti}/refine.work/state-store{q(region_id=work[1], region_index=1)}", None),
        ("GET", f"{ti}/refine.work/state-store{q(region_id=work[0], region_index=0)}", None),
        ("DELETE", f"{ti}/refine.work/state-store{q(all_map_indices='true')}", None),
        ("DELETE", f"{ti}/refine.step/state-store{q(region_id=loop, all_map_indices='true')}", None),
        ("GET", f"{ti}/refine.step/state-store{q(region_id=loop, region_index=1)}", None),
        ("DELETE", f"{ti}/refine.step/state-store", None),
        ("DELETE", f"{ti}/per_table.load/state-store{q(all_map_indices='true')}", None),
        ("GET", f"{ti}/per_table.load/state-store{q(map_index=0)}", None),
        ("DELETE", f"{ti}/ghost/state-store{q(region_id=loop, region_index=0)}", None),
        # the asset's writers: a task in a region, tasks outside any, the API
        ("GET", asset, None),
        ("GET", f"{asset}/{quote('regions/last work', safe='')}", None),
        ("PUT", f"{asset}/{quote('regions/last work', safe='')}", {"value": {"now": "api"}}),
        ("GET", f"{asset}/{quote('regions/last work', safe='')}", None),
        ("GET", asset, None),
    ]


# A second live expansion of the mapped task group (as two creators racing for one slot could leave, or a
# clear whose old task instances were not retired): a fork of its region with a copy of its task instances,
# all in the working set. Coordinates that name only the task and a map index then match two executions.
SECOND_EXPANSION = uuid.UUID("0badc0de-0000-4000-8000-00000000000f")
TWO_LIVE_EXPANSIONS = f"""
CREATE TEMP TABLE r AS SELECT * FROM dynamic_region WHERE node_id = 'per_table.load';
UPDATE r SET forked_from_region_id = id, slot_key = NULL, id = '{SECOND_EXPANSION}';
INSERT INTO dynamic_region SELECT * FROM r;
CREATE TEMP TABLE t AS SELECT * FROM task_instance WHERE task_id = 'per_table.load';
UPDATE t SET id = gen_random_uuid(), region_id = '{SECOND_EXPANSION}';
INSERT INTO task_instance SELECT * FROM t;
"""


def ambiguous_sequence(run_id: str, where: dict) -> list[tuple[str, str, dict | None]]:
    load = f"{ti_url(run_id)}/per_table.load/state-store"
    second, first = SECOND_EXPANSION, where["table"]
    return [
        ("GET", f"{load}?map_index=1", None),
        ("GET", f"{load}/rows?map_index=1", None),
        ("PUT", f"{load}/k?map_index=1", {"value": 1}),
        ("PATCH", f"{load}/rows?map_index=1", {"value": 1}),
        ("DELETE", f"{load}/rows?map_index=1", None),
        ("DELETE", f"{load}?all_map_indices=true", None),
        ("DELETE", f"{load}?map_index=0", None),
        ("PUT", f"{load}/k?region_id={second}&region_index=1", {"value": "second"}),
        ("GET", f"{load}?region_id={second}&region_index=1", None),
        ("GET", f"{load}?region_id={first}&region_index=1", None),
        ("DELETE", f"{load}?region_id={second}&all_map_indices=true", None),
        ("GET", f"{load}/k?region_id={second}&region_index=1", None),
    ]


def test_api_answers_like_airflow_34(airflow34, golden34, servers):
    theirs = airflow34.copy(golden34["db"], "api_airflow")
    ours = airflow34.copy(golden34["db"], "api_ours")
    process, airflow_url = airflow34.api_server(theirs)  # the simple auth manager, all admins: no token
    servers.append(process)
    dashboard = Dashboard(airflow34, ours)
    token = dashboard.setup()
    process, our_url = dashboard.server()
    servers.append(process)
    airflow_session, our_session = requests.Session(), api_session(token)
    differences, statuses = [], set()
    where = regions(theirs)
    for method, path, body in request_sequence(golden34["run_id"], golden34["asset_id"], where):
        expected = exchange(airflow_session, airflow_url, method, path, body)
        actual = exchange(our_session, our_url, method, path, body)
        statuses.add(expected[0])
        if expected != actual:
            differences.append(f"{method} {path} {body}\n  airflow: {expected}\n  ours:    {actual}")
    with psycopg.connect(f"{SERVER}/{theirs}") as a, psycopg.connect(f"{SERVER}/{ours}") as b:
        a.execute(TWO_LIVE_EXPANSIONS)
        b.execute(TWO_LIVE_EXPANSIONS)
    for method, path, body in ambiguous_sequence(golden34["run_id"], where):
        expected = exchange(airflow_session, airflow_url, method, path, body)
        actual = exchange(our_session, our_url, method, path, body)
        statuses.add(expected[0])
        if expected != actual:
            differences.append(f"{method} {path} {body}\n  airflow: {expected}\n  ours:    {actual}")
    assert not differences, f"{len(differences)} differences:\n" + "\n".join(differences)
    assert {200, 204, 400, 404, 409, 422} <= statuses, statuses
    rows = (
        "SELECT task_id, region_id, region_index, key, value, expires_at IS NULL FROM task_state_store "
        "ORDER BY 1, 2, 3, 4"
    )
    assert query(theirs, rows) == query(ours, rows)
    writers = "SELECT key, value, last_updated_by_kind, last_updated_by_region_id FROM asset_state_store ORDER BY 1"
    assert query(theirs, writers) == query(ours, writers)


# d. What the dashboard writes into an iteration, Airflow's SDK reads back ----------------------------------
def test_airflow_sdk_reads_what_the_dashboard_writes_into_an_iteration(airflow34, golden34, servers):
    db = airflow34.copy(golden34["db"], "readback")
    dashboard = Dashboard(airflow34, db)
    token = dashboard.setup()
    process, url = dashboard.server()
    servers.append(process)
    api = api_session(token)
    where = regions(db)
    ti = f"{url}{ti_url(golden34['run_id'])}"
    value = {"nested": {"list": [1, 2.5, None, True], "text": 'Grüße 🚀 "quoted" <b>'}}
    key = quote("from/dashboard: spaces", safe="")
    statuses = [
        # into iteration 1's expansion of refine.work, index 0 (iterations 0 and 2 have the same index)
        api.put(f"{ti}/refine.work/state-store/{key}", params=at(where["work"][1], 0), json={"value": value}),
        # the loop's step in iteration 2: an existing key edited
        api.patch(f"{ti}/refine.step/state-store/iteration", params=at(where["loop"], 2), json={"value": "edited"}),
        # the mapped task group by its public map index
        api.put(f"{ti}/per_table.load/state-store/{key}", params={"map_index": 1}, json={"value": [value]}),
    ]
    # the UI's edit of one iteration's key (iteration 2's cursor at index 0), by the row it shows
    browser = logged_in(url)
    headers = {"X-CSRFToken": browser.cookies["csrftoken"], "HX-Request": "true", "Referer": url}
    cursor = query(
        db,
        "SELECT id FROM task_state_store WHERE task_id = 'refine.work' AND key = 'cursor' "
        "AND region_id = %s AND region_index = 0",
        [where["work"][2]],
    )[0][0]
    statuses.append(browser.post(f"{url}/keys/task/{cursor}/edit/", headers=headers, data={"value": '"from the UI"'}))

    tis, work, loop, table = where["tis"], where["work"], where["loop"], where["table"]
    plain_key = "from/dashboard: spaces"
    reads = [
        [tis[("refine.work", work[1], 0)], plain_key],
        [tis[("refine.work", work[0], 0)], plain_key],
        [tis[("refine.work", work[2], 0)], plain_key],
        [tis[("refine.work", work[1], 1)], plain_key],
        [tis[("refine.step", loop, 2)], "iteration"],
        [tis[("refine.step", loop, 1)], "iteration"],
        [tis[("per_table.load", table, 1)], plain_key],
        [tis[("per_table.load", table, 0)], plain_key],
        [tis[("refine.work", work[2], 0)], "cursor"],
        [tis[("refine.work", work[1], 0)], "cursor"],
    ]
    read = airflow34.python(db, "sdk-get-ti", json.dumps(reads))["values"]
    # one comparison, so that a failure shows every write's answer and everything the SDK read
    assert ([(r.status_code, r.text) for r in statuses], read) == (
        [(204, ""), (200, "null"), (204, ""), (204, "")],
        [value, None, None, None, "edited", {"index": 1, "text": "Grüße <b>&</b>"}, [value], None, "from the UI"]
        + [{"iteration": 1, "item": "a"}],
    )
    assert airflow34.python(
        db, "get-task", DAG_ID_34, golden34["run_id"], "refine.work", "0", plain_key, str(work[1])
    ) == {"value": json.dumps(value)}
