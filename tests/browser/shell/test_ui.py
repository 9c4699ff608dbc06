"""What an operator does in a real browser: sign in, browse, edit, expire, clear, and stay safe from user data."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from tests.browser.conftest import row_action
from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
XSS = "<script>alert(1)</script>"


@pytest.fixture
def deployment(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    now = timezone.now()
    run = dag_run_factory(dag_id="etl_orders", run_id="scheduled__2026-11-29T00:00:00+00:00", state="running")
    for map_index in (0, 1):
        task_instance_factory(run, task_id="train", map_index=map_index)
        task_key_factory(
            run,
            task_id="train",
            map_index=map_index,
            key="checkpoint",
            value={"epoch": map_index},
            expires_at=now + timedelta(days=30),
        )
    task_instance_factory(run, task_id="submit")
    task_key_factory(run, task_id="submit", key="job_id", value={"job": "spark-7"}, expires_at=now + timedelta(days=3))
    task_key_factory(run, task_id="submit", key=XSS, value=XSS, expires_at=None)
    asset = asset_factory(name="orders_raw", uri="s3://warehouse/orders")
    asset_key_factory(asset, key="watermark", value="2026-11-30", kind="watcher")
    asset_key_factory(asset, key="cursor", value={"id": 991}, kind="api")
    return {"run": run, "asset": asset}


def toast(page):
    return page.locator("#toasts .toast").last


def test_sign_in_and_browse_dag_run_task_instance(signed_in, live_server, deployment, screenshot):
    page = signed_in
    expect(page.get_by_test_id("task-keys")).to_have_text("4")
    expect(page.get_by_test_id("asset-keys")).to_have_text("2")
    expect(page.locator("table.largest")).to_be_visible()  # loaded by htmx after the page
    screenshot("overview")
    page.get_by_role("link", name="DAGs", exact=True).click()
    page.get_by_role("link", name="etl_orders").click()
    screenshot("dag-runs")
    page.get_by_role("link", name="scheduled__2026-11-29T00:00:00+00:00").click()
    expect(page.locator("h1")).to_have_text("scheduled__2026-11-29T00:00:00+00:00")
    expect(page.locator("td.map-index a", has_text="[1]").first).to_be_visible()  # one table, a map index column
    screenshot("dag-run")
    page.get_by_role("heading", name="submit").get_by_role("link", name="submit", exact=True).click()
    expect(page.locator("h1")).to_contain_text("submit")
    expect(page.locator("td.key code", has_text="job_id")).to_be_visible()
    screenshot("task-instance")


def test_edit_a_value(signed_in, live_server, deployment):
    page = signed_in
    run = deployment["run"]
    page.goto(f"{live_server.url}/runs/{run.pk}/tasks/submit/")
    row = page.locator("tr", has=page.locator("code", has_text="job_id"))
    row_action(row, "Edit").click()
    dialog = page.locator("dialog#modal")
    expect(dialog).to_be_visible()
    dialog.locator("textarea").fill('{"job": "spark-8",')
    dialog.get_by_role("button", name="Save value").click()
    expect(dialog.locator(".field-error")).to_contain_text("Not valid JSON")
    dialog.locator("textarea").fill('{"job": "spark-8"}')
    dialog.get_by_role("button", name="Save value").click()
    expect(dialog).to_be_hidden()
    expect(toast(page)).to_contain_text("Saved the value of 'job_id'")
    expect(row.locator("td.value")).to_contain_text('{"job": "spark-8"}')
    assert TaskStateStore.objects.get(key="job_id").value == '{"job": "spark-8"}'


def test_expire_a_key(signed_in, live_server, deployment, screenshot):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/submit/")
    row = page.locator("tr", has=page.locator("code", has_text="job_id"))
    expect(row.locator(".badge")).to_have_text("live")
    row_action(row, "Expire now").click()
    dialog = page.locator("dialog#modal")
    expect(dialog.get_by_test_id("confirm-count")).to_have_text("1")
    screenshot("confirm-expire")
    dialog.get_by_role("button", name="Expire 1 key").click()
    expect(toast(page).locator(".toast-text")).to_have_text("Expired 1 key.")
    expect(row.locator(".badge")).to_have_text("expired")
    assert TaskStateStore.objects.get(key="job_id").expires_at <= timezone.now()


def test_clear_an_assets_state(signed_in, live_server, deployment, screenshot):
    page = signed_in
    page.goto(f"{live_server.url}/assets/{deployment['asset'].pk}/")
    screenshot("asset")
    page.get_by_role("button", name="Clear all state").click()
    dialog = page.locator("dialog#modal")
    expect(dialog.locator("h2")).to_have_text("Clear all state of asset orders_raw?")
    expect(dialog.get_by_test_id("confirm-count")).to_have_text("2")
    expect(dialog.locator(".confirm-scroll table")).to_contain_text("watermark")
    expect(dialog.locator(".confirm-scroll table")).to_contain_text('{"id": 991}')
    screenshot("confirm-clear-asset")
    dialog.get_by_role("button", name="Clear 2 keys").click()
    expect(toast(page).locator(".toast-text")).to_have_text("Cleared the state of asset 'orders_raw': deleted 2 keys.")
    expect(page.locator("#keys-panel")).to_contain_text("No keys.")
    assert not AssetStateStore.objects.exists()


def test_user_data_renders_as_text(signed_in, live_server, deployment, screenshot):
    page = signed_in
    alerts = []
    page.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/submit/")
    row = page.locator("tr", has=page.locator("td.key", has_text=XSS))
    expect(row.locator("td.key code")).to_have_text(XSS)
    expect(row.locator("td.value code")).to_have_text(f'"{XSS}"')
    row.locator("td.key a").click()
    expect(page.locator("h1 code")).to_have_text(XSS)
    expect(page.locator(".json-tree")).to_have_text(f'"{XSS}"')
    screenshot("key-detail")
    page.goto(f"{live_server.url}/search/?key=script")
    expect(page.locator("td.key code")).to_have_text(XSS)
    assert alerts == []
    assert page.evaluate("document.querySelectorAll('main script').length") == 0


def test_keyboard_bulk_selection(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/")
    page.locator("th.select input").first.check()
    page.get_by_role("toolbar", name="Selected keys").get_by_role("button", name="Delete", exact=True).focus()
    page.keyboard.press("Enter")
    dialog = page.locator("dialog#modal")
    expect(dialog.get_by_test_id("confirm-count")).to_have_text("2")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert TaskStateStore.objects.count() == 4
