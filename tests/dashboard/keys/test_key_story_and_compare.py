"""A key's story across runs and two runs compared (issue 23, "New"), through Django's test client on the real
Airflow schema (3.3 and 3.4, SQLite and PostgreSQL): what each page shows, its bounds (a window of runs, a cap of
keys per run) followed page by page to the same answer as an unbounded read, scopes, permissions, bad input and
escaping. The regional tests need Airflow 3.4's schema (AIRFLOW_FIXTURE_SERIES=3.4) and skip on 3.3."""

import html as htmllib
import importlib
import json
import re
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from statestore_admin.airflow.versions import schema_of
from statestore_admin.records.models import AccessScope
from tests.conftest import ALL_PERMS, BOTH_DATABASES
from tests.factories import (
    LOOP_GATE_OPERATOR,
    make_dag_run,
    make_region,
    make_region_instance,
    make_region_key,
    make_task_instance,
    make_task_key,
)
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
# The modules (the package re-exports functions of the same names): their bounds are patched smaller.
key_story_module = importlib.import_module("statestore_admin.state.selectors.key_story")
run_compare_module = importlib.import_module("statestore_admin.state.selectors.run_compare")
HX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "keys-panel"}


@pytest.fixture
def signed_in(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def history():
    """Six runs of etl_orders, oldest first; ``extract`` writes ``watermark`` (a count of rows and a time) in all
    but the fourth; other tasks, indexes and DAGs write the same key name, which the story must not show."""
    runs, keys = [], {}
    start = timezone.now() - timedelta(days=6)
    for n in range(6):
        run = make_dag_run(dag_id="etl_orders", run_id=f"scheduled__day-{n}")
        runs.append(run)
        if n != 3:
            value = {"rows": 100 * (n + 1), "at": (start + timedelta(days=n)).isoformat(), "source": "orders"}
            keys[n] = make_task_key(run, key="watermark", task_id="extract", value=value)
        make_task_key(run, key="watermark", task_id="load", value={"rows": -1})
        make_task_key(run, key="watermark", task_id="extract", map_index=0, value={"rows": -2})
    other = make_dag_run(dag_id="etl_other", run_id="scheduled__day-9")
    make_task_key(other, key="watermark", task_id="extract", value={"rows": -3})
    return runs, keys


def story_rows(body: str) -> list[str]:
    """The run ids of the story's table, in order."""
    table = body.split('data-testid="story-table"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<a href="/runs/\d+/">([^<]+)</a>', table)


def test_the_story_shows_the_key_in_every_run_newest_first_with_lines_and_diffs(signed_in, history):
    runs, keys = history
    response = signed_in.get(f"/keys/task/{keys[2].id}/story/")
    assert response.status_code == 200
    body = response.content.decode()
    assert story_rows(body) == [
        "scheduled__day-5",
        "scheduled__day-4",
        "scheduled__day-2",
        "scheduled__day-1",
        "scheduled__day-0",
    ]
    assert "{&quot;rows&quot;: -" not in body  # other tasks, indexes and DAGs are not this key
    assert 'class="story-origin" aria-current="true"' in body  # the key the story was opened from
    # Lines: the numeric leaf and the time leaf, oldest run left; their numbers as a table.
    assert 'data-testid="chart-story-0"' in body and 'data-testid="chart-story-1"' in body
    assert "<figcaption>rows</figcaption>" in body and "<figcaption>at</figcaption>" in body
    assert body.count("<polyline") == 2
    assert "scheduled__day-0: 100" in body and "scheduled__day-5: 600" in body
    # Each value against the run before that has the key (day 4 against day 2: day 3 has none).
    assert '<span class="diff-del">-  &quot;rows&quot;: 300,</span>' in body
    assert '<span class="diff-add">+  &quot;rows&quot;: 500,</span>' in body
    assert "first run with this key" in body
    assert 'data-testid="story-stopped"' not in body


def test_the_key_page_links_to_its_story(signed_in, history):
    _, keys = history
    body = signed_in.get(f"/keys/task/{keys[0].id}/").content.decode()
    assert f'href="/keys/task/{keys[0].id}/story/" data-testid="key-story-link"' in body


def test_the_story_reads_a_window_of_runs_a_page_and_says_so(signed_in, history, monkeypatch):
    """With a window of two runs a page, the story walks back page by page (htmx swaps the panel) to the same
    runs as one unbounded page, saying on each page that it looked at two runs only."""
    runs, keys = history
    monkeypatch.setattr(key_story_module, "RUN_WINDOW", 2)
    url, seen, pages = f"/keys/task/{keys[5].id}/story/", [], 0
    while url:
        response = signed_in.get(url, **HX)
        body = flat(response.content.decode())
        assert response.status_code == 200 and body.startswith('<div id="keys-panel"')  # the panel only
        seen += story_rows(body)
        pages += 1
        match = re.search(r'<a rel="next" href="([^"]+)"', body)
        if match:
            assert 'data-testid="story-stopped"' in body and "Looked at 2 runs" in body
        url = f"/keys/task/{keys[5].id}/story/" + htmllib.unescape(match.group(1)) if match else None
    assert seen == ["scheduled__day-5", "scheduled__day-4", "scheduled__day-2", "scheduled__day-1", "scheduled__day-0"]
    assert pages == 4  # runs 5-4, 3-2, 1-0, then the end (the window after run 0 is empty)


def test_a_page_of_the_story_is_a_fixed_number_of_queries(signed_in, history, django_assert_max_num_queries):
    """On Airflow's database, whatever the number of runs: the key, the window of runs, the rows (and on 3.4 the
    key's region path, for the key page's crumbs)."""
    _, keys = history
    for n in range(30):
        make_task_key(make_dag_run(dag_id="etl_orders"), key="watermark", task_id="extract", value=n)
    with django_assert_max_num_queries(4, connection=connections["airflow"]):
        assert signed_in.get(f"/keys/task/{keys[0].id}/story/").status_code == 200


def test_a_value_with_script_is_escaped_on_both_pages(signed_in):
    nasty_key, nasty_value = "<script>alert('k')</script>", "<script>alert('v')</script>"
    older, newer = make_dag_run(dag_id="etl_x"), make_dag_run(dag_id="etl_x")
    make_task_key(older, key=nasty_key, value=nasty_value)
    key = make_task_key(newer, key=nasty_key, value={"html": nasty_value})
    make_task_key(newer, key="<img src=x onerror=alert(1)>", value=nasty_value)
    for url in (f"/keys/task/{key.id}/story/", f"/dags/etl_x/compare/?a={older.run_id}&b={newer.run_id}"):
        body = signed_in.get(url).content.decode()
        assert "<script>alert" not in body and "<img src=x" not in body
        assert "&lt;script&gt;alert(" in body


def test_scoped_users_see_only_their_dags_and_others_answer_404(client, user_factory, history):
    runs, keys = history
    other = make_dag_run(dag_id="ml_train", run_id="scheduled__ml-1")
    other_older = make_dag_run(dag_id="ml_train", run_id="scheduled__ml-0")
    hidden = make_task_key(other, key="model", value=1)
    user = user_factory("etl-operator", perms=ALL_PERMS, unscoped=False)
    AccessScope.objects.create(user=user, kind="dag", pattern="etl_*")
    client.force_login(user)
    assert client.get(f"/keys/task/{keys[0].id}/story/").status_code == 200
    assert client.get(f"/keys/task/{hidden.id}/story/").status_code == 404
    compare = f"/dags/ml_train/compare/?a={other_older.run_id}&b={other.run_id}"
    response = client.get(compare)
    assert response.status_code == 404 and b"scheduled__ml" in response.content  # as for a run that does not exist
    assert client.get(f"/dags/etl_orders/compare/?a={runs[0].run_id}&b={runs[1].run_id}").status_code == 200


def test_both_pages_need_the_view_permission_on_task_state(client, nobody, history):
    runs, keys = history
    client.force_login(nobody)
    assert client.get(f"/keys/task/{keys[0].id}/story/").status_code == 403
    assert client.get(f"/dags/etl_orders/compare/?a={runs[0].run_id}&b={runs[1].run_id}").status_code == 403
    client.logout()
    assert client.get(f"/keys/task/{keys[0].id}/story/").status_code == 302  # to the login page


@pytest.fixture
def two_runs():
    """Run A and run B of etl_orders: one key the same, one changed, one removed, one added, a mapped key."""
    a = make_dag_run(dag_id="etl_orders", run_id="scheduled__a")
    b = make_dag_run(dag_id="etl_orders", run_id="scheduled__b")
    make_task_key(a, task_id="extract", key="same", value={"n": 1})
    make_task_key(b, task_id="extract", key="same", value={"n": 1})
    make_task_key(a, task_id="extract", key="cursor", value={"offset": 10})
    make_task_key(b, task_id="extract", key="cursor", value={"offset": 20})
    make_task_key(a, task_id="load", key="only_a", value="gone")
    make_task_key(b, task_id="load", key="only_b", value="new")
    make_task_key(a, task_id="load", key="part", map_index=3, value=3)
    make_task_key(b, task_id="load", key="part", map_index=3, value=4)
    return a, b


def section(body: str, name: str) -> str:
    marker = f'data-testid="compare-{name}"'
    return body.split(marker, 1)[1].split("</table>", 1)[0] if marker in body else ""


def test_two_runs_compared_added_removed_changed_and_same(signed_in, two_runs):
    a, b = two_runs
    response = signed_in.get(f"/dags/etl_orders/compare/?a={a.run_id}&b={b.run_id}")
    assert response.status_code == 200
    body = response.content.decode()
    summary = re.sub(
        r"\s+", " ", re.sub(r"<[^>]+>", "", body.split('data-testid="compare-summary"')[1].split("</ul>")[0])
    )
    assert "1 added in B 1 removed in B 2 changed 1 the same" in summary
    assert "<code><bdi>only_b</bdi></code>" in section(body, "added") and "<code><bdi>only_a</bdi></code>" in section(
        body, "removed"
    )
    changed = section(body, "changed")
    assert (
        "<code><bdi>cursor</bdi></code>" in changed and "<code><bdi>part</bdi></code>" in changed and "[3]" in changed
    )
    assert '<span class="diff-del">-  &quot;offset&quot;: 10</span>' in changed
    assert '<span class="diff-add">+  &quot;offset&quot;: 20</span>' in changed
    assert "<code><bdi>same</bdi></code>" not in body
    assert 'data-testid="compare-stopped"' not in body
    swapped = signed_in.get(f"/dags/etl_orders/compare/?a={b.run_id}&b={a.run_id}").content.decode()
    assert "<code><bdi>only_a</bdi></code>" in section(swapped, "added")


def compare_all(client, url: str) -> tuple[dict, int, int]:
    """Every page of a comparison, followed through its next links: kind → keys, the same count, pages."""
    found, same, pages = {"added": [], "removed": [], "changed": []}, 0, 0
    while url:
        body = client.get(url).content.decode()
        pages += 1
        for kind in found:
            found[kind] += re.findall(
                r'<td data-label="Key" class="key"><code><bdi>([^<]+)</bdi></code>', section(body, kind)
            )
        same += int(re.search(r"<strong>(\d+)</strong> the same", body).group(1))
        match = re.search(r'<a rel="next" href="([^"]+)"', body)
        url = url.split("?")[0] + htmllib.unescape(match.group(1)) if match else None
    return found, same, pages


def test_a_comparison_reads_a_cap_of_keys_a_page_and_continues_to_the_same_answer(signed_in, monkeypatch):
    a = make_dag_run(dag_id="etl_big", run_id="scheduled__a")
    b = make_dag_run(dag_id="etl_big", run_id="scheduled__b")
    for n in range(12):
        task = f"t{n % 3}"
        if n % 4 != 0:
            make_task_key(a, task_id=task, key=f"k{n}", value=n)
        if n % 5 != 0:
            make_task_key(b, task_id=task, key=f"k{n}", value=n if n % 2 else n + 100)
    url = f"/dags/etl_big/compare/?a={a.run_id}&b={b.run_id}"
    unbounded, unbounded_same, one = compare_all(signed_in, url)
    assert one == 1
    monkeypatch.setattr(run_compare_module, "COMPARE_CAP", 3)
    first = flat(signed_in.get(url).content.decode())
    assert 'data-testid="compare-stopped"' in first and "at most 3 of each a page" in first
    capped, capped_same, pages = compare_all(signed_in, url)
    assert pages > 2
    assert {k: sorted(v) for k, v in capped.items()} == {k: sorted(v) for k, v in unbounded.items()}
    assert capped_same == unbounded_same == 5  # k1, k3, k7, k9, k11


def test_a_page_of_a_comparison_is_a_fixed_number_of_queries(signed_in, two_runs, django_assert_max_num_queries):
    """On Airflow's database, whatever the number of keys: both runs, a page of keys of each (and on 3.4 each run's
    regions: none here)."""
    a, b = two_runs
    for n in range(40):
        make_task_key(a, task_id="wide", key=f"k{n}", value=n)
        make_task_key(b, task_id="wide", key=f"k{n}", value=n + n % 2)
    regions = 2 if schema_of(connections["airflow"]).regions else 0
    with django_assert_max_num_queries(3 + regions, connection=connections["airflow"]):
        assert signed_in.get(f"/dags/etl_orders/compare/?a={a.run_id}&b={b.run_id}").status_code == 200


def test_the_runs_page_offers_the_comparison(signed_in, two_runs):
    a, b = two_runs
    body = signed_in.get("/dags/etl_orders/").content.decode()
    assert '<form id="compare-runs"' in body and 'action="/dags/etl_orders/compare/"' in body
    assert f'form="compare-runs" name="b" value="{b.run_id}"' in body
    assert re.search(rf'name="a" value="{a.run_id}"[^>]*checked', body)  # newest as B, the one before as A


def test_bad_input_is_a_clear_error_and_changes_nothing(signed_in, two_runs):
    a, _ = two_runs
    response = signed_in.get(f"/dags/etl_orders/compare/?a={a.run_id}")
    assert response.status_code == 400 and b"Choose a run to compare." in response.content
    response = signed_in.get(f"/dags/etl_orders/compare/?a={a.run_id}&b=nope")
    assert response.status_code == 404 and b"No DAG run &#x27;nope&#x27;" in response.content
    assert signed_in.get(f"/dags/etl_orders/compare/?a={a.run_id}&b={a.run_id}&cursor=%%%").status_code == 200
    assert signed_in.get("/keys/task/999999/story/").status_code == 404
    assert signed_in.get(f"/keys/task/{10**19}/story/").status_code == 404
    key = make_task_key(a, key="k", value=1)
    huge = "WzEwMDAwMDAwMDAwMDAwMDAwMDAwMF0"  # [10**20]: beyond 64 bits, the first page
    assert signed_in.get(f"/keys/task/{key.id}/story/?cursor={huge}").status_code == 200
    assert (
        signed_in.get(f"/keys/task/{key.id}/story/?cursor=WzkyMjMzNzIwMzY4NTQ3NzU4MDdd").status_code == 200
    )  # [2**63 - 1]


# Airflow 3.4: keys in dynamic regions -----------------------------------------------------------------------------
@pytest.fixture
def looped_runs():
    """Two runs of a loop ``refine``: ``refine.work`` writes ``score`` at iterations 0 and 1 in each run (a region
    id of its own in every run); the second run's iteration 1 was cleared and re-run (a fork)."""
    if not schema_of(connections["airflow"]).regions:
        pytest.skip("Airflow 3.4 only: runs with AIRFLOW_FIXTURE_SERIES=3.4")
    made = []
    for n in range(2):
        run = make_dag_run(dag_id="loops", run_id=f"scheduled__loop-{n}")
        loop = make_region(run, "refine")
        keys = {}
        for iteration in range(2):
            make_region_instance(run, "refine.gate", loop, iteration, operator=LOOP_GATE_OPERATOR)
            make_region_instance(run, "refine.work", loop, iteration)
            keys[iteration] = make_region_key(
                run, "refine.work", loop, iteration, "score", {"score": 10 * n + iteration}
            )
        made.append((run, loop, keys))
    run, loop, _ = made[1]
    fork = make_region(run, "refine", forked_from=loop, resumes_from_index=1)
    made[1][2][1] = make_region_key(run, "refine.work", fork, 1, "score", {"score": 99})
    return made


def test_on_34_the_story_follows_a_key_in_a_loop_by_its_iteration(signed_in, looped_runs):
    (run0, _, keys0), (run1, _, keys1) = looped_runs
    body = signed_in.get(f"/keys/task/{keys0[1].id}/story/").content.decode()
    assert story_rows(body) == ["scheduled__loop-1", "scheduled__loop-0"]
    assert f'href="/keys/task/{keys1[1].id}/"' in body  # the fork's key: the current execution
    assert "&quot;score&quot;: 99" in body and "&quot;score&quot;: 10," not in body
    assert "loop refine · iteration 1" in body


def test_on_34_a_comparison_matches_keys_in_regions_by_their_path(signed_in, looped_runs):
    (run0, _, _), (run1, _, _) = looped_runs
    body = signed_in.get(f"/dags/loops/compare/?a={run0.run_id}&b={run1.run_id}").content.decode()
    assert "0 added in B" in re.sub(r"<[^>]+>", "", body) and "0 removed in B" in re.sub(r"<[^>]+>", "", body)
    changed = section(body, "changed")
    assert changed.count("<code><bdi>score</bdi></code>") == 2 and "iteration 0" in changed and "iteration 1" in changed


def test_a_number_too_large_for_a_float_is_listed_not_charted(signed_in, history):
    """JSON's integers have no bound (10**400 has no float). Written through the dashboard's editor, so that the
    audit trail holds them too, the story, the key pages and the audit trail show them; the lines are drawn from
    the numbers that fit, and the others are listed beside them."""
    runs, keys = history
    huge = 10**400
    for run in runs[4:]:
        make_task_instance(run, task_id="extract")
    for key, value in ((keys[5], {"rows": huge, "source": "orders"}), (keys[4], huge)):
        edit = f"/keys/task/{key.pk}/edit/"
        form = signed_in.get(edit, HTTP_HX_REQUEST="true").content.decode()
        seen = re.search(r'name="seen_updated_at" value="([^"]*)"', form).group(1)
        saved = signed_in.post(edit, {"value": json.dumps(value), "seen_updated_at": seen}, HTTP_HX_REQUEST="true")
        assert saved.status_code == 204, saved.content.decode()

    story = signed_in.get(f"/keys/task/{keys[5].pk}/story/")
    assert story.status_code == 200
    body = htmllib.unescape(story.content.decode())
    charts = re.findall(r'<figure class="chart story-chart".*?</figure>', body, re.S)
    chart = next(c for c in charts if "<figcaption>rows</figcaption>" in c)
    assert "1e+400 (too large to chart)" in chart  # listed with the numbers: run 5
    assert chart.count('class="dot"') == 3  # runs 0, 1 and 2: the fourth has no key, the fifth no object
    assert str(huge)[:50] in body  # the values themselves, in the story's table
    for path in (f"/keys/task/{keys[4].pk}/", f"/keys/task/{keys[5].pk}/", "/audit/"):
        assert signed_in.get(path).status_code == 200, path
    events = signed_in.get("/api/statestore/v1/audit-events").json()
    assert str(huge) in json.dumps(events)


def test_times_at_the_ends_of_the_calendar_are_drawn_and_labelled(signed_in):
    """Times in values at both ends of the calendar (issue 36): the line's labels are those times, in UTC where
    the reader's zone has none; a time whose offset carries it out of years 1 to 9999 is not drawn."""
    ends = ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z", "0001-01-01T00:00:00+01:00"]
    keys = []
    for n, at in enumerate(ends):
        run = make_dag_run(dag_id="calendar", run_id=f"scheduled__day-{n}")
        keys.append(make_task_key(run, key="at", task_id="t", value={"at": at, "n": n}))
    signed_in.cookies["tz"] = "Pacific/Kiritimati"
    story = signed_in.get(f"/keys/task/{keys[-1].pk}/story/")
    assert story.status_code == 200
    body = htmllib.unescape(story.content.decode())
    chart = next(c for c in re.findall(r"<figure.*?</figure>", body, re.S) if "<figcaption>at</figcaption>" in c)
    assert "31 Dec 23:59 UTC" in chart and chart.count('class="dot"') == 2
