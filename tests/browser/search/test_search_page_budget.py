"""A substring search cut short by its time budget, in a real browser: the notice (role=status) says how far it
searched and what is faster, and "Continue searching" pages through the rest, each key once. The budget is 0 s
and the chunks 2 ids, so each page reads one chunk."""

import pytest
from django.test.utils import override_settings
from playwright.sync_api import expect

from statestore_admin.state import search as searching
from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]


@pytest.fixture
def deployment(dag_run_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="manual__1")
    keys = []
    for number in range(9):
        key = f"job_{number}" if number % 2 == 0 else f"other_{number}"
        task_key_factory(run, task_id=f"t{number}", key=key)
        keys.append(key)
    return [k for k in keys if k.startswith("job")]


def test_a_cut_search_says_so_and_continues(signed_in, live_server, deployment, monkeypatch, screenshot):
    for name in ("FIRST_CHUNK", "MIN_CHUNK", "MAX_CHUNK"):
        monkeypatch.setattr(searching, name, 2)
    page = signed_in
    seen, notices = [], 0
    with override_settings(SEARCH_TIME_BUDGET_SECONDS=0):
        page.goto(f"{live_server.url}/search/?key=JOB&store=task")
        notice = page.locator("#keys-panel [role=status]")
        while notice.count():
            expect(notice).to_contain_text("Stopped after 0 s having searched keys down to id")
            expect(notice).to_contain_text("Add a DAG filter to search faster: keys are indexed by DAG.")
            if notices == 1:
                screenshot("search-cut-short")
            seen += page.locator("td.key code").all_inner_texts()
            notices += 1
            page.get_by_role("link", name="Continue searching →").click()
            page.wait_for_load_state()
            assert notices < 20
        seen += page.locator("td.key code").all_inner_texts()
    assert notices > 1
    assert seen == sorted(deployment, key=lambda k: -int(k.split("_")[1]))  # newest first, each once
