"""A loop of 500 iterations on its run's page in a real browser, on Airflow 3.4's schema (AIRFLOW_FIXTURE_SERIES=3.4;
skipped on 3.3): a gap of the Loops list opens its iterations in its place, a page at a time, and the next gap
after them, without leaving the page (htmx); the rest of the page stays as it was."""

import re

import pytest
from django.db import connections
from playwright.sync_api import expect

from statestore_admin.airflow.versions import schema_of
from tests.conftest import BOTH_DATABASES
from tests.factories import make_dag_run, make_long_loop

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]


@pytest.fixture
def deployment():
    if not schema_of(connections["airflow"]).regions:
        pytest.skip("Airflow 3.3's schema has no dynamic regions: run with AIRFLOW_FIXTURE_SERIES=3.4")
    run = make_dag_run(dag_id="long_loop", run_id="manual__500")
    make_long_loop(run, "refine", 500, keyed=(7, 123))
    yield run
    with connections["airflow"].cursor() as cursor:  # the 3.4 tables committed_airflow_tables does not empty
        for table in ("xcom_v2", "dynamic_region"):
            cursor.execute(f"DELETE FROM {table}")


def test_a_gap_opens_its_iterations_in_place_a_page_at_a_time(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment.pk}/")
    items = page.locator("section.loops [data-testid=iteration] > a")
    expect(items).to_have_text([f"iteration {i}" for i in (0, 1, 2, 7, 123, 497, 498, 499)])
    url = page.url
    page.get_by_role("link", name="Show iterations 8–122").click()
    expect(page.get_by_role("link", name="Show iterations 58–122")).to_be_visible()
    expect(items).to_have_text([f"iteration {i}" for i in (0, 1, 2, 7, *range(8, 58), 123, 497, 498, 499)])
    page.get_by_role("link", name="Show iterations 58–122").click()
    expect(page.get_by_role("link", name="Show iterations 108–122")).to_be_visible()
    page.get_by_role("link", name="Show iterations 108–122").click()
    expect(items).to_have_count(8 + 115)
    expect(page.locator("section.loops [data-testid=iteration-gap]")).to_have_text(
        [re.compile(r"Show iterations 3–6"), re.compile(r"Show iterations 124–496")]
    )
    assert page.url == url  # in place: the page was not left
    expect(page.locator("section.task-group")).to_have_count(2)  # the keys' tables are still there
