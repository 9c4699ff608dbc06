"""The substring search's time budget (issue 13): a ``contains`` key search no index can serve stops at its
deadline (``SEARCH_TIME_BUDGET_SECONDS``), returns what it found so far, says so, and continues from where the
scan stopped, finding every match exactly once, in both stores, for scoped users too.

The budget is made 0 s and the scan's chunks a few ids, so that a search is cut after one chunk: no timing in
the tests (speed is measured by bench/pages_bench.py)."""

import html
import re
from urllib.parse import parse_qs, urlparse

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone

from statestore_admin.access.scopes import EVERYTHING, Scope
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.core.pagination import decode_cursor, decode_cursor_for, encode_cursor
from statestore_admin.records.models import AccessScope
from statestore_admin.state import search as searching
from statestore_admin.state.search import SearchQuery
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

TASK_API = "/api/statestore/v1/search/task-keys"
ASSET_API = "/api/statestore/v1/search/asset-keys"
CUT = re.compile(
    r'<div class="warning" role="status">\s*<p>Stopped after 0 s having searched (keys down to id|asset keys up to '
    r"asset id) (\d+): (\d+) found so far\.\s*Add a DAG filter to search faster: keys are indexed by DAG\."
)


@pytest.fixture
def world(dag_run_factory, task_key_factory, asset_factory, asset_key_factory):
    """Task keys of two DAGs interleaved (every third one matches ``job``), and asset keys of two teams' assets
    (some assets with two matching keys, some with none)."""
    runs = {dag: dag_run_factory(dag_id=dag) for dag in ("etl_a", "ml_b")}
    tasks = []
    for number in range(18):
        dag = "etl_a" if number % 2 else "ml_b"
        key = f"job_{number}" if number % 3 == 0 else f"other_{number}"
        tasks.append(task_key_factory(runs[dag], task_id=f"t{number}", key=key))
    assets = []
    for number in range(8):
        asset = asset_factory(name=f"{'etl' if number % 2 else 'ml'}.asset_{number}")
        for key in (f"JOB_b{number}", f"job_a{number}", "watermark") if number % 3 else ("watermark",):
            assets.append(asset_key_factory(asset, key=key))
    return {"tasks": tasks, "assets": assets}


@pytest.fixture
def tiny_chunks(monkeypatch):
    """Chunks of 2 ids (task keys) or 2 asset ids (asset keys), and a budget of 0 s: one chunk a request."""
    for name in ("FIRST_CHUNK", "MIN_CHUNK", "MAX_CHUNK"):
        monkeypatch.setattr(searching, name, 2)
    with override_settings(SEARCH_TIME_BUDGET_SECONDS=0):
        yield


def expected_tasks(world, dags=("etl_a", "ml_b"), word="job"):
    rows = [k for k in world["tasks"] if word in k.key.lower() and k.dag_id in dags]
    return [k.id for k in sorted(rows, key=lambda k: -k.id)]


def expected_assets(world, prefix=""):
    rows = [k for k in world["assets"] if "job" in k.key.lower() and k.asset.name.startswith(prefix)]
    return [(k.asset_id, k.key) for k in sorted(rows, key=lambda k: (k.asset_id, k.key))]


def follow(fetch, limit=1000):
    """Every page of a search, by its next_cursor: (pages, items in order)."""
    pages, items, cursor = [], [], None
    while len(pages) < limit:
        page = fetch(cursor)
        pages.append(page)
        items += page.items
        if page.next_cursor is None:
            return pages, items
        cursor = page.next_cursor
    raise AssertionError("the search never ended")


# The domain ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [1, 2, 50])
def test_a_cut_search_continues_to_every_task_match_exactly_once(world, tiny_chunks, size):
    query = SearchQuery(key="JOB")
    pages, items = follow(
        lambda cursor: searching.search_task_keys(query, timezone.now(), cursor, size, scope=EVERYTHING)
    )
    assert [k.id for k in items] == expected_tasks(world)  # newest first, no duplicate, no gap
    cut = [page for page in pages if page.cut_short]
    assert cut and all(len(page.items) < size or size == 1 for page in cut)
    for page in cut:  # what it found lies in what it says it searched, and the cursor resumes below that
        assert all(k.id >= page.scanned_to for k in page.items)
        assert len({k.id for k in page.items}) == len(page.items)
    assert not pages[-1].cut_short and pages[-1].next_cursor is None


@pytest.mark.parametrize("size", [1, 3, 50])
def test_a_cut_search_continues_to_every_asset_match_exactly_once(world, tiny_chunks, size):
    query = SearchQuery(key="JOB")
    pages, items = follow(lambda cursor: searching.search_asset_keys(query, cursor, size, scope=EVERYTHING))
    assert [(k.asset_id, k.key) for k in items] == expected_assets(world)
    cut = [page for page in pages if page.cut_short]
    assert cut and all(k.asset_id <= page.scanned_to for page in cut for k in page.items)
    assert not pages[-1].cut_short


def test_the_first_cut_page_has_what_the_first_chunk_found(world, tiny_chunks):
    """Budget 0: the scan reads one chunk (the two newest ids), returns its matches and stops; three queries on
    the state table (the lowest and highest ids, then the chunk), however many rows it holds."""
    newest = sorted(world["tasks"], key=lambda k: -k.id)[:2]
    with CaptureQueriesContext(connections["airflow"]) as queries:
        page = searching.search_task_keys(SearchQuery(key="job"), timezone.now(), scope=EVERYTHING)
    assert page.cut_short and page.scanned_to == newest[-1].id
    assert [k.id for k in page.items] == [k.id for k in newest if "job" in k.key]
    assert len(queries) == 3
    assert decode_cursor_for(page.next_cursor, type(newest[0]), ["-id"]) == [newest[-1].id]


def test_a_normal_search_is_not_cut(world):
    page = searching.search_task_keys(SearchQuery(key="job"), timezone.now(), scope=EVERYTHING)
    assert not page.cut_short and page.next_cursor is None and page.scanned_to is None
    assert [k.id for k in page.items] == expected_tasks(world)
    assets = searching.search_asset_keys(SearchQuery(key="job"), scope=EVERYTHING)
    assert not assets.cut_short and [(k.asset_id, k.key) for k in assets.items] == expected_assets(world)


def test_small_chunks_within_the_budget_are_one_page(world, monkeypatch):
    for name in ("FIRST_CHUNK", "MIN_CHUNK", "MAX_CHUNK"):
        monkeypatch.setattr(searching, name, 2)
    with override_settings(SEARCH_TIME_BUDGET_SECONDS=60):
        page = searching.search_task_keys(SearchQuery(key="job"), timezone.now(), size=3, scope=EVERYTHING)
        assert not page.cut_short and [k.id for k in page.items] == expected_tasks(world)[:3]
        _, items = follow(
            lambda cursor: searching.search_task_keys(
                SearchQuery(key="job"), timezone.now(), cursor, 3, scope=EVERYTHING
            )
        )
    assert [k.id for k in items] == expected_tasks(world)


@pytest.mark.parametrize(
    "query",
    [
        SearchQuery(key="job", dag_id="etl_a"),
        SearchQuery(key="job", match="prefix", dag_id="ml_b"),
        SearchQuery(dag_id="ml_b"),
        SearchQuery(status="never"),
    ],
)
def test_dag_filtered_and_keyless_searches_are_not_budgeted(world, tiny_chunks, query):
    page = searching.search_task_keys(query, timezone.now(), scope=EVERYTHING)
    assert not page.cut_short and page.next_cursor is None
    expected = [
        k.id
        for k in world["tasks"]
        if (not query.key or (k.key.startswith(query.key) if query.match == "prefix" else query.key in k.key))
        and (not query.dag_id or k.dag_id == query.dag_id)
        and (not query.status or k.expires_at is None)
    ]
    assert sorted(k.id for k in page.items) == sorted(expected) and expected


@pytest.mark.parametrize("match", ["prefix", "exact"])
def test_prefix_and_exact_searches_without_a_dag_are_budgeted_too(world, tiny_chunks, match):
    """No index leads with the key: a prefix or exact search without a DAG filter is a scan like a substring one."""
    key = "job" if match == "prefix" else world["tasks"][0].key
    query = SearchQuery(key=key, match=match)
    pages, items = follow(lambda c: searching.search_task_keys(query, timezone.now(), c, 2, scope=EVERYTHING))
    lookup = "key__startswith" if match == "prefix" else "key"  # the database's own prefix (SQLite's ignores case)
    wanted = list(TaskStateStore.objects.filter(**{lookup: key}).order_by("-id").values_list("id", flat=True))
    assert [k.id for k in items] == wanted and wanted
    assert any(page.cut_short for page in pages)
    pages, assets = follow(
        lambda c: searching.search_asset_keys(SearchQuery(key="job", match="prefix"), c, 2, scope=EVERYTHING)
    )
    assert [(k.asset_id, k.key) for k in assets] == list(
        AssetStateStore.objects.filter(key__startswith="job").order_by("asset_id", "key").values_list("asset_id", "key")
    )
    assert any(page.cut_short for page in pages)


def test_a_scoped_search_resumes_within_its_scope(world, tiny_chunks):
    scope = Scope(dags=("etl_*",), assets=("etl.*",))
    _, tasks = follow(lambda c: searching.search_task_keys(SearchQuery(key="job"), timezone.now(), c, 2, scope=scope))
    assert [k.id for k in tasks] == expected_tasks(world, dags=("etl_a",))
    _, assets = follow(lambda c: searching.search_asset_keys(SearchQuery(key="job"), c, 2, scope=scope))
    assert [(k.asset_id, k.key) for k in assets] == expected_assets(world, prefix="etl.")


def test_a_bad_or_foreign_cursor_is_the_first_page(world, tiny_chunks):
    first = searching.search_task_keys(SearchQuery(key="job"), timezone.now(), scope=EVERYTHING)
    for cursor in ("not-a-cursor", encode_cursor(["x"]), encode_cursor([1, 2, 3])):
        page = searching.search_task_keys(SearchQuery(key="job"), timezone.now(), cursor, scope=EVERYTHING)
        assert page.cursor is None and [k.id for k in page.items] == [k.id for k in first.items]
        assets = searching.search_asset_keys(SearchQuery(key="job"), cursor, scope=EVERYTHING)
        assert assets.cursor is None


# The API -------------------------------------------------------------------------------------------
@pytest.fixture
def api(client, operator):
    _, token = ApiToken.issue(operator, "tests")
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client


def follow_api(client, url, params):
    bodies, cursor = [], None
    while len(bodies) < 1000:
        body = client.get(url, {**params, **({"cursor": cursor} if cursor else {})}).json()
        bodies.append(body)
        if body["next_cursor"] is None:
            return bodies
        cursor = body["next_cursor"]
    raise AssertionError("the search never ended")


def test_api_says_cut_short_and_continues(api, world, tiny_chunks):
    bodies = follow_api(api, TASK_API, {"key": "job", "limit": 2})
    assert [i["id"] for b in bodies for i in b["items"]] == expected_tasks(world)
    assert any(b["cut_short"] for b in bodies) and not bodies[-1]["cut_short"]
    assert all(isinstance(b["scanned_to"], int) for b in bodies if b["cut_short"])
    assets = follow_api(api, ASSET_API, {"key": "job"})
    assert [(i["asset_id"], i["key"]) for b in assets for i in b["items"]] == expected_assets(world)
    assert any(b["cut_short"] for b in assets)


def test_api_dag_filtered_and_unhurried_searches_are_not_cut(api, world, tiny_chunks):
    body = api.get(TASK_API, {"key": "job", "match": "prefix", "dag_id": "etl_a"}).json()
    assert body["cut_short"] is False and body["scanned_to"] is None and body["next_cursor"] is None
    with override_settings(SEARCH_TIME_BUDGET_SECONDS=60):
        body = api.get(TASK_API, {"key": "job"}).json()
    assert body["cut_short"] is False and [i["id"] for i in body["items"]] == expected_tasks(world)


def test_api_scoped_caller_never_sees_other_dags_while_resuming(client, user_factory, world, tiny_chunks):
    from tests.conftest import ALL_PERMS

    user = user_factory("etl-operator", perms=ALL_PERMS, unscoped=False)
    AccessScope.objects.create(user=user, kind="dag", pattern="etl_*")
    AccessScope.objects.create(user=user, kind="asset", pattern="etl.*")
    _, token = ApiToken.issue(user, "tests")
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    bodies = follow_api(client, TASK_API, {"key": "job", "limit": 1})
    assert {i["dag_id"] for b in bodies for i in b["items"]} == {"etl_a"}
    assert [i["id"] for b in bodies for i in b["items"]] == expected_tasks(world, dags=("etl_a",))
    assets = follow_api(client, ASSET_API, {"key": "job"})
    assert [(i["asset_id"], i["key"]) for b in assets for i in b["items"]] == expected_assets(world, prefix="etl.")


# The page ------------------------------------------------------------------------------------------
def continue_link(page_html, param):
    """The notice's Continue link's value of ``param`` (None when the search was not cut)."""
    match = re.search(r'<a rel="next" href="([^"]+)">Continue searching', page_html)
    if not match:
        return None
    return parse_qs(urlparse(html.unescape(match.group(1))).query)[param][0]


def test_page_says_the_search_was_cut_and_continues_it(client, operator, world, tiny_chunks):
    client.force_login(operator)
    shown, params, notices = [], {"key": "job", "store": "task"}, 0
    for _ in range(100):
        page = client.get("/search/", params).content.decode()
        found = CUT.search(page)
        shown += [int(i) for i in re.findall(r'name="ids" value="(\d+)"', page)]
        if not found:
            break
        notices += 1
        assert found.group(1) == "keys down to id" and int(found.group(3)) <= 50
        params = {**params, "task_cursor": continue_link(page, "task_cursor")}
    assert notices > 1 and "No task key matches." not in page
    assert shown == expected_tasks(world)


def test_page_cuts_each_store_and_continues_each(client, operator, world, tiny_chunks):
    client.force_login(operator)
    page = client.get("/search/", {"key": "job"}).content.decode()
    stores = {m.group(1) for m in CUT.finditer(page)}
    assert stores == {"keys down to id", "asset keys up to asset id"}
    assert "No task key matches." not in page and "No asset key matches." not in page
    cursor = continue_link(page.split("<h2>Asset state</h2>")[1], "asset_cursor")
    assert cursor and decode_cursor(cursor, 1) is not None


def test_page_without_cut_has_no_notice(client, operator, world):
    client.force_login(operator)
    page = client.get("/search/", {"key": "job"}).content.decode()
    assert 'role="status"><p>Stopped' not in page and not CUT.search(page)
    assert "stops after 2 s" in page  # the form says what a contains search costs


# Both ways (issue 14) --------------------------------------------------------------------------------
def back_from(fetch_before, last):
    """Every page before ``last``, by its prev_cursor (read with ``before``): the items in display order."""
    items, page, pages = [], last, 0
    while page.prev_cursor is not None:
        page = fetch_before(page.prev_cursor)
        items = page.items + items
        pages += 1
        assert pages < 1000, "the search never reached its start"
    assert page.cursor is None  # the start is the first page
    return items


@pytest.mark.parametrize("size", [1, 2, 50])
def test_previous_pages_of_a_cut_search_find_every_match_once(world, tiny_chunks, size):
    query = SearchQuery(key="job")
    now = timezone.now()
    pages, _ = follow(lambda c: searching.search_task_keys(query, now, c, size, scope=EVERYTHING))
    last = pages[-1]
    back = back_from(lambda b: searching.search_task_keys(query, now, None, size, scope=EVERYTHING, before=b), last)
    assert [k.id for k in back + last.items] == expected_tasks(world)
    pages, _ = follow(lambda c: searching.search_asset_keys(query, c, size, scope=EVERYTHING))
    last = pages[-1]
    back = back_from(lambda b: searching.search_asset_keys(query, None, size, scope=EVERYTHING, before=b), last)
    assert [(k.asset_id, k.key) for k in back + last.items] == expected_assets(world)


def test_a_backward_search_cut_short_says_so_and_continues_backwards(world, tiny_chunks):
    query = SearchQuery(key="job")
    now = timezone.now()
    pages, _ = follow(lambda c: searching.search_task_keys(query, now, c, 2, scope=EVERYTHING))
    page = searching.search_task_keys(query, now, None, 2, scope=EVERYTHING, before=pages[-1].prev_cursor)
    assert page.cut_short and page.backward and len(page.items) < 2  # a chunk of 2 ids a request
    further = searching.search_task_keys(query, now, None, 2, scope=EVERYTHING, before=page.prev_cursor)
    assert further.backward and further.scanned_to > page.scanned_to  # back towards the newest keys
    assert all(k.id > page.scanned_to for k in further.items)


@pytest.mark.parametrize("query", [SearchQuery(dag_id="ml_"), SearchQuery(key="job", dag_id="etl")])
def test_previous_pages_of_an_indexed_search_are_the_pages_seen(world, tiny_chunks, query):
    now = timezone.now()
    pages, _ = follow(lambda c: searching.search_task_keys(query, now, c, 2, scope=EVERYTHING))
    assert len(pages) > 1 and not any(p.cut_short for p in pages)
    page, seen = pages[-1], [pages[-1]]
    while page.prev_cursor is not None:
        page = searching.search_task_keys(query, now, None, 2, scope=EVERYTHING, before=page.prev_cursor)
        seen.insert(0, page)
    assert [[k.id for k in p.items] for p in seen] == [[k.id for k in p.items] for p in pages]
    assert seen[0].cursor is None and pages[0].prev_cursor is None


def test_value_search_has_the_same_budget(world, tiny_chunks):
    TaskStateStore.objects.filter(key__startswith="job").update(value='{"owner": "Team Zürich"}')
    AssetStateStore.objects.filter(key__istartswith="job").update(value='"Zürich watermark"')
    query = SearchQuery(value="zürich")
    pages, tasks = follow(lambda c: searching.search_task_keys(query, timezone.now(), c, 2, scope=EVERYTHING))
    assert [k.id for k in tasks] == expected_tasks(world) and any(p.cut_short for p in pages)
    pages, assets = follow(lambda c: searching.search_asset_keys(query, c, 2, scope=EVERYTHING))
    assert [(k.asset_id, k.key) for k in assets] == expected_assets(world) and any(p.cut_short for p in pages)
    page = searching.search_task_keys(SearchQuery(value="zürich", dag_id="etl_a"), timezone.now(), scope=EVERYTHING)
    assert not page.cut_short and [k.id for k in page.items] == expected_tasks(world, dags=("etl_a",))


def test_api_pages_back_with_before(api, world, tiny_chunks):
    bodies = follow_api(api, TASK_API, {"key": "job", "limit": 2})
    items, body = [], bodies[-1]
    while body["prev_cursor"]:
        body = api.get(TASK_API, {"key": "job", "limit": 2, "before": body["prev_cursor"]}).json()
        items = body["items"] + items
    assert [i["id"] for i in items + bodies[-1]["items"]] == expected_tasks(world)


def test_page_links_to_the_previous_page_keeping_the_filters(client, operator, world):
    client.force_login(operator)
    params = {"key": "job", "store": "task", "dag_id": "etl"}
    first = client.get("/search/", params).content.decode()
    assert 'rel="prev"' not in first and "First page" not in first  # the first page has neither
    page = searching.search_task_keys(SearchQuery(key="job", dag_id="etl"), timezone.now(), None, 1, scope=EVERYTHING)
    second = client.get("/search/", {**params, "task_cursor": page.next_cursor}).content.decode()
    prev = re.search(r'<a rel="prev" href="([^"]+)">← Previous</a>', second)
    query = parse_qs(urlparse(html.unescape(prev.group(1))).query)
    assert query["key"] == ["job"] and query["dag_id"] == ["etl"] and query["store"] == ["task"]
    assert "task_before" in query and "task_cursor" not in query
    back = client.get("/search/", {k: v[0] for k, v in query.items()}).content.decode()
    assert re.findall(r'name="ids" value="(\d+)"', back) == [str(k.id) for k in page.items]
    assert 'rel="prev"' not in back  # back at the start
