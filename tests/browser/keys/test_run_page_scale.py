"""Issue 23, item 4, in a real browser: a run page that scales. Each test would have caught what the issue found:
no per-task count, no key filter, keys in text order (key_0, key_10, key_100 …), no sortable columns, a table per
map index, four buttons a row wrapping into a 2×2 block, links reading just "task instance". Also the run page's
screenshots for the README (light and dark, desktop and phone), with no console error and no sideways scrolling.
"""

import os
import re
import shutil
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.conftest import SCREENSHOTS
from tests.conftest import BOTH_DATABASES

# A form shown again with its mistakes answers 422, which Chromium logs as a failed load: that one is expected.
pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
DOCS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"
DESKTOP, PHONE = {"width": 1440, "height": 900}, {"width": 390, "height": 844}
KEYS = 250


@pytest.fixture
def deployment(dag_run_factory, task_instance_factory, task_key_factory):
    """A run of etl_orders: ``load`` mapped over 0-2 with a watermark and a row count each, ``transform`` with
    key_0 … key_249."""
    run = dag_run_factory(dag_id="etl_orders", run_id="scheduled__2026-12-01T00:00:00+00:00", state="success")
    task_instance_factory(run, task_id="transform")
    for n in range(KEYS):
        task_key_factory(run, task_id="transform", key=f"key_{n}", value={"page": n, "rows": [n] * (n % 7)})
    for map_index in range(3):
        task_instance_factory(run, task_id="load", map_index=map_index)
        task_key_factory(
            run, task_id="load", map_index=map_index, key="watermark", value=f"2026-12-01T0{map_index}:00Z"
        )
        task_key_factory(
            run,
            task_id="load",
            map_index=map_index,
            key="rows_loaded",
            value=1000 * map_index,
            expires_at=timezone.now() + timezone.timedelta(days=map_index + 1),
        )
    return {"run": run}


def keys_of(page, task: str) -> list[str]:
    section = page.locator("section.task-group", has=page.locator("h2 a", has_text=re.compile(f"^{task}$")))
    return section.locator("td.key code").all_inner_texts()


def test_counts_filter_and_natural_order(signed_in, live_server, deployment, console_errors):
    page = signed_in
    run = deployment["run"]
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    counts = page.get_by_role("navigation", name="Tasks of this run").get_by_test_id("task-count")
    expect(counts).to_have_text(["load 6 keys", "transform 250 keys"])
    shown = keys_of(page, "transform")
    assert shown[:12] == [f"key_{n}" for n in range(12)]  # key_2 before key_10, not key_0, key_1, key_10 …
    page.get_by_label("Keys starting with").fill("KEY_1")
    expect(page.get_by_text("A prefix, in any case")).to_be_visible()  # which kind of filter, next to the field
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"[?&]q=KEY_1"))
    expect(counts).to_have_text(["transform 111 keys matching"])  # key_1, key_10-19, key_100-199
    assert keys_of(page, "transform")[:3] == ["key_1", "key_10", "key_11"]
    page.reload()  # the URL keeps the filter
    expect(page.get_by_label("Keys starting with")).to_have_value("KEY_1")


def test_columns_sort_from_their_headers(signed_in, live_server, deployment, console_errors):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/load/?map_index=all")
    table = page.locator("table.keys")
    expiry = table.get_by_role("columnheader", name=re.compile("^Expiry"))
    expiry.get_by_role("link").click()
    expect(page).to_have_url(re.compile(r"sort=expiry"))
    expect(expiry).to_have_attribute("aria-sort", "ascending")
    assert page.locator("td.key code").all_inner_texts()[:3] == ["rows_loaded"] * 3  # soonest first, never last
    size = table.get_by_role("columnheader", name=re.compile("^Size"))
    size.get_by_role("link").click()
    size.get_by_role("link").click()
    expect(page).to_have_url(re.compile(r"sort=-size"))
    expect(size).to_have_attribute("aria-sort", "descending")
    expect(page.get_by_label("Sort by")).to_have_value("-size")  # the phone's way to sort says the same


def test_one_table_a_task_with_a_map_index_column_linking_by_name(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/")
    load = page.locator("section.task-group", has=page.locator("h2 a", has_text=re.compile("^load$")))
    expect(load.locator("table")).to_have_count(1)
    expect(load.get_by_role("columnheader", name="Map index")).to_be_visible()
    links = load.locator("td.map-index a")
    expect(links).to_have_text(["load[0]", "load[0]", "load[1]", "load[1]", "load[2]", "load[2]"])
    expect(page.get_by_role("link", name="task instance", exact=True)).to_have_count(0)
    links.nth(2).click()
    expect(page.locator("h1")).to_have_text("load [1]")


def test_row_actions_are_one_menu_with_three_tab_stops(signed_in, live_server, deployment, console_errors):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/")
    row = page.locator("tr", has=page.locator("td.key code", has_text=re.compile("^key_3$")))
    stops = row.evaluate(
        """(tr) => [...tr.querySelectorAll('a, button, input, summary, select, textarea')]
              .filter((el) => el.checkVisibility({ contentVisibilityAuto: true })).length"""
    )
    assert stops == 3  # the checkbox, the key, the menu
    height = row.bounding_box()["height"]
    assert height < 60, height  # no 2x2 block of buttons
    menu = row.locator("summary")
    menu.focus()
    page.keyboard.press("Enter")
    expect(row.get_by_role("button", name="Expiry of key_3")).to_be_visible()
    expect(row.get_by_role("button", name="Delete key_3")).to_be_visible()
    expect(row.get_by_role("link", name="Open the key's page")).to_have_count(0)  # fetched, in place of the link
    page.keyboard.press("Escape")
    expect(row.get_by_role("button", name="Delete key_3")).to_be_hidden()
    expect(menu).to_be_focused()
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")  # Edit, then Set expiry
    page.keyboard.press("Enter")
    expect(page.locator("dialog#modal h2")).to_contain_text("Expiry of")


def _document(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    if os.environ.get("UPDATE_DOC_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS / f"{name}.png")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(("width", "viewport"), [("desktop", DESKTOP), ("phone", PHONE)])
def test_the_run_page_screenshots(browser, live_server, operator, deployment, scheme, width, viewport):
    """docs/screenshots/run-page-{desktop,phone}-{light,dark}.png (``UPDATE_DOC_SCREENSHOTS=1`` refreshes them):
    a mapped task's table with ticked keys and the selection bar; no console error, nothing wider than the screen."""
    context = browser.new_context(color_scheme=scheme, viewport=viewport)
    page = context.new_page()
    errors = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", operator.username)
    page.fill("#id_password", operator.raw_password)
    page.click("form.login button[type=submit]")  # not the header's language menu
    expect(page.locator("h1")).to_have_text("Task & asset state")
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/?sort=")
    load = page.locator("section.task-group", has=page.locator("h2 a", has_text=re.compile("^load$")))
    for box in load.locator("tbody input[type=checkbox]").all()[:3]:
        box.check()
    expect(page.locator("[data-selected-count]")).to_have_text("3 selected")
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    load.locator("summary").first.click()
    page.locator(".key-filter").evaluate("(el) => el.scrollIntoView()")
    _document(page, f"run-page-{width}-{scheme}")
    assert not errors
    context.close()
