"""The expiry and add-key dialogs in Chromium, with the browser in Berlin (issue 14, items 10 and 11): the
current expiry labelled, the date-time picker and its quick choices in the user's zone, a past time
confirmed on purpose, messages for people; errors on their field, the map indexes the task has, keys with
blanks around them."""

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
BERLIN = "Europe/Berlin"


@pytest.fixture
def browser_context_args(browser_context_args):
    return {**browser_context_args, "timezone_id": BERLIN}


@pytest.fixture
def deployment(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl_orders", run_id="scheduled__2026-11-29T00:00:00+00:00", state="success")
    for map_index in (0, 1):
        task_instance_factory(run, task_id="train", map_index=map_index)
    task_instance_factory(run, task_id="submit")
    soon = timezone.now() + timedelta(days=3)
    task_key_factory(run, task_id="submit", key="job_id", value={"job": 7}, expires_at=soon)
    task_key_factory(run, task_id="submit", key="forever", value=1, expires_at=None)
    asset = asset_factory(name="orders_raw", uri="s3://warehouse/orders")
    asset_key_factory(asset, key="cursor", value={"id": 991}, kind="api")
    return {"run": run, "asset": asset}


def toast(page):
    return page.locator("#toasts .toast").last


def open_expiry(page, live_server, name):
    page.goto(f"{live_server.url}/keys/task/{TaskStateStore.objects.get(key=name).pk}/")
    page.get_by_role("button", name="Set expiry").click()
    dialog = page.locator("dialog#modal")
    expect(dialog.locator("h2")).to_contain_text("Expiry of")
    return dialog


def open_add(page, url):
    page.goto(url)
    page.get_by_role("button", name="Add key").click()
    dialog = page.locator("dialog#modal")
    expect(dialog.locator("h2")).to_contain_text("Add a key")
    return dialog


# 10 ---------------------------------------------------------------------------------------------------------
def test_the_expiry_dialog_labels_the_current_expiry_and_picks_in_the_users_zone(
    signed_in, live_server, deployment, screenshot
):
    page = signed_in
    dialog = open_expiry(page, live_server, "forever")
    expect(dialog.get_by_test_id("current-expiry")).to_have_text(
        "Current expiry: never (the key is kept until someone deletes it)."
    )
    dialog.get_by_role("button", name="Cancel").click()

    dialog = open_expiry(page, live_server, "job_id")
    expires = TaskStateStore.objects.get(key="job_id").expires_at
    local = expires.astimezone(ZoneInfo(BERLIN))
    expect(dialog.get_by_test_id("current-expiry")).to_contain_text(f"Current expiry: {local.day} {local:%b %Y, %H:%M}")
    title = dialog.get_by_test_id("current-expiry").locator("time").get_attribute("title")
    assert f"{expires.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC" in title  # UTC on hover
    picker = dialog.get_by_label("Expires at")
    expect(picker).to_have_attribute("type", "datetime-local")
    expect(picker).to_have_value(f"{local:%Y-%m-%dT%H:%M}")  # Berlin's time, not UTC's
    expect(dialog).to_contain_text(f"In your time zone, {BERLIN}.")
    screenshot("expiry-dialog")

    dialog.get_by_role("button", name="In 7 days").click()
    expect(dialog.get_by_label("At a date and time")).to_be_checked()
    wanted = datetime.now(ZoneInfo(BERLIN)) + timedelta(days=7)
    expect(picker).to_have_value(re.compile(f"^{wanted:%Y-%m-%d}T"))
    dialog.get_by_role("button", name="Set expiry").click()
    expect(dialog).to_be_hidden()
    expect(toast(page)).to_contain_text(f"'job_id' expires on {wanted.day} {wanted:%b %Y}, ")
    expect(toast(page)).not_to_contain_text("+00:00")
    stored = TaskStateStore.objects.get(key="job_id").expires_at
    assert abs(stored - (timezone.now() + timedelta(days=7))) < timedelta(minutes=2)


def test_a_past_expiry_warns_and_needs_a_confirmation(signed_in, live_server, deployment, screenshot):
    page = signed_in
    before = TaskStateStore.objects.get(key="job_id").expires_at
    dialog = open_expiry(page, live_server, "job_id")
    warning = dialog.locator("[data-past-warning]")
    expect(warning).to_be_hidden()
    past = datetime.now(ZoneInfo(BERLIN)) - timedelta(days=1)
    dialog.get_by_label("Expires at").fill(f"{past:%Y-%m-%dT%H:%M}")
    expect(warning).to_be_visible()  # as soon as it is picked
    expect(warning).to_contain_text("the next garbage collection deletes the key")
    dialog.get_by_role("button", name="Set expiry").click()
    expect(dialog.locator("#id_expires_at_error")).to_contain_text("This time has passed")
    expect(dialog.get_by_text("This time has passed")).to_have_count(1)  # issue 23, item 11: said once
    screenshot("expiry-dialog-past")
    assert TaskStateStore.objects.get(key="job_id").expires_at == before
    dialog.get_by_label("Yes, expire it now").check()
    dialog.get_by_role("button", name="Set expiry").click()
    expect(dialog).to_be_hidden()
    expect(toast(page)).to_contain_text("'job_id' has expired (")
    assert TaskStateStore.objects.get(key="job_id").expires_at < timezone.now()


def test_never_is_offered_once_as_an_option(signed_in, live_server, deployment):
    """Issue 23, item 11: "Never" is one of the expiry options, not also a quick choice."""
    page = signed_in
    dialog = open_expiry(page, live_server, "job_id")
    expect(dialog.get_by_role("button", name="Never", exact=True)).to_have_count(0)
    dialog.get_by_label("Never expires").check()
    dialog.get_by_role("button", name="Set expiry").click()
    expect(toast(page)).to_contain_text("'job_id' never expires.")
    assert TaskStateStore.objects.get(key="job_id").expires_at is None


# 11 ---------------------------------------------------------------------------------------------------------
def test_add_key_offers_the_tasks_map_indexes_and_shows_errors_on_the_field(signed_in, live_server, deployment):
    page = signed_in
    run = deployment["run"]
    dialog = open_add(page, f"{live_server.url}/runs/{run.pk}/tasks/submit/")
    select = dialog.get_by_label("Map index")
    expect(select.locator("option")).to_have_text(["−1 (not mapped)"])
    # A map index the task does not have (as a stale or hand-made form would send): an error on the field.
    select.evaluate("s => { s.add(new Option('7', '7')); s.value = '7'; }")
    dialog.get_by_label("Key", exact=True).fill("offset")
    dialog.get_by_label("Value").fill("1")
    dialog.get_by_role("button", name="Add key").click()
    expect(dialog.locator("#id_map_index_error")).to_have_text(
        "No map index 7: submit is not mapped in this run: its only map index is −1."
    )
    expect(dialog).not_to_contain_text("dag_id=")
    expect(page.locator("#toasts .toast")).to_have_count(0)
    assert not TaskStateStore.objects.filter(key="offset").exists()
    dialog.get_by_role("button", name="Cancel").click()

    dialog = open_add(page, f"{live_server.url}/runs/{run.pk}/tasks/train/?map_index=1")
    expect(dialog.get_by_label("Map index").locator("option")).to_have_text(["0", "1"])
    expect(dialog.get_by_label("Map index")).to_have_value("1")
    dialog.get_by_label("Key", exact=True).fill("offset")
    dialog.get_by_label("Value").fill("1")
    dialog.get_by_role("button", name="Add key").click()
    expect(toast(page)).to_contain_text("Added 'offset'.")
    assert TaskStateStore.objects.get(key="offset").map_index == 1


def test_a_key_with_blanks_around_it_needs_a_confirmation(signed_in, live_server, deployment, screenshot):
    page = signed_in
    dialog = open_add(page, f"{live_server.url}/runs/{deployment['run'].pk}/tasks/submit/")
    expect(dialog.get_by_label("Keep the blanks")).to_have_count(0)
    dialog.get_by_label("Key", exact=True).fill(" job_id")
    dialog.get_by_label("Value").fill('"x"')
    dialog.get_by_role("button", name="Add key").click()
    expect(dialog.locator("#id_key_error")).to_contain_text("The key starts with a blank (' job_id')")
    screenshot("add-key-blanks")
    assert not TaskStateStore.objects.filter(key=" job_id").exists()
    dialog.get_by_label("Keep the blanks").check()
    dialog.get_by_role("button", name="Add key").click()
    expect(toast(page)).to_contain_text("Added ' job_id'.")
    assert TaskStateStore.objects.filter(key=" job_id").exists()


def test_the_asset_add_dialog_shows_its_errors_on_the_key(signed_in, live_server, deployment):
    page = signed_in
    asset = deployment["asset"]
    dialog = open_add(page, f"{live_server.url}/assets/{asset.pk}/")
    dialog.get_by_label("Key", exact=True).fill("cursor")
    dialog.get_by_label("Value").fill("1")
    dialog.get_by_role("button", name="Add key").click()
    expect(dialog.locator("#id_key_error")).to_contain_text("The key 'cursor' already exists on this asset")
    dialog.get_by_label("Key", exact=True).fill("cursor ")
    dialog.get_by_role("button", name="Add key").click()
    expect(dialog.locator("#id_key_error")).to_contain_text("The key ends with a blank ('cursor ')")
    dialog.get_by_label("Keep the blanks").check()
    dialog.get_by_role("button", name="Add key").click()
    expect(toast(page)).to_contain_text("Added 'cursor '.")
    assert AssetStateStore.objects.filter(asset=asset, key="cursor ").exists()
