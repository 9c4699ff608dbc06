"""Issue 14's page fixes in a real browser, one test per finding that would have caught it: a mapped task's
heading (#2), the panel an action refreshes and the buttons with nothing to act on (#8), the search's filters,
pages and value search (#9), and the auto-refresh of a running DAG run's page."""

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.state import selectors
from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]


@pytest.fixture
def deployment(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    """A finished ML run with a mapped task (map indexes 0-2, keys on 0 and 2), a running one, an asset of the
    warehouse with a key and an asset without keys."""
    run = dag_run_factory(dag_id="ml_training", run_id="manual__2026-11-30", state="success")
    for map_index in (0, 1, 2):
        task_instance_factory(run, task_id="train_fold", map_index=map_index)
    task_key_factory(run, task_id="train_fold", map_index=0, key="fold_score", value={"auc": 0.91})
    task_key_factory(run, task_id="train_fold", map_index=2, key="fold_score", value={"auc": 0.87})
    task_key_factory(run, task_id="train_fold", map_index=2, key="attempt", value=1)
    live = dag_run_factory(dag_id="etl_orders", run_id="scheduled__2026-11-30", state="running")
    task_instance_factory(live, task_id="load", state="running")
    task_key_factory(live, task_id="load", key="offset", value=100)
    orders = asset_factory(name="orders", uri="s3://warehouse/orders")
    asset_key_factory(orders, key="watermark", value="Grüße 2026-11-30")
    empty = asset_factory(name="empty", uri="s3://warehouse/empty")
    return {"run": run, "live": live, "orders": orders, "empty": empty}


def test_a_mapped_tasks_heading_shows_its_map_indexes(signed_in, live_server, deployment, screenshot):
    """#2: the heading opened map index -1 ("no such task instance", "No keys") with its actions enabled."""
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/")
    page.locator("h2").get_by_role("link", name="train_fold").click()
    expect(page.locator("h1")).to_have_text("train_fold all map indexes")
    panel = page.locator("#keys-panel")
    expect(panel).not_to_contain_text("no such task instance")
    expect(panel.locator("table")).to_have_count(1)  # one table, with a map index column
    expect(panel.locator("td.map-index a")).to_have_text(["train_fold[0]", "train_fold[2]", "train_fold[2]"])
    expect(panel.locator("td.key")).to_have_count(3)
    chips = page.get_by_role("navigation", name="Map indexes").get_by_role("link")
    expect(chips).to_have_text(["all", "0", "2"])
    expect(page.get_by_role("button", name="Expire all map indexes")).to_be_enabled()
    screenshot("mapped-task")
    page.get_by_role("button", name="Expire all map indexes").click()
    expect(page.locator("dialog#modal h2")).to_have_text("Expire 3 task keys?")
    page.locator("dialog#modal").get_by_role("button", name="Cancel").click()
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/train_fold/?map_index=1")  # no keys
    expect(page.get_by_role("button", name="Expire all", exact=True)).to_be_disabled()
    expect(page.get_by_role("button", name="Clear map index 1")).to_be_disabled()


def test_clearing_all_map_indexes_updates_the_chips_and_buttons(signed_in, live_server, deployment):
    """#8: after "Clear all map indexes" the chips stayed until a reload."""
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/train_fold/?map_index=2")
    chips = page.get_by_role("navigation", name="Map indexes")
    expect(chips.get_by_role("link")).to_have_text(["all", "0", "2"])
    page.get_by_role("button", name="Clear all map indexes").click()
    dialog = page.locator("dialog#modal")
    dialog.get_by_role("button", name="Delete 3 keys").click()
    expect(dialog).to_be_hidden()
    expect(chips.get_by_role("link")).to_have_text(["all"])  # no reload: the panel was refreshed
    expect(chips).to_contain_text("none")
    expect(page.get_by_role("button", name="Clear all map indexes")).to_be_disabled()
    expect(page.get_by_role("button", name="Clear map index 2")).to_be_disabled()
    assert not TaskStateStore.objects.filter(task_id="train_fold").exists()


def test_selection_and_clear_buttons_need_something_to_act_on(signed_in, live_server, deployment):
    """#8: "Expire selected" with nothing selected opened "Expire 0 task keys?"; "Clear all state" was enabled
    on an asset without keys."""
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/")
    bar = page.get_by_role("toolbar", name="Selected keys")
    expire, delete = (bar.get_by_role("button", name=verb, exact=True) for verb in ("Expire", "Delete"))
    expect(expire).to_be_disabled()
    expect(delete).to_be_disabled()
    boxes = page.locator("#keys-panel tbody input[type=checkbox]")
    boxes.first.check()
    expect(expire).to_be_enabled()
    expire.click()
    expect(page.locator("dialog#modal h2")).to_have_text("Expire 1 task key?")
    page.locator("dialog#modal").get_by_role("button", name="Cancel").click()
    boxes.first.uncheck()
    expect(expire).to_be_disabled()
    page.goto(f"{live_server.url}/assets/{deployment['empty'].pk}/")
    expect(page.get_by_role("button", name="Clear all state")).to_be_disabled()
    page.goto(f"{live_server.url}/assets/{deployment['orders'].pk}/")
    clear = page.get_by_role("button", name="Clear all state")
    selected = page.get_by_role("button", name="Delete selected")
    expect(clear).to_be_enabled()
    expect(selected).to_be_disabled()
    clear.click()
    page.locator("dialog#modal").get_by_role("button", name="Clear 1 key").click()
    expect(clear).to_be_disabled()  # the asset has no keys left: the refreshed panel says so


def test_search_filters_pages_and_values(signed_in, live_server, deployment, task_key_factory):
    """#9: asset=warehouse listed task keys too; dag_id=ml_ found nothing; no previous page; no value search."""
    page = signed_in
    page.goto(f"{live_server.url}/search/")
    page.get_by_label("Asset name or URI").fill("warehouse")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#keys-panel")).to_contain_text("Task state has no asset: the asset filter leaves it out.")
    expect(page.locator("input[name=ids]")).to_have_count(0)
    expect(page.locator("#keys-panel td.key")).to_have_text(["watermark"])
    page.goto(f"{live_server.url}/search/")
    expect(page.get_by_label("DAG id match")).to_have_value("contains")  # the form says how a DAG id matches
    expect(page.get_by_label("DAG id match").locator("option:checked")).to_have_text("contains (as on the DAG list)")
    page.get_by_label("DAG id", exact=True).fill("ml_")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#keys-panel td.key")).to_have_count(3)
    page.goto(f"{live_server.url}/search/")
    page.get_by_label("Value contains").fill("grüße")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#keys-panel td.key")).to_have_text(["watermark"])
    for number in range(55):  # two pages of task keys with "pg" in their key
        task_key_factory(deployment["live"], task_id="load", key=f"pg_{number:02d}")
    page.goto(f"{live_server.url}/search/?key=pg_&store=task&dag_id=etl")
    first = page.locator("#keys-panel td.key").all_inner_texts()
    assert len(first) == 50 and not page.get_by_role("link", name="← Previous").count()
    page.get_by_role("link", name="Next →").click()
    expect(page.locator("#keys-panel td.key")).to_have_count(5)
    assert "dag_id=etl" in page.url and "task_cursor=" in page.url  # the filters stay in the link
    page.get_by_role("link", name="← Previous").click()
    expect(page.locator("#keys-panel td.key")).to_have_count(50)
    assert page.locator("#keys-panel td.key").all_inner_texts() == first
    assert "task_before=" in page.url and "key=pg_" in page.url


def test_a_running_runs_page_refreshes_itself_while_visible(signed_in, live_server, deployment, monkeypatch):
    """Auto-refresh: a running run's keys appear without a reload, not while the tab is hidden; a finished
    run's page does not poll."""
    monkeypatch.setattr(selectors, "AUTO_REFRESH_SECONDS", 1)
    page = signed_in
    live = deployment["live"]
    page.goto(f"{live_server.url}/runs/{live.pk}/")
    expect(page.get_by_test_id("auto-refresh")).to_contain_text("This run is running: its keys refresh every 1 s")
    TaskStateStore.objects.create(
        dag_run=live,
        dag_id=live.dag_id,
        run_id=live.run_id,
        task_id="load",
        map_index=-1,
        key="written_meanwhile",
        value="1",
        updated_at=timezone.now(),
    )
    expect(page.locator("#keys-panel td.key", has_text="written_meanwhile")).to_be_visible(timeout=5000)
    page.evaluate(
        "Object.defineProperty(document, 'visibilityState', {value: 'hidden', configurable: true});"
        "document.dispatchEvent(new Event('visibilitychange'))"
    )
    requests = []
    page.on("request", lambda request: requests.append(request.url) if "/runs/" in request.url else None)
    TaskStateStore.objects.filter(key="written_meanwhile").update(key="renamed_meanwhile")
    # Each tick of the poll asks htmx:confirm first (app.js refuses it while the tab is hidden): two ticks pass.
    page.evaluate(
        "window.__ticks = 0; document.addEventListener('htmx:confirm', (e) => "
        "{ if (e.detail.elt.hasAttribute('data-auto-refresh')) window.__ticks++; })"
    )
    page.wait_for_function("() => window.__ticks >= 2")
    assert requests == []
    expect(page.locator("#keys-panel td.key", has_text="written_meanwhile")).to_be_visible()
    page.evaluate(
        "Object.defineProperty(document, 'visibilityState', {value: 'visible', configurable: true});"
        "document.dispatchEvent(new Event('visibilitychange'))"
    )
    expect(page.locator("#keys-panel td.key", has_text="renamed_meanwhile")).to_be_visible(timeout=3000)
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/")
    expect(page.get_by_test_id("auto-refresh")).to_have_text(
        "This run is not running (success): its keys do not refresh on their own."
    )
    # Nothing polls: no element asks for a refresh on a timer (htmx's "every"), only after an action.
    expect(page.locator("[data-auto-refresh]")).to_have_count(0)
    triggers = page.eval_on_selector_all("[hx-trigger]", "elements => elements.map(e => e.getAttribute('hx-trigger'))")
    assert triggers and not [t for t in triggers if "every" in t], triggers
