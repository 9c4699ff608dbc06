"""The GC page in a real browser: the preview, a bounded run through the confirmation (Cancel focused, then
confirmed), and the run in the history with the user's name.

Screenshots at 1440×900 go to test-artifacts/screenshots/; with UPDATE_DOC_SCREENSHOTS=1 the README's
docs/screenshots/gc-light.png and gc-dark.png are refreshed too.
"""

import os
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.contrib.auth.models import Group
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.identity import roles
from statestore_admin.records.models import GcRun
from tests.browser.shell.test_a11y_layout import serious
from tests.conftest import ALL_PERMS, BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
DOCS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"


@pytest.fixture
def operator(user_factory):
    """Signed in by ``signed_in``: here an Admin, who may run GC."""
    roles.sync_roles()
    user = user_factory("operator", perms=ALL_PERMS)
    user.groups.add(Group.objects.get(name="Admin"))
    user = type(user).objects.get(pk=user.pk)
    user.raw_password = "pw-for-tests"
    return user


@pytest.fixture
def deployment(dag_run_factory, task_key_factory):
    """Expired keys in three DAGs, live ones, and the runs of a GC schedule that stopped a day and a half ago."""
    now = timezone.now()
    for dag_id, count, age in (("etl_orders", 6, 3), ("ml_training", 3, 1), ("reporting_daily", 2, 10)):
        run = dag_run_factory(dag_id=dag_id)
        for i in range(count):
            task_key_factory(run, task_id="extract", key=f"cursor_{i}", expires_at=now - timedelta(days=age, hours=i))
        task_key_factory(run, task_id="extract", key="watermark", expires_at=now + timedelta(days=7))
    for hours, outcome, rows, message in (
        (36, GcRun.Outcome.COMPLETED, 4_210, ""),
        (60, GcRun.Outcome.FAILED, 0, "OperationalError: canceling statement due to lock timeout"),
        (84, GcRun.Outcome.PARTIAL, 500_000, "Stopped after --max-batches 50; expired rows may remain."),
        (108, GcRun.Outcome.COMPLETED, 12_873, ""),
    ):
        started = now - timedelta(hours=hours)
        GcRun.objects.create(
            started_at=started,
            finished_at=started + timedelta(seconds=42),
            cutoff=started,
            batch_size=10_000,
            rows_deleted=rows,
            batches=max(rows // 10_000, 1),
            outcome=outcome,
            message=message,
            host="gc-worker-1",
            pid=31337,
            actor="statestore@gc-worker-1",
            via="gc",
        )
    return now


def document(screenshot, name: str) -> None:
    path = screenshot(name)
    if os.environ.get("UPDATE_DOC_SCREENSHOTS") == "1":
        shutil.copyfile(path, DOCS / f"{name}.png")


def test_preview_and_a_bounded_run_from_the_gc_page(signed_in, live_server, deployment, screenshot):
    page = signed_in
    page.set_viewport_size({"width": 1440, "height": 900})
    page.get_by_role("navigation", name="Main").get_by_role("link", name="GC").click()
    expect(page.locator("h1")).to_have_text("Garbage collection")
    expect(page.get_by_test_id("gc-preview-count")).to_have_text("11")
    expect(page.get_by_test_id("gc-stale")).to_be_visible()  # the last success was 36 h ago
    expect(page.locator("table.gc-history tr.gc-failed")).to_have_count(1)
    document(screenshot, "gc-light")
    page.emulate_media(color_scheme="dark")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(18, 21, 27)"
    document(screenshot, "gc-dark")
    page.emulate_media(color_scheme="light")

    # A preview for one DAG, then keys that expired more than 2 days ago.
    page.fill("#gc-dag", "ml_training")
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_test_id("gc-preview-count")).to_have_text("3")
    page.fill("#gc-dag", "")
    page.check("input[name=cutoff][value=age]")
    page.fill("#gc-age", "2")
    page.select_option("#gc-unit", "days")
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_test_id("gc-preview-count")).to_have_text("8")  # etl_orders and reporting_daily

    # A bounded run: 3 rows a batch, 2 batches. The confirmation opens with Cancel focused; Cancel changes nothing.
    page.fill("#gc-batch-size", "3")
    page.fill("#gc-max-batches", "2")
    page.get_by_role("button", name="Run GC now…").click()
    dialog = page.locator("dialog#modal")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_test_id("gc-confirm-rows")).to_contain_text("8")
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()
    assert TaskStateStore.objects.count() == 14 and GcRun.objects.count() == 4

    page.get_by_role("button", name="Run GC now…").click()
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Delete expired keys now").click()
    expect(page.locator("#toasts .toast").last).to_contain_text("deleted 6 expired task state rows in 2 batches")
    newest = page.locator("table.gc-history tbody tr").first
    expect(newest).to_contain_text("operator")
    expect(newest).to_contain_text("GC page")
    expect(newest.locator(".badge")).to_have_text("stopped at its batch or time limit")
    assert TaskStateStore.objects.count() == 8
    run = GcRun.objects.order_by("-started_at").first()
    assert (run.actor, run.via, run.rows_deleted, run.batches) == ("operator", "ui", 6, 2)
    expect(page.get_by_test_id("gc-stale")).to_be_hidden()  # a partial run counts as a success


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_gc_page_passes_axe_and_fits_a_phone(signed_in, live_server, deployment, scheme):
    """No serious or critical axe finding on the page and in its confirmation, and no horizontal page overflow
    at 390 px (the history and the recipes scroll inside their boxes)."""
    page = signed_in
    page.emulate_media(color_scheme=scheme)
    page.goto(f"{live_server.url}/gc/")
    axe = Axe()
    assert serious(axe, page) == []
    page.get_by_role("button", name="Run GC now…").click()
    expect(page.locator("dialog#modal")).to_be_visible()
    assert serious(axe, page) == []
    page.get_by_role("button", name="Cancel").click()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/gc/")
    width = page.evaluate("Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)")
    assert width <= 390
