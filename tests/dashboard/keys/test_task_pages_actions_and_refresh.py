"""Issue 14's page fixes, through Django's test client: a mapped task's page, actions with nothing to act on,
the panel that an action refreshes, and the auto-refresh of a live DAG run's pages."""

import re

import pytest

from statestore_admin.airflow.models import TaskStateStore
from tests.conftest import BOTH_DATABASES
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
PANEL = {**HX, "HTTP_HX_TARGET": "keys-panel"}


@pytest.fixture
def world(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    """A running run with a mapped task (map indexes 0-2; keys on 0 and 2) and a plain task without keys; a
    finished run; an asset with keys and one without."""
    run = dag_run_factory(dag_id="ml_training", run_id="manual__1", state="running")
    for map_index in (0, 1, 2):
        task_instance_factory(run, task_id="train_fold", map_index=map_index)
    task_key_factory(run, task_id="train_fold", map_index=0, key="fold_score", value=0.91)
    task_key_factory(run, task_id="train_fold", map_index=2, key="fold_score", value=0.87)
    task_key_factory(run, task_id="train_fold", map_index=2, key="attempt", value=1)
    task_instance_factory(run, task_id="report")
    done = dag_run_factory(dag_id="ml_training", run_id="manual__0", state="success")
    task_instance_factory(done, task_id="report")
    task_key_factory(done, task_id="report", key="sent", value=True)
    full = asset_factory(name="warehouse_orders")
    asset_key_factory(full, key="watermark", value="2026-11-30")
    empty = asset_factory(name="warehouse_empty")
    return {"run": run, "done": done, "full": full, "empty": empty}


def button(html: str, label: str) -> str:
    """The opening tag of the button labelled ``label`` (first one)."""
    found = re.search(r"<button[^>]*>\s*" + re.escape(label) + r"\s*</button>", html)
    assert found, f"no button {label!r}"
    return found.group(0)


def is_disabled(html: str, label: str) -> bool:
    return " disabled" in button(html, label).split(">", 1)[0]


# Item 2: a mapped task's page ---------------------------------------------------------------------
def test_a_mapped_tasks_heading_opens_every_map_index(client, operator, world):
    client.force_login(operator)
    run = world["run"]
    html = flat(client.get(f"/runs/{run.pk}/").content.decode())
    assert f'href="/runs/{run.pk}/tasks/train_fold/"' in html  # the task's heading
    html = flat(client.get(f"/runs/{run.pk}/tasks/train_fold/").content.decode())
    assert "no such task instance" not in html and "No keys" not in html
    assert "all map indexes" in html and "Mapped task: 2 map indexes with state." in html
    assert html.count("<table") == 1 and "<th>Map index</th>" in html  # one table, a map index column
    assert html.count(">train_fold[0]</a>") == 1 and html.count(">train_fold[2]</a>") == 2  # each key's row
    assert html.count('<td class="key">') == 3 and "attempt" in html  # the keys of both
    chips = re.search(r'<nav class="map-indexes".*?</nav>', html, re.S).group(0)
    assert re.findall(r">(\w+)</a>", chips) == ["all", "0", "2"] and 'aria-current="page">all<' in chips
    assert not is_disabled(html, "Expire all map indexes") and not is_disabled(html, "Clear all map indexes")
    assert "map_index=all" in button(html, "Expire all map indexes")
    assert "?map_index=0" in button(html, "Add key")  # the first map index that exists


def test_a_map_index_without_keys_disables_its_actions(client, operator, world):
    client.force_login(operator)
    run = world["run"]
    html = client.get(f"/runs/{run.pk}/tasks/train_fold/?map_index=1").content.decode()
    assert "No keys." in html and "no such task instance" not in html
    assert is_disabled(html, "Expire all") and is_disabled(html, "Clear map index 1")
    assert not is_disabled(html, "Clear all map indexes")  # map indexes 0 and 2 have keys
    html = client.get(f"/runs/{run.pk}/tasks/report/").content.decode()  # an unmapped task without keys
    assert is_disabled(html, "Expire all") and is_disabled(html, "Clear all keys")
    assert "Clear all map indexes" not in html and "map-indexes" not in html


def test_an_unmapped_task_still_opens_its_task_instance(client, operator, world):
    client.force_login(operator)
    html = client.get(f"/runs/{world['done'].pk}/tasks/report/").content.decode()
    assert "all map indexes" not in html and "sent" in html and not is_disabled(html, "Clear all keys")


@pytest.mark.parametrize("action", ["expire", "delete"])
def test_the_server_refuses_an_action_on_nothing(client, operator, world, action):
    client.force_login(operator)
    scope = {"run": world["run"].pk, "task_id": "train_fold", "map_index": "1"}
    response = client.get(f"/keys/task/{action}/", scope, **HX)
    html = response.content.decode()
    assert response.status_code == 422 and f"There are no keys to {action}: nothing was changed." in html
    assert " 0 task keys?" not in html and 'type="submit"' not in html


# Item 8 ------------------------------------------------------------------------------------------------
def test_clearing_all_map_indexes_refreshes_the_chips(client, operator, world):
    """The chips and the actions are in the panel that an action's "stateChanged" re-fetches."""
    client.force_login(operator)
    url = f"/runs/{world['run'].pk}/tasks/train_fold/?map_index=2"
    panel = client.get(url, **PANEL).content.decode()
    assert 'id="keys-panel"' in panel and "<html" not in panel
    assert 'class="map-indexes"' in panel and not is_disabled(panel, "Clear all map indexes")
    TaskStateStore.objects.filter(task_id="train_fold").delete()
    panel = client.get(url, **PANEL).content.decode()
    assert 'href="?map_index=2"' not in panel and "none" in panel
    assert is_disabled(panel, "Clear all map indexes") and is_disabled(panel, "Clear map index 2")


def test_selection_buttons_start_disabled(client, operator, world):
    client.force_login(operator)
    for url in (f"/runs/{world['run'].pk}/", f"/assets/{world['full'].pk}/"):
        html = client.get(url).content.decode()
        for label in ("Set expiry", "Expire", "Delete") if "runs" in url else ("Delete selected",):
            tag = button(html, label)
            assert " disabled" in tag and "data-needs-selection" in tag, (url, label)
    response = client.get("/keys/task/expire/", **HX)  # nothing selected: refused
    assert response.status_code == 422 and "Select at least one key." in response.content.decode()


def test_clear_all_state_is_disabled_on_an_asset_without_keys(client, operator, world):
    client.force_login(operator)
    assert not is_disabled(client.get(f"/assets/{world['full'].pk}/").content.decode(), "Clear all state")
    empty = world["empty"].pk
    assert is_disabled(client.get(f"/assets/{empty}/").content.decode(), "Clear all state")
    response = client.get(f"/assets/{empty}/delete/", {"all": "1"}, **HX)
    assert response.status_code == 422 and "There are no keys to delete" in response.content.decode()


# Auto-refresh ------------------------------------------------------------------------------------------
def test_a_running_runs_pages_poll_and_a_finished_ones_do_not(client, operator, world):
    client.force_login(operator)
    run, done = world["run"], world["done"]
    for url in (f"/runs/{run.pk}/", f"/runs/{run.pk}/tasks/train_fold/"):
        html = flat(client.get(url).content.decode())
        assert 'hx-trigger="stateChanged from:body, autoRefresh, every 10s" data-auto-refresh' in html, url
        assert "This run is running: its keys refresh every 10 s (paused while this tab is hidden" in html
    for url in (f"/runs/{done.pk}/", f"/runs/{done.pk}/tasks/report/"):
        html = flat(client.get(url).content.decode())
        assert "data-auto-refresh" not in html and "every 10s" not in html, url
        assert "This run is not running (success): its keys do not refresh on their own." in html
    # A run that finishes stops polling at its next refresh: the panel decides again.
    run.state = "success"
    run.save(update_fields=["state"])
    assert "data-auto-refresh" not in flat(client.get(f"/runs/{run.pk}/", **PANEL).content.decode())
