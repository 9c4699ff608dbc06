"""Accessibility and layout in a real browser (issue 14, items 3, 4, 7 and 10):

- axe-core finds no serious or critical violation on any page (and an open dialog), in the light and the
  dark theme (axe is the copy pinned in requirements-dev.txt: axe-playwright-python ships axe.min.js,
  axe-core 4.12.1, MPL-2.0; it is injected by Playwright, never fetched from a CDN);
- at 390×844 no page is wider than the screen and the whole navigation is on screen;
- at 1440×900 short keys stay whole, a run's per-task tables share their column positions, and the
  configuration's "From" column does not wrap;
- times are shown in the browser's time zone, named in the header, with UTC on hover and a switch to UTC.

Screenshots of the overview and insights at both widths and in both themes go to test-artifacts/screenshots/;
with UPDATE_DOC_SCREENSHOTS=1 also to docs/screenshots/ (the README shows them).
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

from statestore_admin.access.actors import Actor
from statestore_admin.records.models import AuditEvent, GcRun, StatsSnapshot, StatsSnapshotDag
from statestore_admin.state import services
from statestore_admin.stats.snapshots import take_snapshot
from tests.browser.conftest import SCREENSHOTS, row_action, settled, sign_in
from tests.browser.shell.test_overview_layout import BREAKS
from tests.conftest import BOTH_DATABASES
from tests.objects_helpers import file_storage, ref_value, write_object

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
DOCS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
SHORT_KEYS = ("attempt", "job_id", "cluster", "checkpoint", "submitted_at")
LONG_KEY = "s3_partition_" + "x" * 150


@pytest.fixture
def deployment(
    operator,
    dag_run_factory,
    task_instance_factory,
    task_key_factory,
    asset_factory,
    asset_key_factory,
    tmp_path,
    monkeypatch,
    settings,
):
    """A run with plain and mapped tasks, short and very long keys, a value kept as a worker-side object (and
    an orphan object), an asset, an audit event and a snapshot."""
    now = timezone.now()
    run = dag_run_factory(dag_id="etl_orders", run_id="scheduled__2026-11-29T00:00:00+00:00", state="running")
    task_instance_factory(run, task_id="submit")
    store = file_storage(tmp_path, monkeypatch)
    settings.WORKER_BACKEND_READ = True
    ref = write_object(store, store.task_ref(run.dag_id, run.run_id, "submit", -1, "manifest"), {"files": [1, 2]})
    offloaded = task_key_factory(run, task_id="submit", key="manifest", value=ref_value(ref), expires_at=None)
    write_object(store, store.task_ref(run.dag_id, run.run_id, "submit", -1, "gone"), [0])  # an orphan
    for key in SHORT_KEYS:
        task_key_factory(run, task_id="submit", key=key, value={"v": key}, expires_at=now + timedelta(days=3))
    task_key_factory(run, task_id="submit", key=LONG_KEY, value="y" * 400, expires_at=now - timedelta(minutes=5))
    for map_index in (0, 1):
        task_instance_factory(run, task_id="train_fold", map_index=map_index)
        task_key_factory(run, task_id="train_fold", map_index=map_index, key="job_id", value=map_index, expires_at=None)
    asset = asset_factory(name="orders_raw", uri="s3://warehouse/orders/" + "very_long_prefix/" * 6)
    asset_key_factory(asset, key="watermark", value="2026-11-30", kind="watcher")
    asset_key_factory(asset, key=LONG_KEY, value={"id": 991}, kind="api")
    key = run.state_keys.get(key="attempt")
    services.expire_task_keys(actor=Actor(via="ui", user=operator), selection=services.TaskSelection(ids=(key.pk,)))
    take_snapshot(actor=Actor.command())
    return {"run": run, "asset": asset, "key": key, "offloaded": offloaded, "event": AuditEvent.objects.latest("id")}


@pytest.fixture
def history(deployment):
    """Four weeks of earlier snapshots and daily GC runs before ``deployment``'s snapshot, for the screenshots."""
    now = timezone.now()
    for day in range(28, 0, -1):
        taken = now - timedelta(days=day)
        keys = 2 + (28 - day) // 5
        snapshot = StatsSnapshot.objects.create(
            taken_at=taken,
            finished_at=taken + timedelta(seconds=3),
            status="done",
            task_keys=keys,
            task_bytes=keys * 60,
            expired=day % 3,
            expiring=1,
            never=2,
            live=keys - day % 3,
            dags=1,
            asset_keys=2,
            asset_bytes=23,
            assets=1,
        )
        StatsSnapshotDag.objects.create(snapshot=snapshot, dag_id="etl_orders", keys=keys, bytes=keys * 60)
        started = taken - timedelta(hours=1)
        GcRun.objects.create(
            started_at=started,
            finished_at=started + timedelta(seconds=20 + day % 7),
            cutoff=started,
            batch_size=10_000,
            rows_deleted=12_480 + day * 1_337,
            outcome=GcRun.Outcome.COMPLETED,
            host="gc-1",
            pid=1,
        )


def pages(deployment) -> dict[str, str]:
    run, asset = deployment["run"], deployment["asset"]
    return {
        "overview": "/",
        "insights": "/insights/",
        "gc": "/gc/",
        "dag-list": "/dags/",
        "dag-runs": f"/dags/{run.dag_id}/",
        "run": f"/runs/{run.pk}/",
        "task-instance": f"/runs/{run.pk}/tasks/submit/",
        "key": f"/keys/task/{deployment['key'].pk}/",
        "key-object": f"/keys/task/{deployment['offloaded'].pk}/",
        "orphans": "/orphans/",
        "assets": "/assets/",
        "asset": f"/assets/{asset.pk}/",
        "search": "/search/?key=job",
        "audit": "/audit/",
        "audit-event": f"/audit/{deployment['event'].pk}/",
        "tokens": "/account/tokens/",
        "404": "/no/such/page/",
    }


def new_page(browser, live_server, *, scheme="light", viewport=DESKTOP, timezone_id=None):
    options = {"color_scheme": scheme, "viewport": viewport}
    if timezone_id:
        options["timezone_id"] = timezone_id
    context = browser.new_context(**options)
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    return page


def visit(page, url):
    page.goto(url)
    settled(page)  # htmx-loaded parts (the largest values) are in


def serious(axe: Axe, page) -> list[str]:
    results = axe.run(page)
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:5]}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def document(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("UPDATE_DOC_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS / f"{name}.png")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_nothing_serious_on_any_page(browser, live_server, operator, deployment, scheme):
    axe = Axe()
    page = new_page(browser, live_server, scheme=scheme)
    findings = {"login": serious(axe, page)}
    sign_in(page, live_server, operator)
    for name, path in pages(deployment).items():
        visit(page, live_server.url + path)
        findings[name] = serious(axe, page)
    visit(page, live_server.url + pages(deployment)["task-instance"])  # a dialog open over the page
    row_action(page.locator("tr", has=page.locator("td.key code", has_text="job_id")), "Edit").click()
    expect(page.locator("dialog#modal")).to_be_visible()
    findings["edit dialog"] = serious(axe, page)
    page.context.close()
    assert not {name: found for name, found in findings.items() if found}


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_page_is_wider_than_a_phone(browser, live_server, operator, deployment, history, scheme):
    page = new_page(browser, live_server, scheme=scheme, viewport=PHONE)
    too_wide = {}
    width = page.evaluate("document.documentElement.scrollWidth")
    if width > PHONE["width"]:
        too_wide["login"] = width
    sign_in(page, live_server, operator)
    for name, path in pages(deployment).items():
        visit(page, live_server.url + path)
        width = page.evaluate("Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)")
        if width > PHONE["width"]:
            too_wide[name] = width
        off_screen = page.evaluate(
            """() => [...document.querySelectorAll('.topbar nav a, .topbar button')]
                 .filter((a) => { const r = a.getBoundingClientRect(); return r.left < 0 || r.right > innerWidth; })
                 .map((a) => a.textContent.trim())"""
        )
        assert not off_screen, (name, off_screen)
        if name in ("overview", "insights"):
            document(page, f"{name}-phone-{scheme}")
    assert not too_wide, too_wide
    page.context.close()


LINES = """(el) => {
  const range = document.createRange();
  range.selectNodeContents(el);
  return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
}"""


def test_keys_stay_whole_and_run_tables_line_up_at_desktop_width(browser, live_server, operator, deployment, history):
    page = new_page(browser, live_server)
    sign_in(page, live_server, operator)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        visit(page, f"{live_server.url}/")
        document(page, f"overview-desktop-{scheme}")
        visit(page, f"{live_server.url}/insights/")
        document(page, f"insights-desktop-{scheme}")
    page.emulate_media(color_scheme="light")

    visit(page, f"{live_server.url}/")
    sources = page.locator("table.config tbody td:nth-child(3)")
    assert sources.count() > 0
    for cell in sources.all():  # whole words, or a variable's name broken at its underscores (issue 23, item 1)
        assert cell.evaluate(BREAKS) == [], cell.text_content()

    run = deployment["run"]
    for path in (f"/runs/{run.pk}/", f"/runs/{run.pk}/tasks/submit/", "/search/?key=job"):
        visit(page, live_server.url + path)
        for code in page.locator("td.key code").all():
            text = code.text_content()
            if text in SHORT_KEYS:
                assert code.evaluate(LINES) == 1, (path, text)
            elif text == LONG_KEY:  # longer than its cell: it breaks, within the cell
                assert code.evaluate(LINES) > 1
                assert code.evaluate(
                    "(el) => el.getBoundingClientRect().right <= el.closest('td').getBoundingClientRect().right + 1"
                )

    visit(page, f"{live_server.url}/runs/{run.pk}/")
    columns = page.evaluate(
        """() => [...document.querySelectorAll('table.keys')].map((t) =>
             [...t.querySelectorAll('thead th')].map((th) => Math.round(th.getBoundingClientRect().left)))"""
    )
    assert len(columns) >= 2  # submit, and train_fold (one table, with a map index column)
    alike = [c for c in columns if len(c) == len(columns[0])]  # the tables of the tasks that are not mapped
    assert all(c == columns[0] for c in alike), columns
    page.context.close()


def test_times_are_in_the_browsers_zone_with_utc_on_hover(browser, live_server, operator, deployment):
    page = new_page(browser, live_server, timezone_id="Asia/Tokyo")  # the login page sets the cookie
    sign_in(page, live_server, operator)
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/submit/")
    expect(page.locator(".time-zone strong")).to_have_text("Asia/Tokyo")
    updated = page.locator("td time").first
    expect(updated).to_have_attribute("title", re.compile(r"JST \(Asia/Tokyo\) · .* UTC$"))
    job = page.locator("tr", has=page.locator("td.key code", has_text="job_id"))
    expect(job.locator("td.expiry time")).to_have_text(re.compile(r"^in 3\sdays$"))  # 3 days less a moment, rounded
    page.get_by_role("button", name="Use UTC").click()
    expect(page.locator(".time-zone strong")).to_have_text("UTC")
    expect(page.locator("td time").first).to_have_attribute("title", re.compile(r"^\S+ \S+ UTC$"))
    page.get_by_role("button", name="Use my time zone").click()
    expect(page.locator(".time-zone strong")).to_have_text("Asia/Tokyo")
    page.context.close()


def test_a_first_page_without_the_cookie_is_shown_again_in_the_browsers_zone(browser, live_server, operator):
    context = browser.new_context(timezone_id="America/New_York")
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")  # rendered in UTC, then reloaded once with the cookie
    expect(page.locator("html")).to_have_attribute("data-time-zone", "America/New_York")
    assert {c["name"]: c["value"] for c in context.cookies()}["tz"] == "America/New_York"
    context.close()


def test_the_404_page_the_favicon_and_numbers_for_people(browser, live_server, operator, deployment):
    """Item 16: a missing page says so for people (no resolver details), with the site's nav and style; the
    favicon is there; the largest values name their run; times ahead read "in …", never "0 minutes ago"."""
    page = new_page(browser, live_server)
    sign_in(page, live_server, operator)
    response = page.goto(f"{live_server.url}/runs/999999/")
    assert response.status == 404
    expect(page.locator("h1")).to_have_text("Page not found")
    expect(page.locator("nav")).to_be_visible()
    assert "Resolver404" not in page.content() and "matches the given query" not in page.content()
    assert page.request.get(f"{live_server.url}/favicon.ico").status == 200
    icon = page.locator("link[rel=icon]").first.get_attribute("href")
    assert page.request.get(f"{live_server.url}{icon}").status == 200
    visit(page, f"{live_server.url}/")
    largest = page.locator("table.largest")
    expect(largest).to_contain_text(deployment["run"].run_id)
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/submit/")
    expiries = page.locator("td.expiry time").all_inner_texts()
    assert expiries and not any(re.search(r"\b0\s+minutes ago", text) for text in expiries), expiries
    assert any(text.startswith("in ") for text in expiries), expiries
    page.context.close()
