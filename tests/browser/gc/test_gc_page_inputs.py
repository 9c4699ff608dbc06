"""The GC page's cutoff and DAG fields in a real browser (issue 23, items 2, 11 and 12): typing an age or a date
chooses its option, so the preview counts for what was typed; a value left in another option's field is not
sent; the DAG field states its rule and lists the DAGs; the "Before" input is a date-time input in the reader's
zone, with the zone shown; a confirmation with nothing to delete offers no delete. No console error."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.gc.test_gc_page_in_browser import operator  # noqa: F401 (an Admin, who may run GC)
from tests.browser.shell.test_csp import REPORT_VIOLATIONS
from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]


@pytest.fixture
def deployment(dag_run_factory, task_key_factory):
    """Keys that expired 3 days and 1 hour ago, in two DAGs, and a live one."""
    now = timezone.now()
    for dag_id, count, age in (("etl_orders", 5, timedelta(days=3)), ("ml_training", 2, timedelta(hours=1))):
        run = dag_run_factory(dag_id=dag_id)
        for i in range(count):
            task_key_factory(run, task_id="extract", key=f"cursor_{i}", expires_at=now - age)
        task_key_factory(run, task_id="extract", key="watermark", expires_at=now + timedelta(days=7))
    return now


@pytest.fixture
def errors(page):
    found = []
    page.add_init_script(REPORT_VIOLATIONS)
    page.expose_function("reportCspViolation", lambda text: found.append(text))
    page.on("console", lambda msg: msg.type == "error" and found.append(msg.text))
    page.on("pageerror", lambda exc: found.append(str(exc)))
    return found


def test_typing_chooses_the_cutoff_and_the_preview_counts_for_it(errors, signed_in, live_server, deployment):
    page = signed_in
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{live_server.url}/gc/")
    expect(page.get_by_test_id("gc-preview-count")).to_have_text("7")
    expect(page.locator("input[type=radio][name=cutoff][value=now]")).to_be_checked()

    page.locator("#gc-age").press_sequentially("20")  # typed, as a person does
    expect(page.locator("input[type=radio][name=cutoff][value=age]")).to_be_checked()
    page.select_option("#gc-unit", "hours")
    page.get_by_role("button", name="Preview").click()
    expect(page).to_have_url(re.compile(r"cutoff=age&age=20&unit=hours"))
    expect(page.get_by_test_id("gc-preview-count")).to_have_text("5")  # not the 7 of "now"

    # Back to "Now" with the age still filled in: the age is not sent, so "now" is counted, not refused.
    page.check("input[type=radio][name=cutoff][value=now]")
    page.get_by_role("button", name="Preview").click()
    expect(page).not_to_have_url(re.compile(r"age=20"))
    expect(page.get_by_test_id("gc-preview-count")).to_have_text("7")

    # A date: the input is the browser's date-time input, its zone shown; typing into it chooses "Before".
    expect(page.locator("#gc-before")).to_have_attribute("type", "datetime-local")
    expect(page.locator("#gc-before-zone")).to_have_text(re.compile(r"\S"))
    two_days_ago = timezone.localtime(deployment - timedelta(days=2), timezone.get_fixed_timezone(0))
    page.evaluate("() => { document.cookie = 'tz_utc=1; path=/'; }")
    page.reload()
    expect(page.locator("#gc-before-zone")).to_have_text("UTC")
    page.fill("#gc-before", two_days_ago.strftime("%Y-%m-%dT%H:%M"))
    expect(page.locator("input[type=radio][name=cutoff][value=date]")).to_be_checked()
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_test_id("gc-preview-count")).to_have_text("5")
    expect(page.locator("#gc-before")).to_have_value(two_days_ago.strftime("%Y-%m-%dT%H:%M"))

    # The DAG field: its rule beside it, and the existing DAGs to pick from.
    expect(page.locator("#gc-dag-help")).to_contain_text("exact DAG id")
    assert page.locator("#gc-dag-choices option").evaluate_all("o => o.map(x => x.value)") == [
        "etl_orders",
        "ml_training",
    ]
    assert errors == []


def test_a_confirmation_with_nothing_to_delete_offers_only_to_close(errors, signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/gc/?cutoff=age&age=30&unit=days")
    expect(page.get_by_test_id("gc-preview-count")).to_have_text("0")
    page.get_by_role("button", name="Run GC now…").click()
    dialog = page.locator("dialog#modal")
    expect(dialog.get_by_role("heading", name="Nothing to delete")).to_be_visible()
    expect(dialog.get_by_role("button", name="Delete expired keys now")).to_have_count(0)
    dialog.get_by_role("button", name="Cancel").click()
    page.goto(f"{live_server.url}/gc/")
    page.get_by_role("button", name="Run GC now…").click()
    expect(dialog.get_by_test_id("gc-confirm-rows")).to_contain_text("7 keys have expired")
    expect(dialog.get_by_role("button", name="Delete expired keys now")).to_be_visible()
    assert errors == []
