"""Issue 23 item 15, H3's parts, in a real browser: "Restore from file" previews what it would restore and acts
only on "Restore" (the file chosen on the page is sent again by static/js/restore.js), and "Expire now" is
disabled, saying why, on an expired key. No console error (CSP included) on the way."""

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.records.models import AuditEvent
from tests.conftest import BOTH_DATABASES
from tests.factories import make_deployment

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]


@pytest.fixture
def deployment():
    now = timezone.now()
    return make_deployment(
        {"live": 1, "stale": 2}, expires_at={"live": now + timedelta(days=1), "stale": now - timedelta(hours=2)}
    )


def test_restore_from_file_previews_then_restores(signed_in, live_server, deployment, tmp_path, console_errors):
    page = signed_in
    run = deployment["run"]
    entry = {"store": "task", "dag_id": run.dag_id, "run_id": run.run_id, "task_id": "train", "map_index": -1}
    keys = [{**entry, "key": "brought_back", "value": {"n": 1}, "expires_at": None}]
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"format": "statestore-admin/keys", "version": 1, "keys": keys}))
    events = AuditEvent.objects.count()
    page.goto(f"{live_server.url}/audit/")
    page.locator("summary", has_text="Restore keys from an export file").click()
    page.set_input_files("#restore-file", str(path))
    page.get_by_role("button", name="Preview the restore").click()
    dialog = page.locator("dialog#modal")
    expect(dialog.get_by_role("heading", name="Restore 1 key from keys.json?")).to_be_visible()
    expect(dialog.get_by_test_id("preview-counts")).to_contain_text("writes 1 key")
    expect(dialog.locator("td code", has_text="brought_back")).to_be_visible()
    expect(dialog.get_by_label("The same file again")).to_be_hidden()  # the page's file goes along
    assert not TaskStateStore.objects.filter(key="brought_back").exists() and AuditEvent.objects.count() == events
    dialog.get_by_role("button", name="Restore 1 key").click()
    expect(dialog.get_by_role("heading", name="Restored")).to_be_visible()
    expect(dialog.get_by_test_id("restored-key")).to_have_text("brought_back")
    assert TaskStateStore.objects.filter(key="brought_back").exists()


def test_expire_now_is_disabled_on_an_expired_key(signed_in, live_server, deployment, console_errors):
    page = signed_in
    page.goto(f"{live_server.url}/keys/task/{TaskStateStore.objects.get(key='stale').pk}/")
    button = page.get_by_test_id("expire-now")
    expect(button).to_be_disabled()
    expect(button).to_have_accessible_description(re.compile("Already expired"))
    page.goto(f"{live_server.url}/keys/task/{TaskStateStore.objects.get(key='live').pk}/")
    expect(page.get_by_test_id("expire-now")).to_be_enabled()
