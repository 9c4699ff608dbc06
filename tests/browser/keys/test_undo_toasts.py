"""Undo where you are (issue 23 item 6), in a real browser: the toast of a delete, clear or expire has an Undo
that restores the change in place, the "Restored" dialog links to the key, an earlier link to a deleted and
restored key still opens it, and the Audit list names the keys of each event. No console error on the way."""

import re
from datetime import timedelta

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from tests.browser.conftest import SCREENSHOTS, row_action
from tests.conftest import BOTH_DATABASES
from tests.factories import make_deployment

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]


@pytest.fixture
def deployment():
    later = timezone.now() + timedelta(days=30)
    names = ("checkpoint", "job_id", "offset", "cursor")
    return make_deployment(
        {name: {"name": name} for name in names}, {"watermark": ("2026-11-30", "watcher")}, expires_at=later
    )


def row_of(page, key: str):
    return page.locator("#keys-panel tr", has=page.locator("td.key code", has_text=re.compile(f"^{key}$")))


def undo_in_toast(page, text: str):
    toast = page.locator("#toasts .toast", has_text=text).last
    expect(toast).to_be_visible()
    toast.get_by_role("button", name="Undo").click()
    dialog = page.locator("dialog#modal")
    expect(dialog.get_by_role("heading", name="Restored")).to_be_visible()
    return dialog


def test_undo_an_expire_from_the_toast_on_the_task_page(signed_in, live_server, deployment, console_errors):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/train/")
    row_action(row_of(page, "job_id"), "Expire now: job_id").click()
    page.locator("dialog#modal").get_by_role("button", name=re.compile("Expire 1 key")).click()
    expect(row_of(page, "job_id").locator(".badge")).to_have_text("expired")
    dialog = undo_in_toast(page, "Expired 1 key")
    expect(dialog.get_by_test_id("restored-key")).to_have_text("job_id")
    dialog.get_by_role("button", name="Close").click()
    expect(row_of(page, "job_id").locator(".badge")).not_to_have_text("expired")  # the page refreshed
    assert TaskStateStore.objects.get(key="job_id").expires_at > timezone.now()


def test_undo_a_delete_from_the_key_page_and_follow_the_old_link(signed_in, live_server, deployment, console_errors):
    page = signed_in
    old = TaskStateStore.objects.get(key="checkpoint")
    page.goto(f"{live_server.url}/keys/task/{old.pk}/")
    page.locator(".toolbar").get_by_role("button", name="Delete").click()
    page.locator("dialog#modal").get_by_role("button", name=re.compile("Delete 1 key")).click()
    expect(page.locator("h1")).to_contain_text("train")  # moved to the task instance: the key is gone
    expect(row_of(page, "checkpoint")).to_have_count(0)
    dialog = undo_in_toast(page, "Deleted 1 key")  # the toast after the move, rendered by the server
    expect(row_of(page, "checkpoint")).to_have_count(1)
    dialog.get_by_test_id("restored-key").click()
    new = TaskStateStore.objects.get(key="checkpoint")
    assert new.pk != old.pk
    expect(page).to_have_url(re.compile(f"/keys/task/{new.pk}/$"))
    page.goto(f"{live_server.url}/keys/task/{old.pk}/")  # an earlier link: follows the key
    expect(page).to_have_url(re.compile(f"/keys/task/{new.pk}/$"))
    expect(page.locator("h1")).to_have_text("checkpoint")


def test_undo_a_clear_and_an_asset_delete(signed_in, live_server, deployment, console_errors):
    page = signed_in
    page.goto(f"{live_server.url}/assets/{deployment['asset'].pk}/")
    row_of(page, "watermark").get_by_role("button", name="Delete watermark").click()
    page.locator("dialog#modal").get_by_role("button", name="Delete 1 key").click()
    expect(row_of(page, "watermark")).to_have_count(0)
    dialog = undo_in_toast(page, "Deleted 1 key")
    dialog.get_by_role("button", name="Close").click()
    expect(row_of(page, "watermark")).to_have_count(1)
    assert AssetStateStore.objects.filter(key="watermark").exists()


def test_the_audit_list_names_the_keys(signed_in, live_server, deployment, console_errors):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/train/")
    page.get_by_role("button", name=re.compile("^Clear")).first.click()
    page.locator("dialog#modal").get_by_role("button", name=re.compile("Delete 4 keys")).click()
    expect(page.locator("#toasts .toast", has_text="Deleted 4 keys")).to_be_visible()
    page.goto(f"{live_server.url}/audit/")
    names = page.get_by_test_id("event-keys").first
    expect(names).to_contain_text("and 1 more")
    expect(names.locator("code")).to_have_count(3)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_on_a_phone_the_undo_toast_and_the_value_tools_fit(browser, live_server, operator, deployment, scheme):
    context = browser.new_context(color_scheme=scheme, viewport={"width": 390, "height": 844})
    page = context.new_page()
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", operator.username)
    page.fill("#id_password", operator.raw_password)
    page.click("form.login button[type=submit]")  # not the header's language menu
    page.goto(f"{live_server.url}/keys/task/{TaskStateStore.objects.get(key='offset').pk}/")
    expect(page.locator("[data-json-tools]")).to_be_visible()
    page.get_by_test_id("expire-now").click()
    page.locator("dialog#modal").get_by_role("button", name=re.compile("Expire 1 key")).click()
    toast = page.locator("#toasts .toast", has_text="Expired 1 key")
    expect(toast.get_by_role("button", name="Undo")).to_be_visible()
    box = toast.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    violations = Axe().run(page).response["violations"]
    assert not [v["id"] for v in violations if v["impact"] in ("serious", "critical")]
    page.screenshot(path=str(SCREENSHOTS / f"undo-toast-phone-{scheme}.png"), full_page=True)
    context.close()
    assert errors == []
