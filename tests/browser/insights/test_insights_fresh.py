"""Insights on a fresh store in a real browser (issue 23, item 5): an Admin takes the first snapshot from the
page; with a history (the demo's, ``history.seed_history``) every chart's x-axis labels are distinct and the
chart text is readable at desktop and phone width; a GC run from the GC page adds to the history. No console
error, CSP included."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.access.actors import Actor
from statestore_admin.identity import roles
from statestore_admin.records.models import StatsSnapshot
from statestore_admin.stats import history
from tests.browser.shell.test_csp import REPORT_VIOLATIONS
from tests.conftest import ALL_PERMS, BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
MIN_TEXT_PX = 11  # the rendered height of an axis label's glyphs, at least


@pytest.fixture
def operator(user_factory):
    """Signed in by ``signed_in``: an Admin, who may take a snapshot."""
    roles.sync_roles()
    user = user_factory("operator", perms=ALL_PERMS)
    user.groups.add(Group.objects.get(name="Admin"))
    user = type(user).objects.get(pk=user.pk)
    user.raw_password = "pw-for-tests"
    return user


@pytest.fixture
def deployment(dag_run_factory, task_key_factory):
    now = timezone.now()
    for dag_id in ("etl_orders", "ml_training", "reporting_daily"):
        run = dag_run_factory(dag_id=dag_id)
        for i in range(4):
            task_key_factory(
                run, task_id="extract", key=f"k{i}", value="x" * 300 * i, expires_at=now - timedelta(hours=i)
            )
        task_key_factory(run, task_id="extract", key="live", expires_at=now + timedelta(days=3))
    return now


@pytest.fixture
def errors(page):
    """Console errors, uncaught exceptions and CSP reports."""
    found = []
    page.add_init_script(REPORT_VIOLATIONS)
    page.expose_function("reportCspViolation", lambda text: found.append(text))
    page.on("console", lambda msg: msg.type == "error" and found.append(msg.text))
    page.on("pageerror", lambda exc: found.append(str(exc)))
    return found


def axis_labels(page, chart: str) -> list[str]:
    return page.locator(f"[data-testid=chart-{chart}] text.x").evaluate_all(
        "ts => ts.filter(t => getComputedStyle(t).display !== 'none').map(t => t.textContent)"
    )


def smallest_text(page) -> float:
    return page.locator("figure.chart svg text.x, figure.chart svg text.y").evaluate_all(
        "ts => Math.min(...ts.filter(t => getComputedStyle(t).display !== 'none')"
        ".map(t => t.getBoundingClientRect().height))"
    )


def test_the_first_snapshot_from_the_page_then_a_readable_history(
    errors, signed_in, live_server, deployment, screenshot
):
    page = signed_in
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{live_server.url}/insights/")
    expect(page.get_by_test_id("insights-empty")).to_be_visible()
    page.get_by_role("button", name="Take a snapshot now").click()
    expect(page.locator("#toasts .toast").last).to_contain_text("Statistics snapshot #")
    expect(page.get_by_test_id("insights-task-keys")).to_have_text("15")
    assert StatsSnapshot.objects.get().trigger == "page"

    # The demo's history: two weeks of daily snapshots before the real one.
    StatsSnapshot.objects.all().delete()
    history.seed_history(days=14, actor=Actor.command())
    page.goto(f"{live_server.url}/insights/")
    labels = axis_labels(page, "task-keys")
    assert len(labels) == 5 and len(set(labels)) == 5, labels  # dates, each its own
    assert all(label.split()[0].isdigit() for label in labels), labels  # "18 Nov", the app's order
    assert smallest_text(page) >= MIN_TEXT_PX
    screenshot("insights-history-desktop")

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    assert smallest_text(page) >= MIN_TEXT_PX
    screenshot("insights-history-phone")
    phone = axis_labels(page, "task-keys")
    assert len(phone) == 3 and len(set(phone)) == 3, phone  # every other label, so they do not collide
    assert page.evaluate("document.documentElement.scrollWidth") <= 390

    # A run from the GC page: one more snapshot, and the run in the GC history.
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{live_server.url}/gc/")
    page.get_by_role("button", name="Run GC now…").click()
    page.locator("dialog#modal").get_by_role("button", name="Delete expired keys now").click()
    expect(page.locator("#toasts .toast").last).to_contain_text("deleted 12 expired task state rows")
    assert StatsSnapshot.objects.filter(trigger="gc", status="done").count() == 1
    page.goto(f"{live_server.url}/insights/")
    expect(page.get_by_test_id("insights-task-keys")).to_have_text("3")
    expect(page.get_by_test_id("chart-gc-rows")).to_be_visible()
    assert errors == []
