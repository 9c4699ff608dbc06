"""Search and lists at 1440×900 (issue 23, item 13), in a real browser: the Search page says how many keys
match; its DAG / run / task column is wide enough that run ids wrap at their separators, never every few
characters, and no wide empty actions column sits beside it; the DAG list's filter finds any part of an id
("orders" finds etl_orders), as the asset list's does; the GC page's sample keys are links, wrapped whole."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.shell.test_overview_layout import BREAKS
from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]

RUN_ID = "scheduled__2026-12-01T00:00:00+00:00"


@pytest.fixture
def deployment(dag_run_factory, task_key_factory):
    now = timezone.now()
    for dag_id in ("etl_orders_daily_warehouse_load", "ml_training_pipeline"):
        run = dag_run_factory(dag_id=dag_id, run_id=RUN_ID)
        for n in range(3):
            task_key_factory(
                run,
                task_id="load_partitions_into_warehouse",
                key=f"watermark_of_partition_{n}",
                value={"rows_loaded": 128734 + n, "until": "2026-12-01T00:00:00Z"},
                expires_at=now - timedelta(hours=n + 1),
            )


def test_search_counts_and_its_columns_wrap_at_separators(signed_in, live_server, deployment, screenshot):
    page = signed_in
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{live_server.url}/search/?key=watermark&store=task")
    expect(page.get_by_test_id("result-count")).to_have_text("6 keys match.")
    scope = page.locator("table.keys td.scope")
    expect(scope).to_have_count(6)
    screenshot("search-1440")
    for link in scope.locator("a").all():  # the DAG's link, then the run and task's, on a line of its own
        assert link.evaluate(BREAKS) == []
    for key in page.locator("table.keys td.key a").all():
        assert key.evaluate(BREAKS) == []
    widths = page.locator("table.keys").first.evaluate(
        """(t) => Object.fromEntries([...t.querySelectorAll('thead th')].map(
             (th) => [th.className || th.textContent.trim(), th.getBoundingClientRect().width]))"""
    )
    assert widths["actions"] <= 7 * 16 + 1, widths  # one menu: no wide empty column
    assert widths["DAG / run / task"] >= 250, widths
    page.goto(f"{live_server.url}/search/?dag_id=ORDERS&key=watermark&store=task")
    expect(page.get_by_test_id("result-count")).to_have_text("3 keys match.")  # a DAG filter contains, any case


def test_the_dag_list_filter_finds_any_part_of_an_id(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/dags/")
    page.get_by_label("DAG id contains").fill("orders")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(f"{live_server.url}/dags/?q=orders")
    expect(page.locator("#keys-panel tbody tr")).to_have_count(1)
    expect(page.get_by_role("link", name="etl_orders_daily_warehouse_load")).to_be_visible()


def test_the_gc_sample_keys_are_links_wrapped_whole(signed_in, live_server, deployment):
    page = signed_in
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{live_server.url}/gc/")
    sample = page.get_by_test_id("gc-sample")
    expect(sample.locator("tbody tr")).to_have_count(5)
    for link in sample.locator("td.key a, td.where a").all():
        assert link.evaluate(BREAKS) == []
    sample.locator("td.key a").first.click()
    expect(page.locator("h1")).to_contain_text("watermark_of_partition_2")
