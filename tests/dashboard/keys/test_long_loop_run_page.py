"""A run page whose loop ran 500 iterations, through Django's test client on Airflow's real 3.4 schema
(AIRFLOW_FIXTURE_SERIES=3.4; skipped on 3.3, whose schema has no regions): the Loops list shows the first and last
iterations and those of the keys the page shows, the others as gaps; a gap's address answers a page of its
iterations (to htmx the items alone, to anyone else a whole page) with the run page's filter and page in it, and
following the gaps reaches every iteration once. The page stays small whatever the loop's length."""

import html as htmllib
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from statestore_admin.airflow.versions import schema_of
from statestore_admin.state import selectors
from statestore_admin.state.selectors import ITERATIONS_PAGE
from tests.conftest import BOTH_DATABASES
from tests.factories import make_dag_run, make_long_loop

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
ITERATIONS = 500
KEYED = (7, 123, 256, 498)  # the iterations holding keys
LOOP = "refine"


def decision(index: int) -> str:
    return "error small enough: stop" if index == ITERATIONS - 1 else f"error {index} too big"


@pytest.fixture
def long_loop():
    if not schema_of(connections["airflow"]).regions:
        pytest.skip("Airflow 3.3's schema has no dynamic regions: run with AIRFLOW_FIXTURE_SERIES=3.4")
    run = make_dag_run(dag_id="long_loop", run_id="manual__500")
    loop = make_long_loop(run, LOOP, ITERATIONS, keyed=KEYED, decision=decision)
    return {"run": run, "loop": loop}


def loops_section(html: str) -> str:
    return re.search(r'<section class="loops".*?</section>', html, re.S).group(0)


def iterations_in(html: str) -> list[int]:
    """The iteration indexes an HTML part lists, in order."""
    items = re.findall(r'<li data-testid="iteration">(.*?)</li>', html, re.S)
    return [int(re.search(r"iteration (\d+)</a>", item).group(1)) for item in items]


def gaps_in(html: str) -> list[tuple[str, str, str]]:
    """Each gap's (href, hx-get, text), the addresses unescaped."""
    found = re.findall(
        r'<li class="iteration-gap"[^>]*>\s*<a href="([^"]+)" hx-get="([^"]+)"[^>]*>\s*(.*?)</a>', html, re.S
    )
    return [(htmllib.unescape(href), htmllib.unescape(get), " ".join(text.split())) for href, get, text in found]


def query_of(url: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}


def test_the_run_page_lists_a_few_iterations_and_stays_under_100_kb(client, operator, long_loop):
    client.force_login(operator)
    response = client.get(f"/runs/{long_loop['run'].pk}/")
    assert response.status_code == 200
    assert len(response.content) < 100_000  # 143 KB before, every iteration listed
    loops = loops_section(response.content.decode())
    assert f"{ITERATIONS} iterations" in " ".join(loops.split())
    listed = iterations_in(loops)
    assert listed == sorted({0, 1, 2, *KEYED, 497, 499})  # the first and last three, and those holding keys
    gaps = gaps_in(loops)
    assert [text for *_, text in gaps] == [
        "Show iterations 3–6",
        "Show iterations 8–122",
        "Show iterations 124–255",
        "Show iterations 257–496",
    ]
    assert "decision: error small enough: stop" in loops
    for href, get, _text in gaps:
        assert href == get and href.startswith(f"/runs/{long_loop['run'].pk}/iterations/?")
        assert query_of(href)["loop"] == str(long_loop["loop"].pk)


def test_a_fully_keyed_loops_run_page_stays_under_100_kb(client, operator):
    """Every one of 500 iterations holds a key in its step and in its mapped task (1,000 keys): the run page lists a
    page of them (selectors.RUN_PAGE) with their regions, and each row's actions menu is fetched when it opens
    (397 KB before: 200 rows of 1.9 KB, half of each its menu's buttons), the Loops list its ends, the iterations
    of the keys shown and gaps."""
    if not schema_of(connections["airflow"]).regions:
        pytest.skip("Airflow 3.3's schema has no dynamic regions: run with AIRFLOW_FIXTURE_SERIES=3.4")
    run = make_dag_run(dag_id="long_loop", run_id="manual__500")
    make_long_loop(run, LOOP, ITERATIONS, keyed=range(ITERATIONS), decision=decision)
    client.force_login(operator)
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert len(response.content) < 100_000, len(response.content)
    rows = re.findall(r'<td class="key"><a href="/keys/task/(\d+)/"><code><bdi>offset</bdi>', html)
    assert len(rows) == selectors.RUN_PAGE
    assert [int(at) for at in re.findall(r"loop refine · iteration (\d+)</span>", html)][:3] == [0, 1, 2]
    for key_id in rows:  # each row: its menu, fetched on opening, and the key's page without JavaScript
        assert f'hx-get="/keys/task/{key_id}/actions/"' in html
        assert f'<div class="row-menu-items"><a href="/keys/task/{key_id}/">' in html
    assert "/edit/" not in html and "?ids=" not in html  # no row carries its buttons
    assert 'rel="next"' in html  # the other keys on the next pages
    loops = loops_section(html)
    assert f"{ITERATIONS} iterations" in " ".join(loops.split())
    listed = iterations_in(loops)
    assert listed[:3] == [0, 1, 2] and listed[-3:] == [497, 498, 499] and len(listed) <= 6 + 10
    gaps = gaps_in(loops)
    assert gaps and all(text.startswith("Show iterations ") for *_, text in gaps)
    assert sorted(listed + [i for *_, text in gaps for i in _span(text)]) == list(range(ITERATIONS))


def _span(text: str) -> range:
    first, last = re.search(r"(\d+)–(\d+)", text).groups()
    return range(int(first), int(last) + 1)


def test_the_iterations_of_the_keys_shown_stay_in_the_list(client, operator, long_loop):
    """Filtered to the keys of one task, the page shows iteration 256's and 498's keys only if they are on the page:
    the list keeps the iterations of the keys the page shows, and the filter rides in the gaps' addresses."""
    client.force_login(operator)
    run = long_loop["run"]
    html = client.get(f"/runs/{run.pk}/?q=offset&sort=-key").content.decode()
    assert set(KEYED) <= set(iterations_in(loops_section(html)))
    for href, *_ in gaps_in(loops_section(html)):
        assert query_of(href)["q"] == "offset" and query_of(href)["sort"] == "-key"
    html = client.get(f"/runs/{run.pk}/?q=nothing-matches").content.decode()
    assert iterations_in(loops_section(html)) == [0, 1, 2, 497, 498, 499]  # no key shown: the ends only
    assert [text for *_, text in gaps_in(loops_section(html))] == ["Show iterations 3–496"]


def test_following_the_gaps_with_htmx_reaches_every_iteration_once(client, operator, long_loop):
    """Each gap answers htmx its iterations, a page at a time, and the gap after them: followed to the end, every
    iteration is listed once, in order, each with its decision, and every answer is a bounded part."""
    client.force_login(operator)
    run = long_loop["run"]
    html = loops_section(client.get(f"/runs/{run.pk}/").content.decode())
    seen = iterations_in(html)
    pending = [get for _href, get, _text in gaps_in(html)]
    answers = 0
    while pending:
        response = client.get(pending.pop(0), **HX)
        answers += 1
        part = response.content.decode()
        assert response.status_code == 200
        assert "<html" not in part and "<title>" not in part and part.lstrip().startswith("<li")
        shown = iterations_in(part)
        assert 0 < len(shown) <= ITERATIONS_PAGE and len(part) < 20_000
        for index in shown:
            assert f'iteration={index}">iteration {index}</a>' in part.replace("&amp;", "&")
        assert re.findall(r"decision: ([^<]+)</span>", part) == [decision(index) for index in shown]
        seen += shown
        pending += [get for _href, get, _text in gaps_in(part)]
    assert sorted(seen) == list(range(ITERATIONS)) and len(seen) == ITERATIONS
    assert answers > 4  # the long gaps open a page at a time


def test_a_gaps_address_is_a_whole_page_of_its_iterations_with_the_next_page_in_its_url(client, operator, long_loop):
    client.force_login(operator)
    run = long_loop["run"]
    html = loops_section(client.get(f"/runs/{run.pk}/?q=off&sort=-key").content.decode())
    href = next(href for href, _get, text in gaps_in(html) if text == "Show iterations 257–496")
    response = client.get(href)
    page = response.content.decode()
    assert response.status_code == 200
    assert "<title>Loop iterations ·" in page and '<header class="topbar"' in page and page.count("<html") == 1
    assert "<h1>Loop iterations</h1>" in page
    assert iterations_in(page) == list(range(257, 257 + ITERATIONS_PAGE))
    back = re.search(r'<nav class="crumbs".*?</nav>', page, re.S).group(0)
    assert f'href="/runs/{run.pk}/?q=off&amp;sort=-key">manual__500</a>' in back  # the run page as it was
    [(next_href, _get, text)] = gaps_in(page)
    assert text == f"Show iterations {257 + ITERATIONS_PAGE}–496"
    assert query_of(next_href) == {**query_of(href), "from": str(257 + ITERATIONS_PAGE)}
    last = client.get(f"/runs/{run.pk}/iterations/?loop={long_loop['loop'].pk}&from=480").content.decode()
    assert iterations_in(last) == list(range(480, 500)) and gaps_in(last) == []
    assert 'rel="prev"' in last and "from=430" in last  # the page before, in the URL
    assert '<li data-testid="iteration">' in last and "iterations 480–499" in " ".join(last.split())


def test_a_page_of_iterations_reads_a_bounded_number_of_rows(client, operator, long_loop):
    """A page of iterations runs a few queries wherever it starts in the loop (one more at its end, where no gate
    follows: is a nested region there?), and reads the loop's task instances by their task ids (Airflow's indexes
    on task_instance that hold region_id all start with dag_id, task_id), never the run's every row."""
    client.force_login(operator)
    run, loop = long_loop["run"], long_loop["loop"]
    counts = []
    for start in (0, 250, 450):
        with CaptureQueriesContext(connections["airflow"]) as queries:
            response = client.get(f"/runs/{run.pk}/iterations/?loop={loop.pk}&from={start}", **HX)
        assert iterations_in(response.content.decode()) == list(range(start, min(start + ITERATIONS_PAGE, 500)))
        counts.append(len(queries))
        for query in queries:
            sql = query["sql"]
            if re.search(r'FROM "?task_instance"?', sql) and "MIN(" not in sql:
                assert re.search(r'"?task_id"? (IN \(|= )', sql), sql
    assert max(counts) <= 10, counts


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("loop=not-a-uuid", 400),
        ("loop=6c0b6c2e-1111-4222-8333-444455556666", 404),  # no such loop
    ],
)
def test_a_bad_loop_is_refused(client, operator, long_loop, query, status):
    client.force_login(operator)
    assert client.get(f"/runs/{long_loop['run'].pk}/iterations/?{query}").status_code == status


def test_a_loop_of_another_run_or_a_region_that_is_no_loop_is_not_found(client, operator, long_loop):
    client.force_login(operator)
    other = make_dag_run(dag_id="long_loop", run_id="manual__other")
    assert client.get(f"/runs/{other.pk}/iterations/?loop={long_loop['loop'].pk}").status_code == 404
    expansion = long_loop["loop"].__class__.objects.filter(parent_region_id=long_loop["loop"].pk).first()
    response = client.get(f"/runs/{long_loop['run'].pk}/iterations/?loop={expansion.pk}")
    assert response.status_code == 404  # a mapped task's expansion: no loop


def test_without_a_loop_named_the_address_lists_the_runs_loops(client, operator, long_loop):
    client.force_login(operator)
    part = client.get(f"/runs/{long_loop['run'].pk}/iterations/", **HX).content.decode()
    assert iterations_in(loops_section(part)) == [0, 1, 2, 497, 498, 499]


def test_a_user_outside_the_runs_scope_gets_nothing(client, user_factory, long_loop):
    outsider = user_factory("outsider", perms=["task.view"], unscoped=False)
    client.force_login(outsider)
    response = client.get(f"/runs/{long_loop['run'].pk}/iterations/?loop={long_loop['loop'].pk}", **HX)
    assert response.status_code == 404 and "iteration" not in response.content.decode()
