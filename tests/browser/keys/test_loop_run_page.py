"""Issue 22 in a real browser, on Airflow 3.4's schema (AIRFLOW_FIXTURE_SERIES=3.4; skipped on 3.3, whose schema
has no regions): the run page of a DAG with a three-iteration loop around a mapped task shows each iteration's
keys under it, and a key of one iteration edited through the page changes that row only. Screenshots of the
page (light, and 390 px wide) go to docs/screenshots/loop-run-page*.png."""

import json
import re
from pathlib import Path

import pytest
from django.db import connections
from playwright.sync_api import expect

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.airflow.versions import schema_of
from tests.browser.conftest import row_action
from tests.conftest import BOTH_DATABASES
from tests.factories import (
    LOOP_GATE_OPERATOR,
    make_dag_run,
    make_loop_decision,
    make_region,
    make_region_instance,
    make_region_key,
)

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"
ITERATIONS, POSITIONS = 3, 2
MAPPED = "refine.process"


@pytest.fixture
def regions_cleanup():
    """The 3.4 tables ``committed_airflow_tables`` does not empty (their rows would outlive the test)."""
    if not schema_of(connections["airflow"]).regions:
        pytest.skip("Airflow 3.3's schema has no dynamic regions: run with AIRFLOW_FIXTURE_SERIES=3.4")
    yield
    with connections["airflow"].cursor() as cursor:
        for table in ("xcom_v2", "dynamic_region"):
            cursor.execute(f"DELETE FROM {table}")


@pytest.fixture
def deployment(regions_cleanup):
    """The loop ``refine`` ran three iterations (0, 1, 2), each expanding ``refine.process`` over two map
    positions with a key ``offset`` each; the gate recorded its decision every iteration."""
    run = make_dag_run(dag_id="refine_batches", run_id="manual__2026-12-02")
    loop = make_region(run, "refine")
    for iteration in range(ITERATIONS):
        gate = make_region_instance(run, "refine.good_enough", loop, iteration, operator=LOOP_GATE_OPERATOR)
        make_loop_decision(gate, "error small enough: stop" if iteration == ITERATIONS - 1 else "error too big")
        expansion = make_region(run, MAPPED, loop, iteration)
        for position in range(POSITIONS):
            make_region_instance(run, MAPPED, expansion, position)
            make_region_key(run, MAPPED, expansion, position, "offset", {"iteration": iteration, "at": position})
    return {"run": run}


def block(page, iteration: int, position: int):
    """The key rows of one coordinate: its region path in the row's region column."""
    path = re.compile(f"^{re.escape(f'loop refine · iteration {iteration} › map {position}')}$")
    return page.locator("#keys-panel tr", has=page.locator("td.region .region-path", has_text=path))


def test_each_iterations_keys_appear_under_it_and_an_edit_changes_that_row_only(
    signed_in, live_server, deployment, screenshot
):
    page = signed_in
    page.emulate_media(color_scheme="light")
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/")
    mapped = page.locator("section.task-group", has=page.locator("h2 a", has_text=re.compile(f"^{MAPPED}$")))
    expect(mapped.locator("table")).to_have_count(1)  # one table for the task, a row a key with its path
    paths = mapped.locator("td.region .region-path").all_inner_texts()
    assert paths == [
        f"loop refine · iteration {i} › map {p}" for i in range(ITERATIONS) for p in range(POSITIONS)
    ]  # newest last
    for iteration in range(ITERATIONS):
        for position in range(POSITIONS):
            cells = block(page, iteration, position).locator("td.value")
            expect(cells).to_have_count(1)
            expect(cells).to_contain_text(json.dumps({"iteration": iteration, "at": position}))
    loops = page.locator("section.loops [data-testid=iteration]")
    decisions = ["error too big", "error too big", "error small enough: stop"]
    expect(loops).to_have_text([f"iteration {i} decision: {reason}" for i, reason in enumerate(decisions)])
    DOCS_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS_SCREENSHOTS / "loop-run-page.png"), full_page=True)

    before = {row.pk: row.value for row in TaskStateStore.objects.all()}
    target = TaskStateStore.objects.get(value=json.dumps({"iteration": 1, "at": 0}))
    row_action(block(page, 1, 0), "Edit offset").click()
    dialog = page.locator("dialog#modal")
    dialog.locator("textarea").fill('{"iteration": 1, "at": 0, "edited": true}')
    dialog.get_by_role("button", name="Save value").click()
    expect(page.locator("#toasts .toast").last).to_have_text("Saved the value of 'offset'.")
    expect(block(page, 1, 0).locator("td.value")).to_contain_text('"edited": true')
    after = {row.pk: row.value for row in TaskStateStore.objects.all()}
    changed = {pk for pk in before if before[pk] != after[pk]}
    assert changed == {target.pk} and json.loads(after[target.pk]) == {"iteration": 1, "at": 0, "edited": True}
    assert set(after) == set(before)
    for iteration, position in ((0, 0), (2, 0), (1, 1)):  # the same map position in the other iterations
        expect(block(page, iteration, position).locator("td.value")).not_to_contain_text("edited")

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/")
    expect(block(page, 2, 1).locator("td.value")).to_have_count(1)
    width = page.evaluate("Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)")
    assert width <= 390
    page.screenshot(path=str(DOCS_SCREENSHOTS / "loop-run-page-390.png"), full_page=True)
