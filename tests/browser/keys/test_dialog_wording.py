"""Issue 23 item 12, task and asset dialogs, in a real browser: a confirmation says what happens in people's words
(no column names such as expires_at), and task and asset dialogs list their keys the same way (one table)."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.conftest import row_action
from tests.conftest import BOTH_DATABASES
from tests.factories import make_deployment

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
INTERNALS = re.compile(r"expires_at|The selected keys|rows? (are|is) deleted|dag_run_id")


@pytest.fixture
def deployment():
    later = timezone.now() + timedelta(days=30)
    return make_deployment(
        {"checkpoint": {"epoch": 3}, "job_id": {"job": "spark-7"}},
        {"watermark": ("2026-11-30", "watcher"), "cursor": ({"id": 991}, "api")},
        expires_at=later,
    )


def row_of(page, key: str):
    return page.locator("#keys-panel tr", has=page.locator("td.key code", has_text=re.compile(f"^{key}$")))


def headers(dialog) -> list[str]:
    return dialog.get_by_test_id("listed-keys").locator("thead th").all_inner_texts()


def test_task_dialogs_read_like_people(signed_in, live_server, deployment, console_errors, screenshot):
    page = signed_in
    dialog = page.locator("dialog#modal")
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/train/")
    row_action(row_of(page, "job_id"), "Expire now: job_id").click()
    expect(dialog).to_contain_text("1 key expires now: the next garbage collection deletes it, and until then")
    expect(dialog).not_to_contain_text(INTERNALS)
    assert headers(dialog) == ["Key", "Task", "Value"]
    screenshot("dialog-expire-one")
    dialog.get_by_role("button", name="Cancel").click()
    page.get_by_role("button", name=re.compile("^Clear")).first.click()
    expect(dialog).to_contain_text("Every key of train in run manual__2026-11-29.")
    expect(dialog).to_contain_text(
        "2 keys are deleted from the Airflow database now: tasks that read them get nothing."
    )
    expect(dialog).not_to_contain_text(INTERNALS)
    assert headers(dialog) == ["Key", "Task", "Value"]


def test_the_asset_dialog_lists_keys_as_task_dialogs_do(signed_in, live_server, deployment, console_errors):
    page = signed_in
    dialog = page.locator("dialog#modal")
    page.goto(f"{live_server.url}/assets/{deployment['asset'].pk}/")
    row_of(page, "cursor").get_by_role("button", name="Delete cursor").click()
    expect(dialog).to_contain_text("1 key is deleted from the Airflow database now: tasks and watchers that read it")
    expect(dialog).not_to_contain_text(INTERNALS)
    assert headers(dialog) == ["Key", "Value"]  # the same table, without the task column
    expect(dialog.get_by_test_id("listed-keys").locator("tbody tr")).to_have_count(1)
