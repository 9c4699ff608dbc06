"""A key's story across runs and two runs compared (issue 23, "New") in a real browser: reached from the key
page's link and the DAG runs page's A/B columns, lines drawn and coloured by the theme, a diff opened, the next
page swapped in by htmx, no Content-Security-Policy violation, nothing serious for axe, no sideways scroll at
390 px; in the light and the dark theme, at 1440×900 and 390×844.

Screenshots go to test-artifacts/screenshots/; with UPDATE_DOC_SCREENSHOTS=1 also to docs/screenshots/
(key-story-{desktop,phone}-{light,dark}.png, run-compare-…; the README shows them).
"""

import os
import re
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.conftest import SCREENSHOTS
from tests.browser.shell.test_csp import REPORT_VIOLATIONS
from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
DOCS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"
DESKTOP, PHONE = {"width": 1440, "height": 900}, {"width": 390, "height": 844}
RUNS = 12


@pytest.fixture
def deployment(dag_run_factory, task_instance_factory, task_key_factory):
    """Twelve daily runs of etl_orders: ``extract`` keeps a watermark (rows loaded, the high-water time) and a
    cursor; ``load`` writes a batch id; the newest run adds a key and drops one."""
    now = timezone.now().replace(microsecond=0)
    runs, watermarks = [], []
    for day in range(RUNS):
        at = now - timedelta(days=RUNS - day)
        run = dag_run_factory(dag_id="etl_orders", run_id=f"scheduled__{at:%Y-%m-%dT00:00:00}", state="success")
        run.logical_date = run.run_after = at
        run.save(update_fields=["logical_date", "run_after"])
        runs.append(run)
        task_instance_factory(run, task_id="extract")
        task_instance_factory(run, task_id="load")
        rows = 120_000 + day * 9_500 + (day % 3) * 4_000
        watermark = {"rows_loaded": rows, "high_water": (at - timedelta(hours=2)).isoformat(), "source": "orders"}
        watermarks.append(
            task_key_factory(
                run,
                task_id="extract",
                key="watermark",
                value=watermark,
                updated_at=at,
                expires_at=now + timedelta(days=day),
            )
        )
        task_key_factory(
            run, task_id="extract", key="cursor", value={"offset": rows, "partition": day % 4}, updated_at=at
        )
        task_key_factory(run, task_id="load", key="batch_id", value=f"batch-{day:04d}", updated_at=at)
        task_key_factory(run, task_id="load", key="mode", value={"write": "append", "dedupe": True}, updated_at=at)
        if day < RUNS - 1:
            task_key_factory(run, task_id="load", key="staging_table", value="tmp_orders", updated_at=at)
    task_key_factory(runs[-1], task_id="load", key="rows_rejected", value=17, updated_at=now)
    return {"runs": runs, "watermarks": watermarks}


@pytest.fixture
def violations(page):
    found = []
    page.expose_function("reportCspViolation", lambda text: found.append(text))
    page.add_init_script(REPORT_VIOLATIONS)
    page.on("console", lambda msg: msg.type == "error" and found.append(f"console: {msg.text}"))
    return found


@pytest.fixture
def signed_in(violations, signed_in):
    return signed_in


def document(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("UPDATE_DOC_SCREENSHOTS") == "1":
        shutil.copyfile(path, DOCS / f"{name}.png")


def serious(page) -> list[str]:
    results = Axe().run(page)
    return [f"{v['id']}: {v['help']}" for v in results.response["violations"] if v["impact"] in ("serious", "critical")]


def in_every_layout(page, name: str) -> None:
    """Screenshots at both sizes and in both themes; at 390 px nothing is wider than the screen; axe in both."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for size, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            page.set_viewport_size(viewport)
            if size == "phone":
                width = page.evaluate("document.documentElement.scrollWidth")
                assert width <= PHONE["width"], f"{name} at 390 px is {width} px wide ({scheme})"
            document(page, f"{name}-{size}-{scheme}")
        assert serious(page) == [], scheme
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(DESKTOP)


LINE_STROKE = "getComputedStyle(document.querySelector('#chart-story-0 polyline')).stroke"


def test_a_keys_story_from_its_key_page(signed_in, live_server, deployment, violations):
    page = signed_in
    origin = deployment["watermarks"][5]
    page.goto(f"{live_server.url}/keys/task/{origin.pk}/")
    page.get_by_test_id("key-story-link").click()
    expect(page).to_have_url(re.compile(rf"/keys/task/{origin.pk}/story/$"))
    expect(page.locator("h1")).to_contain_text("watermark")
    rows = page.get_by_test_id("story-table").locator("tbody tr")
    expect(rows).to_have_count(RUNS)
    expect(rows.first).to_contain_text(deployment["runs"][-1].run_id)  # newest first
    expect(page.locator("tr.story-origin")).to_contain_text(deployment["runs"][5].run_id)
    # The numeric and the time leaves drawn over runs, a dot a run, coloured by the theme.
    expect(page.get_by_test_id("chart-story-0").locator("figcaption")).to_have_text("high_water")
    expect(page.get_by_test_id("chart-story-1").locator("figcaption")).to_have_text("rows_loaded")
    assert page.locator("#chart-story-1 circle.dot").count() == RUNS
    light = page.evaluate(LINE_STROKE)
    assert light not in ("none", "rgb(0, 0, 0)")
    box = page.locator("#chart-story-1 svg").bounding_box()
    assert box["width"] > 300 and box["height"] > 80
    # A value against the run before: the diff opens and shows the lines that changed.
    first_diff = rows.first.locator("details")
    first_diff.locator("summary").click()
    expect(first_diff.locator(".diff-add").first).to_contain_text('"rows_loaded"')
    expect(first_diff.locator(".diff-del").first).to_be_visible()
    page.emulate_media(color_scheme="dark")
    assert page.evaluate(LINE_STROKE) != light
    page.emulate_media(color_scheme="light")
    in_every_layout(page, "key-story")
    assert violations == []


def test_the_story_pages_back_through_htmx(signed_in, live_server, deployment, violations, monkeypatch):
    import importlib

    monkeypatch.setattr(importlib.import_module("statestore_admin.state.selectors.key_story"), "STORY_PAGE", 5)
    page = signed_in
    origin = deployment["watermarks"][-1]
    page.goto(f"{live_server.url}/keys/task/{origin.pk}/story/")
    rows = page.get_by_test_id("story-table").locator("tbody tr")
    expect(rows).to_have_count(5)
    page.get_by_role("link", name="Older runs →").click()
    expect(rows.first).to_contain_text(deployment["runs"][RUNS - 6].run_id)
    expect(page).to_have_url(re.compile(r"\?cursor="))  # the page is in the URL: it can be shared
    expect(page.get_by_role("link", name="Newest runs")).to_be_visible()
    assert violations == []


def test_two_runs_compared_from_the_dag_runs_page(signed_in, live_server, deployment, violations):
    page = signed_in
    runs = deployment["runs"]
    page.goto(f"{live_server.url}/dags/etl_orders/")
    expect(page.get_by_label(f"Compare: {runs[-1].run_id} as run B")).to_be_checked()  # newest against the one before
    expect(page.get_by_label(f"Compare: {runs[-2].run_id} as run A")).to_be_checked()
    page.get_by_test_id("compare-button").click()
    expect(page).to_have_url(re.compile(r"/dags/etl_orders/compare/\?(a|b)=.+&(a|b)=.+"))  # both runs in the URL
    summary = page.get_by_test_id("compare-summary")
    expect(summary).to_contain_text("1 added in B")
    expect(summary).to_contain_text("1 removed in B")
    expect(summary).to_contain_text("3 changed")
    expect(summary).to_contain_text("1 the same")
    expect(page.get_by_test_id("compare-added")).to_contain_text("rows_rejected")
    expect(page.get_by_test_id("compare-removed")).to_contain_text("staging_table")
    changed = page.get_by_test_id("compare-changed").locator("tbody tr")
    expect(changed).to_have_count(3)
    first = changed.filter(has_text="watermark").locator("details")
    first.locator("summary").click()
    expect(first.locator(".diff-add").first).to_be_visible()
    in_every_layout(page, "run-compare")

    # Another pair: the oldest run against the newest, through the radios.
    page.goto(f"{live_server.url}/dags/etl_orders/")
    page.get_by_label(f"Compare: {runs[0].run_id} as run A").check()
    page.get_by_test_id("compare-button").click()
    expect(page.get_by_test_id("compare-runs")).to_contain_text(runs[0].run_id)
    page.get_by_role("link", name="Swap A and B").click()
    expect(page.get_by_test_id("compare-summary")).to_contain_text("1 removed in B")
    expect(page.get_by_test_id("compare-removed")).to_contain_text("rows_rejected")
    assert violations == []
