"""Airflow 3.4's regions on the pages (issue 22), through Django's test client on Airflow's real 3.4 schema:
a run's keys by (task, region path, index), loop iterations newest last with the gate's decision, a forked
expansion's current and replaced executions, a coordinate's own page, forms and links, the search by loop
iteration, and links into Airflow 3.4's UI. Run them with AIRFLOW_FIXTURE_SERIES=3.4; on 3.3 they skip (3.3's
schema has no regions) but for the few that check 3.3's pages refuse a region."""

import html as htmllib
import json
import re

import pytest
from django.db import connections
from django.test import override_settings

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.airflow.versions import SENTINEL_REGION_ID, schema_of
from tests.conftest import BOTH_DATABASES
from tests.factories import (
    LOOP_GATE_OPERATOR,
    make_dag_run,
    make_loop_decision,
    make_region,
    make_region_instance,
    make_region_key,
    make_task_instance,
    make_task_key,
)

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
LOOP, GATE, CHOOSE, PROCESS = (
    "process_batch",
    "process_batch.batch_ready",
    "process_batch.choose",
    "process_batch.process",
)
DECISIONS = ["needs another pass", "still short", "every batch ≥ 2: stop"]


@pytest.fixture
def looped(regions_schema):
    """A run of a loop (three iterations, a gate recording a decision each) around a mapped task (two map
    positions an iteration, each expansion a region under its iteration); iteration 1's expansion was cleared
    and re-created (a fork; the replaced task instances out of the working set, their keys kept); a mapped task
    group ``score`` with two expansions; and a plain task outside any region."""
    run = make_dag_run(dag_id="batches", run_id="manual__loops")
    loop = make_region(run, LOOP)
    expansions, fork = [], None
    for iteration in range(3):
        gate = make_region_instance(run, GATE, loop, iteration, operator=LOOP_GATE_OPERATOR)
        make_loop_decision(gate, DECISIONS[iteration])
        make_region_instance(run, CHOOSE, loop, iteration)
        make_region_key(run, CHOOSE, loop, iteration, "size", f"size-{iteration}")
        expansion = make_region(run, PROCESS, loop, iteration)
        expansions.append(expansion)
        for position in range(2):
            make_region_instance(run, PROCESS, expansion, position, working_set=iteration != 1)
            make_region_key(run, PROCESS, expansion, position, "offset", f"it{iteration}-pos{position}")
        if iteration == 1:
            fork = make_region(run, PROCESS, loop, 1, forked_from=expansion)
            for position in range(2):
                make_region_instance(run, PROCESS, fork, position)
                make_region_key(run, PROCESS, fork, position, "offset", f"it1-pos{position}-again")
    group = make_region(run, "score")
    for expansion_index in range(2):
        make_region_instance(run, "score.fit", group, expansion_index)
        make_region_key(run, "score.fit", group, expansion_index, "model", f"model-{expansion_index}")
    make_task_instance(run, task_id="prepare")
    make_task_key(run, task_id="prepare", key="plain", value="outside")
    return {"run": run, "loop": loop, "expansions": expansions, "fork": fork, "group": group}


def text(html: str) -> str:
    return re.sub(r"\s+", " ", htmllib.unescape(re.sub(r"<[^>]+>", " ", html)))


def values_in(html: str) -> list[str]:
    """The value previews of the key tables in ``html``, as shown."""
    cells = re.findall(r'<td class="value">(.*?)</td>', html, re.S)
    return [htmllib.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in cells]


def rows(html: str) -> list[tuple[str, str, str]]:
    """Each key row's region path, the rest of its region cell (badges, decision) and its value, in page order
    (one table a task; a path is empty outside any region)."""
    found = []
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.S):
        if '<td class="value">' not in row:
            continue
        cell = re.search(r'<td class="region">(.*?)</td>', row, re.S)
        path = re.search(r'<span class="region-path"[^>]*>(.*?)</span>', cell.group(1)) if cell else None
        rest = text(cell.group(1)).strip() if cell else ""
        label = htmllib.unescape(path.group(1)) if path else ""
        found.append((label, rest[len(label) :].strip() if label else rest, values_in(row)[0]))
    return found


def test_the_run_page_lists_each_coordinates_keys_under_its_path_newest_last(client, operator, looped):
    """One table a task, each key with its region path, the coordinates in Airflow's order (newest last)."""
    client.force_login(operator)
    html = client.get(f"/runs/{looped['run'].pk}/").content.decode()
    assert html.count("<table") == 4  # prepare, the loop's task, the mapped task in it, the group's task
    shown = [(path, value) for path, _, value in rows(html)]
    assert shown == [
        ("", '"outside"'),
        ("loop process_batch · iteration 0", '"size-0"'),
        ("loop process_batch · iteration 1", '"size-1"'),
        ("loop process_batch · iteration 2", '"size-2"'),
        ("loop process_batch · iteration 0 › map 0", '"it0-pos0"'),
        ("loop process_batch · iteration 0 › map 1", '"it0-pos1"'),
        ("loop process_batch · iteration 1 › map 0", '"it1-pos0"'),  # the replaced execution first
        ("loop process_batch · iteration 1 › map 0", '"it1-pos0-again"'),
        ("loop process_batch · iteration 1 › map 1", '"it1-pos1"'),
        ("loop process_batch · iteration 1 › map 1", '"it1-pos1-again"'),
        ("loop process_batch · iteration 2 › map 0", '"it2-pos0"'),
        ("loop process_batch · iteration 2 › map 1", '"it2-pos1"'),
        ("group score · expansion 0", '"model-0"'),
        ("group score · expansion 1", '"model-1"'),
    ]


def test_a_forked_expansion_says_which_execution_is_current(client, operator, looped):
    client.force_login(operator)
    html = client.get(f"/runs/{looped['run'].pk}/").content.decode()
    for path, badges, value in rows(html):
        if "iteration 1 › map" in path:
            assert ("replaced" in badges) == (not value.endswith('again"')), path
    assert html.count('data-testid="replaced"') == 2


def test_the_run_page_lists_the_loops_iterations_with_the_gates_decisions(client, operator, looped):
    client.force_login(operator)
    html = client.get(f"/runs/{looped['run'].pk}/").content.decode()
    loops = text(re.search(r'<section class="loops".*?</section>', html, re.S).group(0))
    assert "process_batch · 3 iterations" in loops
    assert re.findall(r"iteration (\d) decision: ([^·]+?)(?= iteration|\s*$)", loops) == [
        ("0", "needs another pass"),
        ("1", "still short"),
        ("2", "every batch ≥ 2: stop"),
    ]
    # a key directly in the loop shows its iteration's decision; a region nested in it does not repeat it
    shown = rows(html)
    assert any(p == "loop process_batch · iteration 2" and "decision: every batch ≥ 2: stop" in b for p, b, _ in shown)
    assert not any("› map" in p and "decision" in b for p, b, _ in shown)


def test_a_coordinates_page_shows_its_keys_only(client, operator, looped):
    client.force_login(operator)
    run, expansion = looped["run"], looped["expansions"][2]
    html = client.get(f"/runs/{run.pk}/tasks/{PROCESS}/?map_index=1&region_id={expansion.pk}").content.decode()
    panel = html[html.index('id="keys-panel"') :]
    assert values_in(panel) == ['"it2-pos1"']
    assert "loop process_batch · iteration 2 › map 1" in text(html)
    assert f"map_index=1&amp;region_id={expansion.pk}" in html  # its actions and add form keep the coordinate
    assert "Clear iteration 2 › map 1" in text(html)
    chips = re.search(r'<nav class="map-indexes coordinates".*?</nav>', html, re.S).group(0)
    assert text(chips).split("With state: ")[1].split()[:4] == ["all", "iteration", "0", "›"]
    assert 'aria-current="page">iteration 2 › map 1<' in chips


def test_every_coordinate_of_a_task_in_one_region_can_be_cleared_together(client, operator, looped):
    client.force_login(operator)
    run, group = looped["run"], looped["group"]
    html = client.get(f"/runs/{run.pk}/tasks/score.fit/").content.decode()
    assert f"map_index=all&amp;region_id={group.pk}" in html  # every expansion of the group, in its region
    html = client.get(f"/runs/{run.pk}/tasks/{PROCESS}/").content.decode()
    assert "Clear all map indexes" not in html and "Open an iteration or map position" in html  # several regions


@pytest.mark.parametrize(
    "url",
    [
        "/runs/{run}/tasks/process_batch.process/?map_index=1&region_id=not-a-uuid",
        "/task-instance/?dag_id=batches&run_id=manual__loops&task_id=prepare&region_id=1234",
        "/runs/{run}/tasks/process_batch.process/add/?region_id=zz",
    ],
)
def test_a_malformed_region_id_is_a_clear_400(client, operator, dag_run_factory, url):
    """On both series: a link naming a region must not silently show another one, nor fail with a 500."""
    client.force_login(operator)
    run = dag_run_factory(dag_id="batches", run_id="manual__loops")
    before = TaskStateStore.objects.count()
    response = client.get(url.format(run=run.pk))
    assert response.status_code == 400
    assert "is not a region id" in response.content.decode()
    hx = client.get(url.format(run=run.pk), **HX)
    assert hx.status_code == 400 and hx["Content-Type"].startswith("text/plain")
    assert TaskStateStore.objects.count() == before


def test_a_malformed_region_id_in_a_confirmation_changes_nothing(client, operator, looped):
    client.force_login(operator)
    run = looped["run"]
    before = sorted(TaskStateStore.objects.values_list("id", "value"))
    target = {"run": run.pk, "task_id": PROCESS, "map_index": 1, "region_id": "nope", "listed": "x"}
    response = client.post("/keys/task/delete/", target, **HX)
    assert response.status_code == 422 and "is not a region id" in response.content.decode()
    assert sorted(TaskStateStore.objects.values_list("id", "value")) == before


def _confirm(client, action: str, query: dict) -> str:
    response = client.get(f"/keys/task/{action}/", query, **HX)
    assert response.status_code == 200, response.content.decode()
    return re.search(r'name="listed" value="([^"]+)"', response.content.decode()).group(1)


def test_clearing_one_coordinate_deletes_exactly_its_keys(client, operator, looped):
    client.force_login(operator)
    run, fork = looped["run"], looped["fork"]
    query = {"run": run.pk, "task_id": PROCESS, "map_index": 0, "region_id": str(fork.pk)}
    dialog = client.get("/keys/task/delete/", query, **HX).content.decode()
    assert f'name="region_id" value="{fork.pk}"' in dialog and "1 task key?" in text(dialog)
    listed = _confirm(client, "delete", query)
    before = set(TaskStateStore.objects.values_list("value", flat=True))
    response = client.post("/keys/task/delete/", {**query, "listed": listed}, **HX)
    assert response.status_code == 204
    assert before - set(TaskStateStore.objects.values_list("value", flat=True)) == {'"it1-pos0-again"'}


def test_adding_a_key_to_a_coordinate_writes_it_there(client, operator, looped):
    client.force_login(operator)
    run, expansion = looped["run"], looped["expansions"][0]
    url = f"/runs/{run.pk}/tasks/{PROCESS}/add/?region_id={expansion.pk}"
    form = client.get(url + "&map_index=1", **HX).content.decode()
    assert f'action="/runs/{run.pk}/tasks/{PROCESS}/add/?region_id={expansion.pk}"' in form
    data = {"key": "note", "value": json.dumps("hello"), "map_index": 1, "expiry": "never"}
    response = client.post(url, data, **HX)
    assert response.status_code == 204, response.content.decode()
    row = TaskStateStore.objects.get(key="note")
    assert (row.region_id, row.map_index, row.task_id) == (expansion.pk, 1, PROCESS)


def test_a_keys_page_names_its_coordinate_and_its_replaced_execution(client, operator, looped):
    client.force_login(operator)
    replaced = TaskStateStore.objects.get(value='"it1-pos1"')
    html = client.get(f"/keys/task/{replaced.pk}/").content.decode()
    assert "loop process_batch · iteration 1 › map 1" in text(html) and "from a replaced execution" in text(html)
    assert f"?map_index=1&amp;region_id={replaced.region_id}" in html  # the breadcrumb: that coordinate's page
    assert f"%3Fmap_index%3D1%26region_id%3D{replaced.region_id}" in html  # the delete goes back there
    current = TaskStateStore.objects.get(value='"it1-pos1-again"')
    html = client.get(f"/keys/task/{current.pk}/").content.decode()
    assert "from a replaced execution" not in text(html) and "current" in text(html)


def test_editing_a_coordinates_key_changes_that_row_only(client, operator, looped):
    client.force_login(operator)
    key = TaskStateStore.objects.get(value='"it2-pos0"')
    before = {k.pk: k.value for k in TaskStateStore.objects.exclude(pk=key.pk)}
    form = client.get(f"/keys/task/{key.pk}/edit/", **HX).content.decode()
    seen = re.search(r'name="seen_updated_at"[^>]*value="([^"]+)"', form).group(1)
    response = client.post(f"/keys/task/{key.pk}/edit/", {"value": '"edited"', "seen_updated_at": seen}, **HX)
    assert response.status_code == 204, response.content.decode()
    assert TaskStateStore.objects.get(pk=key.pk).value == '"edited"'
    assert {k.pk: k.value for k in TaskStateStore.objects.exclude(pk=key.pk)} == before


def _found(client, query: str) -> set[str]:
    return set(values_in(client.get(f"/search/?{query}").content.decode()))


def test_the_search_finds_the_keys_of_one_loop_iteration(client, operator, looped):
    client.force_login(operator)
    iteration_1 = {'"size-1"', '"it1-pos0"', '"it1-pos1"', '"it1-pos0-again"', '"it1-pos1-again"'}
    assert _found(client, "iteration=1") == iteration_1
    assert _found(client, f"iteration=1&loop={LOOP}&run_id=manual__loops") == iteration_1
    assert _found(client, "iteration=2&task_id=process_batch.process") == {'"it2-pos0"', '"it2-pos1"'}
    assert _found(client, "iteration=1&loop=another_loop") == set()
    assert _found(client, "iteration=7") == set()
    response = client.get("/search/?iteration=first")
    assert response.status_code == 400 and "a whole number from 0" in response.content.decode()


@override_settings(AIRFLOW_UI_URL="http://airflow.example:8080")
def test_airflow_links_open_the_same_iteration_in_airflows_ui(client, operator, looped):
    """Airflow 3.4's UI addresses a task instance in a region by its public map index in the path and
    ``region_id`` and ``region_index`` in the query."""
    client.force_login(operator)
    run, loop, expansion = looped["run"], looped["loop"], looped["expansions"][2]
    base = "http://airflow.example:8080/dags/batches/runs/manual__loops/tasks"
    html = client.get(f"/runs/{run.pk}/tasks/{PROCESS}/?map_index=1&region_id={expansion.pk}").content.decode()
    assert f'href="{base}/{PROCESS}/mapped/1/task-state-store?region_id={expansion.pk}&amp;region_index=1"' in html
    html = client.get(f"/runs/{run.pk}/tasks/{CHOOSE}/?map_index=2&region_id={loop.pk}").content.decode()
    assert f'href="{base}/{CHOOSE}/task-state-store?region_id={loop.pk}&amp;region_index=2"' in html  # not mapped


def test_a_coordinates_download_holds_its_regions_keys_only(client, operator, looped):
    client.force_login(operator)
    run, fork = looped["run"], looped["fork"]
    response = client.get(f"/runs/{run.pk}/tasks/{PROCESS}/export/?map_index=all&region_id={fork.pk}&format=json")
    document = json.loads(b"".join(response.streaming_content))
    assert sorted(k["value"] for k in document["keys"]) == ["it1-pos0-again", "it1-pos1-again"]


def test_a_plain_task_on_34_looks_as_on_33(client, operator, looped):
    client.force_login(operator)
    html = client.get(f"/runs/{looped['run'].pk}/tasks/prepare/").content.decode()
    assert "In loops or expansions" not in html and "region_id" not in html
    assert values_in(html) == ['"outside"']


def test_a_region_on_33_is_not_found(client, operator, dag_run_factory, task_instance_factory):
    if schema_of(connections["airflow"]).regions:
        pytest.skip("checks Airflow 3.3's schema, which has no regions")
    client.force_login(operator)
    run = dag_run_factory(dag_id="batches", run_id="manual__plain")
    task_instance_factory(run, task_id="prepare")
    response = client.get(f"/runs/{run.pk}/tasks/prepare/?map_index=-1&region_id={SENTINEL_REGION_ID}")
    assert response.status_code == 200  # the sentinel is "outside any region": the same page
    response = client.get(f"/runs/{run.pk}/tasks/prepare/?map_index=-1&region_id=0193a1f0-0000-7000-8000-000000000001")
    assert response.status_code == 404 and "has no regions" in response.content.decode()


def test_an_asset_keys_writer_in_a_region_links_to_that_coordinate(client, operator, looped):
    from tests.factories import make_asset, make_asset_key

    client.force_login(operator)
    run, expansion = looped["run"], looped["expansions"][2]
    asset = make_asset(name="batches_out")
    writer = {"dag_id": run.dag_id, "run_id": run.run_id, "task_id": PROCESS, "map_index": 1}
    make_asset_key(asset, key="done", value=1, kind="task", **writer, region_id=expansion.pk, region_index=1)
    html = client.get(f"/assets/{asset.pk}/").content.decode()
    link = htmllib.unescape(re.search(r'href="(/task-instance/\?[^"]+)"', html).group(1))
    assert link.endswith(f"&map_index=1&region_id={expansion.pk}")
    response = client.get(link)
    assert response.status_code == 302
    assert response["Location"] == f"/runs/{run.pk}/tasks/{PROCESS}/?map_index=1&region_id={expansion.pk}"


WRITER_PATH = f"loop {LOOP} · iteration 2 › map 1"


@pytest.fixture
def looped_asset_key(looped):
    """An asset key the mapped task wrote from map position 1 of the loop's iteration 2 (its public map index 1,
    as Airflow records it, says nothing of the iteration)."""
    from tests.factories import make_asset, make_asset_key

    run, expansion = looped["run"], looped["expansions"][2]
    asset = make_asset(name="batches_out")
    writer = {"dag_id": run.dag_id, "run_id": run.run_id, "task_id": PROCESS, "map_index": 1}
    make_asset_key(asset, key="done", value=1, kind="task", **writer, region_id=expansion.pk, region_index=1)
    make_asset_key(asset, key="by_api", value=2, kind="api")
    return asset


def _writer_paths(html: str) -> list[str]:
    return [text(m).strip() for m in re.findall(r'data-testid="writer-coordinate">(.*?)</span>', html)]


def test_an_asset_keys_writer_in_a_loop_is_named_with_its_iteration(client, operator, looped_asset_key):
    """Issue 42, item 12: the asset's page and the key's page name the writer as the task instance page does."""
    client.force_login(operator)
    asset = looped_asset_key
    html = client.get(f"/assets/{asset.pk}/").content.decode()
    assert _writer_paths(html) == [WRITER_PATH]
    assert f"{PROCESS} · {WRITER_PATH}" in text(html)
    html = client.get(f"/assets/{asset.pk}/key/?key=done").content.decode()
    assert _writer_paths(html) == [WRITER_PATH]


def test_the_search_names_an_asset_writers_iteration(client, operator, looped_asset_key):
    client.force_login(operator)
    html = client.get("/search/?store=asset&asset=batches_out").content.decode()
    assert _writer_paths(html) == [WRITER_PATH]


def test_our_search_api_gives_an_asset_writers_iteration_airflows_route_keeps_its_shape(
    client, operator, looped_asset_key
):
    from tests.api.test_api import bearer

    client.defaults.update(bearer(operator))
    found = client.get("/api/statestore/v1/search/asset-keys?asset=batches_out").json()["items"]
    writers = {item["key"]: item["last_updated_by"] for item in found}
    assert writers["done"]["iteration"] == 2 and writers["done"]["coordinate"] == WRITER_PATH
    assert writers["done"]["map_index"] == 1 and "iteration" not in writers["by_api"]
    airflows = client.get(f"/api/v2/assets/{looped_asset_key.pk}/state-store").json()["asset_state_store"]
    assert all("iteration" not in e["last_updated_by"] and "coordinate" not in e["last_updated_by"] for e in airflows)


def test_the_audit_trail_names_a_task_instance_in_a_loop_with_its_iteration(client, operator, looped):
    """A change made at a coordinate is recorded with its region and index: the Audit list, the event's page and
    our audit API name that place as the task instance page does, not by the region's id."""
    from statestore_admin.records.models import AuditEvent
    from tests.api.test_api import bearer

    client.force_login(operator)
    run, expansion = looped["run"], looped["expansions"][2]
    url = f"/runs/{run.pk}/tasks/{PROCESS}/add/?region_id={expansion.pk}"
    data = {"key": "note", "value": json.dumps("hello"), "map_index": 1, "expiry": "never"}
    assert client.post(url, data, **HX).status_code == 204
    (event,) = [e for e in AuditEvent.objects.all() if (e.action, e.region_id) == ("add", expansion.pk)]
    listed = client.get("/audit/").content.decode()
    assert WRITER_PATH in re.findall(r'data-testid="coordinate">(.*?)</span>', listed)
    page = client.get(f"/audit/{event.pk}/").content.decode()
    assert re.findall(r'data-testid="coordinate">(.*?)</span>', page) == [WRITER_PATH, WRITER_PATH]  # event, key
    client.defaults.update(bearer(operator))
    (key,) = client.get(f"/api/statestore/v1/audit-events/{event.pk}").json()["keys"]
    assert (key["iteration"], key["coordinate"], key["map_index"]) == (2, WRITER_PATH, 1)


@pytest.mark.parametrize(
    "coordinates",
    ["map_index=1", "map_index=0", "map_index=all", "map_index=2&region_id={loop}", "map_index=1&region_id={last}"],
)
def test_a_task_instance_download_lists_what_its_page_lists(client, operator, looped, coordinates):
    """Without ``region_id`` a number is Airflow's public map index, as on the page: the keys of every loop
    iteration at that index are not merged into one file."""
    client.force_login(operator)
    run, query = looped["run"], coordinates.format(loop=looped["loop"].pk, last=looped["expansions"][2].pk)
    task = CHOOSE if f"region_id={looped['loop'].pk}" in query else PROCESS
    shown = values_in(client.get(f"/runs/{run.pk}/tasks/{task}/?{query}").content.decode())
    response = client.get(f"/runs/{run.pk}/tasks/{task}/export/?{query}&format=json")
    assert response.status_code == 200
    document = json.loads(b"".join(response.streaming_content))
    assert sorted(json.dumps(k["value"]) for k in document["keys"]) == sorted(shown)
    if query == "map_index=1":  # nothing outside a region at index 1: four iterations' keys were merged before
        assert shown == []
    if query == "map_index=all":
        assert len(shown) == 8
