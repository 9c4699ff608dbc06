"""The browsing pages (views.browse) and their actions (actions.browse) on Airflow's database: what they list, in
which order, with scopes, the actions' checks and audit trail, and bad input. The same pages over Airflow's REST
API are compared with these against real Airflow in tests/compat/test_managed_airflow.py."""

import html
import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.records.models import AccessScope, AuditEvent
from tests.conftest import BOTH_DATABASES
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def run(dag_factory, dag_run_factory, task_instance_factory, task_key_factory):
    for dag_id in ("etl", "reports", "old"):
        dag_factory(dag_id, is_paused=dag_id == "reports", is_stale=dag_id == "old")
    run = dag_run_factory(dag_id="etl", run_id="manual__1")
    for map_index in (0, 1):
        task_instance_factory(run, task_id="mapped", map_index=map_index)
        task_key_factory(run, task_id="mapped", map_index=map_index, key="a", value=map_index)
    task_instance_factory(run, task_id="t")
    task_key_factory(
        run, task_id="t", key="job", value={"id": "<b>1</b>"}, expires_at=timezone.now() + timedelta(days=3)
    )
    task_key_factory(run, task_id="t", key="never", value=1, expires_at=None)
    return run


def text(response) -> str:
    """A page's text as a reader sees it: tags dropped, blanks collapsed."""
    assert response.status_code == 200, response.status_code
    return flat(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())))


def task_page(**query):
    base = {"dag_id": "etl", "run_id": "manual__1", "task_id": "t", "map_index": -1}
    return f"{reverse('browse-task')}?{urlencode({**base, **query})}"


def action(op, **query):
    base = {"dag_id": "etl", "run_id": "manual__1", "task_id": "t", "map_index": -1}
    return f"{reverse('browse-task-action', args=[op])}?{urlencode({**base, **query})}"


@pytest.fixture
def op_client(client, operator):
    client.force_login(operator)
    return client


def test_the_dag_list_names_the_dags_airflow_lists_and_filters_them(op_client, run):
    page = text(op_client.get(reverse("browse-dags")))
    assert "etl" in page and "reports paused" in page and "old" not in page  # a stale DAG is not listed
    filtered = text(op_client.get(reverse("browse-dags") + "?q=REP"))
    assert "reports" in filtered and "etl" not in filtered


def test_a_run_page_lists_its_task_instances_with_their_keys(op_client, run, dag_run_factory):
    dag_run_factory(dag_id="etl", run_id="manual__0", run_after=timezone.now() - timedelta(days=1))
    runs = text(op_client.get(reverse("browse-runs", args=["etl"])))
    assert runs.index("manual__1") < runs.index("manual__0")  # newest first
    page = op_client.get(f"{reverse('browse-run')}?dag_id=etl&run_id=manual__1")
    shown = text(page)
    assert shown.index("mapped map index 0") < shown.index("mapped map index 1") < shown.index("t success job never")
    assert op_client.get(f"{reverse('browse-run')}?dag_id=etl&run_id=missing").status_code == 404


def test_a_task_instance_page_shows_its_keys_escaped(op_client, run):
    response = op_client.get(task_page())
    assert response.status_code == 200
    body = response.content.decode()
    assert "<b>1</b>" not in body and "&lt;b&gt;1&lt;/b&gt;" in body
    assert [k for k in ("job", "never") if f'data-testid="key">{k}<' in body] == ["job", "never"]
    assert op_client.get(task_page(task_id="absent")).status_code == 404
    assert op_client.get(task_page(region_id="not-a-uuid")).status_code == 400
    assert op_client.get(task_page(map_index="x")).status_code == 400


def test_add_edit_expire_and_delete_a_key_through_the_dialogs(op_client, run):
    added = op_client.post(action("add"), {"key": "new", "value": '{"n": 1}', "expiry": "never"}, **HX)
    assert added.status_code == 204, added.content.decode()
    row = TaskStateStore.objects.get(task_id="t", key="new")
    assert json.loads(row.value) == {"n": 1} and row.expires_at is None

    edit = op_client.get(action("edit", key="new"), **HX)
    seen = edit.content.decode().split('name="seen_updated_at" value="')[1].split('"')[0]
    saved = op_client.post(action("edit", key="new"), {"value": "2", "seen_updated_at": seen}, **HX)
    assert saved.status_code == 204
    row.refresh_from_db()
    assert row.value == "2" and row.expires_at is None  # an edit keeps the expiry

    at = timezone.now() + timedelta(days=2)
    expiry = {"expiry": "at", "expires_at": at.strftime("%Y-%m-%dT%H:%M"), "tz": "UTC", "seen_updated_at": seen}
    stale = op_client.post(action("expire", key="new"), expiry, **HX)
    assert stale.status_code == 422 and "changed since you opened it" in stale.content.decode()
    fresh = op_client.get(action("expire", key="new"), **HX).content.decode()
    expiry["seen_updated_at"] = fresh.split('name="seen_updated_at" value="')[1].split('"')[0]
    assert op_client.post(action("expire", key="new"), expiry, **HX).status_code == 204
    row.refresh_from_db()
    assert row.value == "2" and abs(row.expires_at - at) < timedelta(minutes=1)

    deleted = op_client.post(action("delete", key="new"), {}, **HX)
    assert deleted.status_code == 204 and "undo" in json.loads(deleted["HX-Trigger"])["toast"]
    assert not TaskStateStore.objects.filter(key="new").exists()
    assert list(AuditEvent.objects.order_by("id").values_list("action", flat=True)) == ["set", "patch", "set", "delete"]


def test_clear_deletes_one_task_instances_keys_and_can_be_undone(op_client, run):
    cleared = op_client.post(action("clear"), {})  # without JavaScript: a redirect back, with the message
    assert cleared.status_code == 302 and cleared["Location"].startswith(reverse("browse-task"))
    assert not TaskStateStore.objects.filter(task_id="t").exists()
    assert TaskStateStore.objects.filter(task_id="mapped").count() == 2
    event = AuditEvent.objects.get(action="clear")
    assert op_client.post(reverse("audit-restore", args=[event.pk]), {}).status_code in (200, 302)
    assert sorted(TaskStateStore.objects.filter(task_id="t").values_list("key", flat=True)) == ["job", "never"]


def test_bad_input_is_refused_and_changes_nothing(op_client, run):
    before = sorted(TaskStateStore.objects.values_list("task_id", "key", "value"))
    for data in (
        {"key": "k", "value": "{not json", "expiry": "never"},
        {"key": "x" * 513, "value": "1", "expiry": "never"},
    ):
        answer = op_client.post(action("add"), data, **HX)
        assert answer.status_code == 422, data
    assert (
        op_client.post(action("add", task_id="absent"), {"key": "k", "value": "1", "expiry": "never"}).status_code
        == 404
    )
    assert op_client.post(action("explode"), {}).status_code == 404
    assert sorted(TaskStateStore.objects.values_list("task_id", "key", "value")) == before


def test_permissions_scopes_and_csrf(client, viewer, user_factory, run):
    client.force_login(viewer)
    assert client.get(task_page()).status_code == 200
    assert "Delete" not in text(client.get(task_page()))
    assert client.post(action("delete", key="job"), {}).status_code == 403
    assert TaskStateStore.objects.filter(key="job").exists()

    scoped = user_factory("scoped", perms=["task.view", "task.delete"], unscoped=False)
    AccessScope.objects.create(user=scoped, kind=AccessScope.Kind.DAG, pattern="reports")
    client.force_login(scoped)
    assert "etl" not in text(client.get(reverse("browse-dags")))
    assert client.get(task_page()).status_code == 403
    assert client.post(action("delete", key="job"), {}).status_code == 403

    strict = type(client)(enforce_csrf_checks=True)
    strict.force_login(user_factory("op2", perms=["task.view", "task.delete"]))
    assert strict.post(action("delete", key="job"), {}).status_code == 403
    assert TaskStateStore.objects.filter(key="job").exists()


def test_asset_pages_and_actions(op_client, asset_factory, asset_key_factory):
    orders, inactive = asset_factory(name="orders"), asset_factory(name="gone", active=False)
    asset_key_factory(orders, key="cursor", value={"id": 7}, kind="task", dag_id="etl", run_id="r", task_id="t")
    listed = text(op_client.get(reverse("browse-assets")))
    assert "orders" in listed and "gone" not in listed  # Airflow's list: active assets
    page = text(op_client.get(reverse("browse-asset", args=[orders.pk])))
    assert 'cursor {"id": 7}' in page and "etl / r / t" in page
    assert op_client.get(reverse("browse-asset", args=[inactive.pk])).status_code == 200
    url = reverse("browse-asset-action", args=[orders.pk, "add"])
    assert op_client.post(url, {"key": "w", "value": '"2026"'}, **HX).status_code == 204
    edit = reverse("browse-asset-action", args=[orders.pk, "edit"]) + "?key=w"
    assert op_client.post(edit, {"value": '"2027"'}, **HX).status_code == 204
    assert AssetStateStore.objects.get(asset=orders, key="w").value == '"2027"'
    assert op_client.post(reverse("browse-asset-action", args=[orders.pk, "clear"]), {}, **HX).status_code == 204
    assert not AssetStateStore.objects.filter(asset=orders).exists()
    assert op_client.get(reverse("browse-asset", args=[999999])).status_code == 404


def test_the_downloads_hold_what_the_pages_list(op_client, run, asset_factory, asset_key_factory):
    page = op_client.get(task_page()).content.decode()
    assert f"{reverse('browse-task-export')}?dag_id=etl" in page
    document = op_client.get(
        f"{reverse('browse-task-export')}?{urlencode({'dag_id': 'etl', 'run_id': 'manual__1', 'task_id': 't'})}"
    )
    assert document.status_code == 200
    entries = json.loads(b"".join(document.streaming_content))["keys"]
    assert [(e["task_id"], e["key"], e["value"]) for e in entries] == [
        ("t", "job", {"id": "<b>1</b>"}),
        ("t", "never", 1),
    ]
    orders = asset_factory(name="orders")
    for number in range(130):  # more than one page of a source's list
        asset_key_factory(orders, key=f"k{number:03d}", value=number)
    csv = op_client.get(reverse("browse-asset-export", args=[orders.pk]) + "?format=csv")
    lines = b"".join(csv.streaming_content).decode("utf-8-sig").splitlines()
    assert len(lines) == 131 and lines[1].startswith(f"asset,,,,,,{orders.pk},orders,")
    assert op_client.get(reverse("browse-asset-export", args=[orders.pk]) + "?format=xml").status_code == 400
    missing = f"{reverse('browse-task-export')}?{urlencode({'dag_id': 'etl', 'run_id': 'manual__1', 'task_id': 'x'})}"
    assert op_client.get(missing).status_code == 404


@pytest.fixture
def two_runs(run, dag_run_factory, task_instance_factory, task_key_factory):
    """``manual__0``, a day before ``manual__1``: ``job`` had another value, ``gone`` is only in it, and
    ``never`` and the mapped task's keys are not in it."""
    earlier = dag_run_factory(dag_id="etl", run_id="manual__0", run_after=timezone.now() - timedelta(days=1))
    task_instance_factory(earlier, task_id="t")
    task_key_factory(earlier, task_id="t", key="job", value={"id": 0})
    task_key_factory(earlier, task_id="t", key="gone", value=True)
    return earlier


def story_url(key: str) -> str:
    return (
        f"{reverse('browse-story')}?{urlencode({'dag_id': 'etl', 'run_id': 'manual__1', 'task_id': 't', 'key': key})}"
    )


def test_a_key_across_runs_newest_first_with_its_changes(op_client, two_runs):
    response = op_client.get(story_url("job"))
    shown = text(response)
    assert shown.index("manual__1") < shown.index("manual__0")
    assert '{"id": "<b>1</b>"}' in shown and '{"id": 0}' in shown and "+1 −1 line" in shown
    missing = op_client.get(story_url("gone"))
    assert text(missing).count("no such key") == 1  # manual__1 lacks it; manual__0 has it
    assert "Across runs" in text(op_client.get(task_page()))


def test_two_runs_compared_key_by_key(op_client, two_runs):
    url = reverse("browse-compare", args=["etl"])
    shown = text(op_client.get(f"{url}?a=manual__0&b=manual__1"))
    assert "3 added in B 1 removed in B 1 changed 0 the same" in shown
    assert "mapped [0] a 0" in shown and "t gone true" in shown
    assert "Compare runs A and B" in text(op_client.get(reverse("browse-runs", args=["etl"])))
    assert op_client.get(f"{url}?a=manual__0").status_code == 400
    assert op_client.get(f"{url}?a=manual__0&b=absent").status_code == 404


def test_a_key_in_a_region_is_followed_to_the_same_place_in_other_runs(op_client, regions_schema):
    from tests.factories import make_dag_run, make_region, make_region_instance, make_region_key

    places = {}
    for number, run_id in enumerate(("manual__old", "manual__new")):
        run = make_dag_run(dag_id="loops", run_id=run_id, run_after=timezone.now() + timedelta(hours=number))
        for iteration in range(2):  # two regions of the task in each run, created in order
            region = make_region(run, f"loop{iteration}")
            make_region_instance(run, "work", region, 0)
            make_region_key(run, "work", region, 0, key="k", value=f"{run_id}-{iteration}")
            places[(run_id, iteration)] = region
    second = places[("manual__new", 1)]
    query = {
        "dag_id": "loops",
        "run_id": "manual__new",
        "task_id": "work",
        "map_index": 0,
        "region_id": second.id,
        "key": "k",
    }
    shown = text(op_client.get(f"{reverse('browse-story')}?{urlencode(query)}"))
    assert '"manual__new-1"' in shown and '"manual__old-1"' in shown and "-0" not in shown
    compared = text(op_client.get(reverse("browse-compare", args=["loops"]) + "?a=manual__old&b=manual__new"))
    assert "0 added in B 0 removed in B 2 changed" in compared
    assert "work region 2 [0] k" in compared


def test_a_runs_download_holds_every_task_instances_keys_in_the_pages_order(op_client, run):
    page = op_client.get(f"{reverse('browse-run')}?dag_id=etl&run_id=manual__1").content.decode()
    assert f"{reverse('browse-run-export')}?dag_id=etl&amp;run_id=manual__1&amp;format=csv" in page
    document = op_client.get(f"{reverse('browse-run-export')}?dag_id=etl&run_id=manual__1")
    entries = json.loads(b"".join(document.streaming_content))["keys"]
    assert [(e["task_id"], e["map_index"], e["key"]) for e in entries] == [
        ("mapped", 0, "a"),
        ("mapped", 1, "a"),
        ("t", -1, "job"),
        ("t", -1, "never"),
    ]
    assert op_client.get(f"{reverse('browse-run-export')}?dag_id=etl&run_id=absent").status_code == 404


@pytest.mark.parametrize(
    ("page", "lands"),
    [
        ("/", "/browse/dags/"),
        ("/dags/?q=etl", "/browse/dags/?q=etl"),
        ("/dags/etl/", "/browse/dags/etl/"),
        ("/dags/etl/compare/?a=r1&b=r2", "/browse/dags/etl/compare/?a=r1&b=r2"),
        ("/assets/?q=orders", "/browse/assets/?q=orders"),
        ("/assets/7/", "/browse/assets/7/"),
    ],
)
def test_on_managed_airflow_the_database_pages_lead_to_the_browsing_pages(op_client, settings, page, lands):
    """Without Airflow's database (AIRFLOW_API_MODE) a page that has a browsing twin sends its reader there, its
    filters kept; nothing is read before (no Airflow API is asked here at all)."""
    settings.AIRFLOW_API_MODE = True
    answer = op_client.get(page)
    assert (answer.status_code, answer["Location"]) == (302, lands)
