"""One date-time input everywhere (issue 23, item 11), in a real browser in Tokyo's time zone: the expiry
dialog, the GC page's "Before" and the Audit page's "Since" are the browser's date-time input, in the
reader's zone, with the zone named beside it and the time picked written as the app writes times
("31 Dec 2026, 22:00"); no placeholder that looks like a value; a wall time read in that zone filters as
it was meant. No console error, CSP included."""

import re
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.access.actors import Actor
from statestore_admin.records.models import AuditEvent
from statestore_admin.state import services
from tests.browser.shell.test_csp import REPORT_VIOLATIONS
from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
TOKYO = "Asia/Tokyo"


@pytest.fixture
def browser_context_args(browser_context_args):
    return {**browser_context_args, "timezone_id": TOKYO}


@pytest.fixture
def errors(page):
    found = []
    page.add_init_script(REPORT_VIOLATIONS)
    page.expose_function("reportCspViolation", lambda text: found.append(text))
    page.on("console", lambda msg: msg.type == "error" and found.append(msg.text))
    page.on("pageerror", lambda exc: found.append(str(exc)))
    return found


@pytest.fixture
def deployment(operator, dag_run_factory, task_instance_factory, task_key_factory):
    """Two audited expiries, one 3 days ago and one now; expired keys for the GC page."""
    now = timezone.now()
    run = dag_run_factory(dag_id="etl_orders")
    task_instance_factory(run, task_id="extract")
    for i in range(3):
        task_key_factory(run, task_id="extract", key=f"old_{i}", expires_at=now - timedelta(days=3))
    key = task_key_factory(run, task_id="extract", key="cursor", expires_at=now + timedelta(days=2))
    actor = Actor(via="ui", user=operator)
    services.expire_task_keys(actor=actor, selection=services.TaskSelection(ids=(key.pk,)))
    event = AuditEvent.objects.latest("id")
    AuditEvent.objects.filter(pk=event.pk).update(at=now - timedelta(days=3))
    services.expire_task_keys(actor=actor, selection=services.TaskSelection(ids=(key.pk,)))
    return {"now": now, "key": key}


def test_the_gc_and_audit_date_time_inputs_are_in_the_readers_zone(errors, signed_in, live_server, deployment):
    page = signed_in
    tokyo_two_days_ago = (deployment["now"] - timedelta(days=2)).astimezone(ZoneInfo(TOKYO))
    wall = tokyo_two_days_ago.strftime("%Y-%m-%dT%H:%M")
    shown = f"{tokyo_two_days_ago.day} {tokyo_two_days_ago:%b %Y, %H:%M}"

    page.goto(f"{live_server.url}/gc/")
    before = page.locator("#gc-before")
    expect(before).to_have_attribute("type", "datetime-local")
    assert before.get_attribute("placeholder") is None
    expect(page.locator("#gc-before-zone")).to_have_text(TOKYO)
    before.fill(wall)
    expect(page.locator("[data-shown-as=gc-before]")).to_have_text(shown)
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_test_id("gc-preview-count")).to_have_text("3")  # the keys of 3 days ago, read in Tokyo
    expect(page.locator("[data-shown-as=gc-before]")).to_have_text(shown)  # shown again as picked

    page.goto(f"{live_server.url}/audit/")
    since = page.locator("#filter-since")
    expect(since).to_have_attribute("type", "datetime-local")
    assert since.get_attribute("placeholder") is None
    expect(page.locator("#filter-since-zone")).to_have_text(TOKYO)
    expect(page.locator("#filter-until-zone")).to_have_text(TOKYO)
    since.fill(wall)
    expect(page.locator("[data-shown-as=filter-since]")).to_have_text(shown)
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"since=" + re.escape(wall.replace(":", "%3A"))))
    newest = AuditEvent.objects.latest("id")
    rows = page.locator("table.audit tbody tr")
    expect(rows).to_have_count(1)  # the event of now, not the one of 3 days ago
    expect(rows.first).to_contain_text(f"#{newest.pk}")
    assert errors == []


def test_the_expiry_dialog_writes_the_time_picked_the_apps_way(errors, signed_in, live_server, deployment):
    page = signed_in
    key = deployment["key"]
    page.goto(f"{live_server.url}/keys/task/{key.pk}/")
    page.get_by_role("button", name="Set expiry").click()
    dialog = page.locator("dialog#modal")
    picker = dialog.get_by_label("Expires at")
    expect(picker).to_have_attribute("type", "datetime-local")
    picker.fill("2026-12-31T22:00")
    expect(dialog.locator("[data-shown-as]")).to_have_text("31 Dec 2026, 22:00")
    expect(dialog.get_by_text(f"In your time zone, {TOKYO}.")).to_be_visible()
    expect(dialog.get_by_role("button", name="Never", exact=True)).to_have_count(0)  # an option, not also a button
    expect(dialog.get_by_label("Never expires")).to_have_count(1)
    assert errors == []
