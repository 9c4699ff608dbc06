"""The Insights page in a real browser, light and dark: every chart is drawn, its colours follow the theme,
its numbers open as a table, and the Content-Security-Policy reports no violation.

Screenshots go to test-artifacts/screenshots/; with UPDATE_DOC_SCREENSHOTS=1 the README's
docs/screenshots/insights-light.png and insights-dark.png are refreshed too.
"""

import os
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.records.models import GcRun, StatsSnapshot, StatsSnapshotDag
from tests.browser.shell.test_csp import REPORT_VIOLATIONS
from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
DOCS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"
DAGS = {  # dag_id: (keys per day of growth, bytes per key)
    "etl_orders": (9_000, 220),
    "etl_customers": (6_500, 180),
    "ml_training": (4_000, 2_400),
    "reporting_daily": (2_500, 90),
    "sensor_fleet": (1_800, 60),
    "backfill_2026": (700, 1_200),
}


@pytest.fixture
def deployment(dag_run_factory, task_instance_factory, task_key_factory):
    """A month of daily snapshots of a growing store, its GC runs, and one key per DAG in Airflow."""
    now = timezone.now()
    for dag_id in DAGS:
        run = dag_run_factory(dag_id=dag_id)
        task_instance_factory(run, task_id="extract")
        task_key_factory(run, task_id="extract", key="cursor", value="1")
    for day in range(30, -1, -1):
        taken = now - timedelta(days=day, minutes=5)
        grow = 31 - day
        rows = {dag: (per_day * grow + (day % 3) * 500, per_day * grow * size) for dag, (per_day, size) in DAGS.items()}
        keys = sum(k for k, _ in rows.values())
        snapshot = StatsSnapshot.objects.create(
            taken_at=taken,
            finished_at=taken + timedelta(seconds=40 + grow),
            status="done",
            task_keys=keys,
            task_bytes=sum(b for _, b in rows.values()),
            expired=keys // 10,
            expiring=keys // 30,
            never=keys // 20,
            live=keys - keys // 10,
            dags=len(rows),
            asset_keys=2_000 + 40 * grow,
            asset_bytes=(2_000 + 40 * grow) * 300,
            assets=120,
        )
        StatsSnapshotDag.objects.bulk_create(
            StatsSnapshotDag(snapshot=snapshot, dag_id=dag, keys=k, bytes=b, expired=k // 10, expiring=k // 30)
            for dag, (k, b) in rows.items()
        )
        started = taken - timedelta(hours=1)
        outcome = GcRun.Outcome.PARTIAL if day == 12 else GcRun.Outcome.FAILED if day == 4 else GcRun.Outcome.COMPLETED
        GcRun.objects.create(
            started_at=started,
            finished_at=started + timedelta(seconds=20 + (day * 7) % 50),
            cutoff=started,
            batch_size=10_000,
            rows_deleted=0 if outcome == GcRun.Outcome.FAILED else 3_000 + (day * 1_337) % 9_000,
            outcome=outcome,
            host="gc-1",
            pid=1,
        )
    snapshot.expiry_histogram = [
        {"day": str((now + timedelta(days=i + 1)).date()), "keys": 900 + (i * 613) % 4_000, "bytes": 0}
        for i in range(30)
    ]
    snapshot.size_histogram = [
        {"store": "task", "up_to": up_to, "keys": n}
        for up_to, n in ((64, 61_000), (1024, 88_000), (16_384, 30_000), (262_144, 3_100), (1_048_576, 240), (None, 12))
    ] + [{"store": "asset", "up_to": up_to, "keys": n} for up_to, n in ((64, 1_800), (1024, 1_100), (None, 300))]
    snapshot.top_tasks = [
        {"dag_id": dag, "task_id": task, "keys": k, "bytes": k * 300}
        for dag, task, k in (
            ("etl_orders", "extract", 150_000),
            ("etl_customers", "load", 120_000),
            ("ml_training", "train", 90_000),
            ("etl_orders", "load", 80_000),
            ("reporting_daily", "render", 60_000),
        )
    ]
    snapshot.top_assets = [
        {"asset_id": i, "name": name, "uri": f"s3://warehouse/{name}", "keys": k, "bytes": k * 500}
        for i, (name, k) in enumerate((("orders_raw", 900), ("customers", 700), ("features", 420)), start=1)
    ]
    snapshot.save()
    return snapshot


@pytest.fixture
def violations(page):
    found = []
    page.expose_function("reportCspViolation", lambda text: found.append(text))
    page.add_init_script(REPORT_VIOLATIONS)
    page.on("console", lambda msg: "Content Security Policy" in msg.text and found.append(f"console: {msg.text}"))
    return found


@pytest.fixture
def signed_in(violations, signed_in):
    return signed_in


def document(screenshot, name: str) -> None:
    path = screenshot(name)
    if os.environ.get("UPDATE_DOC_SCREENSHOTS") == "1":
        shutil.copyfile(path, DOCS / f"{name}.png")


BAR_FILL = "getComputedStyle(document.querySelector('#chart-expiry rect.bar')).fill"
LINE_STROKE = "getComputedStyle(document.querySelector('#chart-task-keys polyline')).stroke"


def test_the_insights_page_in_light_and_dark(signed_in, live_server, deployment, screenshot, violations):
    page = signed_in
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Insights").click()
    expect(page.locator("h1")).to_have_text("Insights")
    for chart in (
        "task-keys",
        "task-bytes",
        "asset-keys",
        "dag-keys",
        "expiry",
        "status",
        "sizes-task",
        "dags-by-keys",
        "tasks-by-bytes",
        "assets-by-keys",
        "gc-rows",
        "gc-duration",
    ):
        expect(page.locator(f"#chart-{chart} svg[role]")).to_be_visible()  # img, or group when its bars link
    assert page.locator("#chart-dag-keys polyline").count() == len(DAGS) - 1  # the top 5
    assert page.locator("#chart-gc-rows rect.bar").count() == 30  # the 31st started before the range
    box = page.locator("#chart-task-keys svg").bounding_box()
    assert box["width"] > 300 and box["height"] > 100  # drawn at a readable size
    light = (page.evaluate(BAR_FILL), page.evaluate(LINE_STROKE))
    assert "rgb(0, 0, 0)" not in light  # coloured by insights.css, not SVG's default black

    numbers = page.locator("#chart-expiry details.chart-numbers")
    numbers.locator("summary").click()
    expect(numbers.locator("tbody tr")).to_have_count(30)
    numbers.locator("summary").click()
    document(screenshot, "insights-light")

    page.emulate_media(color_scheme="dark")
    dark = (page.evaluate(BAR_FILL), page.evaluate(LINE_STROKE))
    assert dark[0] != light[0] and dark[1] != light[1]
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 21, 27)"  # app.css's dark --bg
    document(screenshot, "insights-dark")

    page.goto(f"{live_server.url}/insights/?days=7")
    expect(page.locator("nav.range a[aria-current=page]")).to_have_text("7 days")
    expect(page.locator("#chart-task-keys tbody tr")).to_have_count(7)
    assert violations == []
