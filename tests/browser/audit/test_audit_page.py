"""The audit trail in a real browser: delete a key, find the change on the Audit page, restore it.

Screenshots go to test-artifacts/screenshots/; with UPDATE_DOC_SCREENSHOTS=1 the README's
docs/screenshots/audit.png and audit-event.png are refreshed too.
"""

import os
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.records.models import AuditEvent
from tests.browser.conftest import row_action
from tests.conftest import BOTH_DATABASES
from tests.factories import make_deployment

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
DOCS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"


@pytest.fixture
def deployment():
    expires = timezone.now() + timedelta(days=3)
    job = {"job": "spark-7", "cluster": "emr-prod", "attempt": 1, "submitted": "2026-11-29T00:04:11Z"}
    made = make_deployment(
        {"job_id": job, "offset": 1200},
        expires_at={"job_id": expires},
        run_id="scheduled__2026-11-29T00:00:00+00:00",
        state="running",
        task_id="submit",
    )
    return {"run": made["run"], "expires": expires}


def document(screenshot, name: str) -> None:
    path = screenshot(name)
    if os.environ.get("UPDATE_DOC_SCREENSHOTS") == "1":
        shutil.copyfile(path, DOCS / f"{name}.png")


def test_delete_find_the_event_and_restore(signed_in, live_server, deployment, screenshot):
    page = signed_in
    run = deployment["run"]
    dialog = page.locator("dialog#modal")
    instance = f"{live_server.url}/runs/{run.pk}/tasks/submit/"
    page.goto(instance)
    row = page.locator("tr", has=page.locator("td.key code", has_text="job_id"))

    # An edit, so that the trail has a diff of a value, then the delete to undo.
    row_action(row, "Edit").click()
    dialog.locator("textarea").fill(
        '{"job": "spark-8", "cluster": "emr-prod", "attempt": 2, "submitted": "2026-11-29T00:09:52Z"}'
    )
    dialog.get_by_role("button", name="Save value").click()
    expect(dialog).to_be_hidden()
    expect(row.locator("td.value")).to_contain_text("spark-8")  # the panel refreshed: its rows are the new ones
    row_action(row, "Delete").click()
    expect(dialog.get_by_test_id("confirm-count")).to_have_text("1")
    dialog.get_by_role("button", name="Delete 1 key").click()
    expect(page.locator("#toasts .toast-text").last).to_have_text("Deleted 1 key.")
    expect(page.locator("td.key code", has_text="job_id")).to_have_count(0)
    assert not TaskStateStore.objects.filter(key="job_id").exists()
    deleted = AuditEvent.objects.get(action="delete")
    edited = AuditEvent.objects.get(action="patch")

    page.get_by_role("link", name="Audit", exact=True).click()
    expect(page.locator("h1")).to_have_text("Audit trail")
    listed = page.locator("table.audit tbody tr", has=page.get_by_role("link", name=f"#{deleted.pk}", exact=True))
    expect(listed).to_contain_text("delete")
    expect(listed).to_contain_text("operator")
    expect(listed).to_contain_text("done")
    listed.get_by_role("link", name=f"#{deleted.pk}", exact=True).click()

    expect(page.locator("h1")).to_contain_text(f"#{deleted.pk}")
    expect(page.locator("section.audit-key code").first).to_have_text("job_id")
    expect(page.locator("pre.diff .diff-del").first).to_be_visible()
    page.get_by_role("button", name="Restore", exact=True).click()
    expect(dialog.locator("h2")).to_have_text(f"Restore the 1 key of #{deleted.pk}?")
    dialog.get_by_role("button", name="Restore 1 key").click()
    expect(dialog.get_by_test_id("restore-outcome")).to_have_text("Restored 1 key.")
    restore = AuditEvent.objects.get(action="restore")
    expect(dialog.get_by_test_id("restore-event")).to_have_text(f"Open the restore's event #{restore.pk}")
    expect(page.locator("#keys-panel")).to_contain_text(f"#{restore.pk}")  # "Restored by", refreshed
    dialog.get_by_role("button", name="Close").click()

    page.goto(instance)
    back = page.locator("tr", has=page.locator("td.key code", has_text="job_id"))
    expect(back.locator("td.value")).to_contain_text('"job": "spark-8"')
    restored = TaskStateStore.objects.get(key="job_id")
    assert restored.expires_at == deployment["expires"]

    page.goto(f"{live_server.url}/audit/")
    expect(page.locator("table.audit")).to_contain_text(f"restored from #{deleted.pk}")
    expect(page.locator("table.audit")).to_contain_text(f"restored by #{restore.pk}")
    document(screenshot, "audit")
    page.goto(f"{live_server.url}/audit/{edited.pk}/")
    expect(page.locator("pre.diff .diff-add").first).to_be_visible()
    document(screenshot, "audit-event")
