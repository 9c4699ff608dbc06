"""Issue 14's writes in a real browser (#5, #6, #14, #15): the asset clear race with skewed clocks,
non-ASCII and right-to-left text, unchanged saves, duplicate keys and the edit conflict."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from tests.browser.conftest import row_action
from tests.conftest import BOTH_DATABASES
from tests.factories import make_asset_key, make_deployment

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
GRUSS = "Grüße مرحبا"
RLO = "\u202e"


@pytest.fixture
def deployment():
    made = make_deployment(
        {"greeting": {"text": GRUSS}, f"report{RLO}fdp.exe": f"x{RLO}y"},
        {"watermark": ("2026-11-30", "watcher")},
        run_id="manual__1",
        task_id="submit",
    )
    make_asset_key(
        made["asset"], key="ahead", value=1, kind="task", dag_id="etl_orders", run_id="manual__1", task_id="t"
    )
    # A writer whose clock runs two days ahead: its key must still be deletable.
    AssetStateStore.objects.filter(key="ahead").update(updated_at=timezone.now() + timedelta(days=2))
    return made


def toast(page):
    return page.locator("#toasts .toast-text").last  # its message, beside an Undo


def test_asset_clear_race_with_skewed_clocks(signed_in, live_server, deployment, screenshot):
    page, asset = signed_in, deployment["asset"]
    page.goto(f"{live_server.url}/assets/{asset.pk}/")
    page.get_by_role("button", name="Clear all state").click()
    dialog = page.locator("dialog#modal")
    expect(dialog.get_by_test_id("confirm-count")).to_have_text("2")
    # While the dialog is open, a writer with a slow clock adds a key dated an hour ago.
    AssetStateStore.objects.create(
        asset=asset,
        key="slow-clock",
        value="1",
        updated_at=timezone.now() - timedelta(hours=1),
        last_updated_by_kind="api",
    )
    dialog.get_by_role("button", name="Clear 2 keys").click()
    expect(toast(page)).to_have_text(
        "Cleared the state of asset 'orders_raw': deleted 2 keys; kept 1 key that changed after the list was shown "
        "(1 added since): 'slow-clock'."
    )
    screenshot("asset-clear-race")
    assert list(AssetStateStore.objects.values_list("key", flat=True)) == ["slow-clock"]  # "ahead" went too
    expect(page.locator("#keys-panel")).to_contain_text("slow-clock")


def test_non_ascii_and_right_to_left_text(signed_in, live_server, deployment, screenshot):
    page, run = signed_in, deployment["run"]
    page.goto(f"{live_server.url}/runs/{run.pk}/tasks/submit/")
    greeting = page.locator("tr", has=page.locator("code", has_text="greeting"))
    expect(greeting.locator("td.value")).to_contain_text(f'{{"text": "{GRUSS}"}}')
    evil = page.locator("td.key", has=page.locator(".hidden-char"))
    expect(evil.locator("bdi")).to_have_count(1)
    expect(evil.locator(".hidden-char")).to_have_attribute("title", "U+202E RIGHT-TO-LEFT OVERRIDE")
    # No override acts on the page (it would show "reportexe.pdf"): the key reads as written, badge included.
    assert RLO not in evil.inner_text() and evil.inner_text().strip() == "report\\u202efdp.exe"
    screenshot("non-ascii-and-rtl")
    row = page.locator("tr", has=evil)
    row_action(row, "Delete").click()
    dialog = page.locator("dialog#modal")
    expect(dialog.locator(".confirm-list .hidden-char").first).to_be_visible()
    expect(dialog.locator(".confirm-list")).to_contain_text("x\\u202ey")
    dialog.get_by_role("button", name="Cancel").click()
    page.goto(f"{live_server.url}/search/?key=greeting")
    expect(page.locator("td.value").first).to_contain_text(GRUSS)


def open_editor(page, live_server, deployment, key="greeting"):
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/submit/")
    row_action(page.locator("tr", has=page.locator("code", has_text=key)), "Edit").click()
    dialog = page.locator("dialog#modal")
    expect(dialog.locator("textarea")).to_be_visible()
    return dialog


def test_an_unchanged_save_keeps_updated_at(signed_in, live_server, deployment):
    before = TaskStateStore.objects.get(key="greeting")
    dialog = open_editor(signed_in, live_server, deployment)
    expect(dialog.locator("textarea")).to_have_value(json.dumps({"text": GRUSS}, indent=2, ensure_ascii=False))
    dialog.get_by_role("button", name="Save value").click()
    expect(toast(signed_in)).to_have_text("The value of 'greeting' is unchanged: nothing was written.")
    assert TaskStateStore.objects.get(pk=before.pk).updated_at == before.updated_at


def test_duplicate_keys_are_refused(signed_in, live_server, deployment):
    dialog = open_editor(signed_in, live_server, deployment)
    dialog.locator("textarea").fill('{"a": 1, "a": 2}')
    dialog.get_by_role("button", name="Save value").click()
    expect(dialog.locator(".field-error")).to_contain_text('The object names the key "a" twice')
    assert json.loads(TaskStateStore.objects.get(key="greeting").value) == {"text": GRUSS}


def test_the_conflict_dialog_offers_both_values(signed_in, live_server, deployment, screenshot):
    page = signed_in
    dialog = open_editor(page, live_server, deployment)
    TaskStateStore.objects.filter(key="greeting").update(value='{"text": "by a task"}', updated_at=timezone.now())
    dialog.locator("textarea").fill('{"text": "mine"}')
    dialog.get_by_role("button", name="Save value").click()
    expect(dialog.get_by_test_id("conflict")).to_be_visible()
    expect(dialog.get_by_test_id("conflict-current")).to_contain_text('"text": "by a task"')
    expect(dialog.locator("textarea")).to_have_value('{"text": "mine"}')
    screenshot("edit-conflict")
    dialog.get_by_role("button", name="Save mine over the current value").click()
    expect(toast(page)).to_have_text("Saved the value of 'greeting'.")
    assert TaskStateStore.objects.get(key="greeting").value == '{"text": "mine"}'
    # Again, and this time keep the task's value.
    dialog = open_editor(page, live_server, deployment)
    TaskStateStore.objects.filter(key="greeting").update(value='{"text": "task again"}', updated_at=timezone.now())
    dialog.locator("textarea").fill('{"text": "mine again"}')
    dialog.get_by_role("button", name="Save value").click()
    dialog.get_by_role("button", name="Keep the current value").click()
    expect(dialog).to_be_hidden()
    expect(toast(page)).to_have_text("Kept the current value of 'greeting'; nothing was written.")
    assert TaskStateStore.objects.get(key="greeting").value == '{"text": "task again"}'


def test_a_key_deleted_while_its_editor_is_open_closes_the_dialog(signed_in, live_server, deployment):
    page = signed_in
    dialog = open_editor(page, live_server, deployment)
    TaskStateStore.objects.filter(key="greeting").delete()
    dialog.locator("textarea").fill('{"text": "mine"}')
    dialog.get_by_role("button", name="Save value").click()
    expect(dialog).to_be_hidden()
    expect(toast(page)).to_contain_text("The key was deleted after you opened it: nothing was saved.")
