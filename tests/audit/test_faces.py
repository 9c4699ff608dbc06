"""Every mutation from the pages and the API produces exactly one audit event with the right actor, face,
action and before/after, through real HTTP (Django's test client). Django admin, GC and the commands have
their own tests (tests/admin_site/test_admin_state.py, tests/gc/test_gc.py,
tests/commands/test_audit_commands.py)."""

import json
from datetime import timedelta
from urllib.parse import quote

import pytest
from django.utils import timezone
from django.utils.html import escape

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.records.models import AuditEvent
from statestore_admin.tokens.models import ApiToken

from ..conftest import BOTH_DATABASES
from ..listing import confirm

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
LATER = timezone.now().replace(microsecond=0) + timedelta(days=3)
TI = "/api/v2/dags/etl/dagRuns/r1/taskInstances/t/state-store"
MAPPED = "/api/v2/dags/etl/dagRuns/r1/taskInstances/mapped/state-store"


@pytest.fixture
def world(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="r1")
    task_instance_factory(run, task_id="t")
    for map_index in (0, 1):
        task_instance_factory(run, task_id="mapped", map_index=map_index)
        task_key_factory(run, task_id="mapped", map_index=map_index, key="a", value=map_index, expires_at=LATER)
    task_key_factory(run, task_id="t", key="job", value={"id": 1}, expires_at=LATER)
    task_key_factory(run, task_id="t", key="other", value=2)
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="watermark", value="w1")
    asset_key_factory(asset, key="cursor", value=7)
    return {"run": run, "asset": asset, "job": TaskStateStore.objects.get(key="job").pk}


@pytest.fixture
def web(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def token(operator):
    record, token = ApiToken.issue(operator, "nightly")
    return record, {"HTTP_AUTHORIZATION": f"Bearer {token}"}


# (request, action, expected {key: (before value or None, after value or None)})
UI = {
    "edit value": (
        lambda c, w: c.post(f"/keys/task/{w['job']}/edit/", {"value": '{"id": 2}'}, **HX),
        "patch",
        {"job": ('{"id": 1}', '{"id": 2}')},
    ),
    "set expiry": (
        lambda c, w: c.post(f"/keys/task/{w['job']}/expiry/", {"expiry": "never"}, **HX),
        "expiry",
        {"job": ('{"id": 1}', '{"id": 1}')},
    ),
    "expire": (
        lambda c, w: confirm(c, "/keys/task/expire/", {"ids": [w["job"]]}, **HX),
        "expire",
        {"job": ('{"id": 1}', '{"id": 1}')},
    ),
    "delete": (
        lambda c, w: confirm(c, "/keys/task/delete/", {"ids": [w["job"]]}, **HX),
        "delete",
        {"job": ('{"id": 1}', None)},
    ),
    "clear task instance": (
        lambda c, w: confirm(c, "/keys/task/delete/", {"run": w["run"].pk, "task_id": "t", "map_index": "-1"}, **HX),
        "clear",
        {"job": ('{"id": 1}', None), "other": ("2", None)},
    ),
    "clear all map indexes": (
        lambda c, w: confirm(
            c, "/keys/task/delete/", {"run": w["run"].pk, "task_id": "mapped", "map_index": "all"}, **HX
        ),
        "clear",
        {"a": ("0", None)},
    ),  # two keys named "a" (map index 0 and 1): checked by count below
    "add": (
        lambda c, w: c.post(
            f"/runs/{w['run'].pk}/tasks/t/add/",
            {"key": "new", "value": "[1]", "map_index": "-1", "expiry": "never"},
            **HX,
        ),
        "add",
        {"new": (None, "[1]")},
    ),
    "asset edit": (
        lambda c, w: c.post(f"/assets/{w['asset'].pk}/key/edit/?key=cursor", {"value": "8"}, **HX),
        "patch",
        {"cursor": ("7", "8")},
    ),
    "asset add": (
        lambda c, w: c.post(f"/assets/{w['asset'].pk}/add/", {"key": "n", "value": '"x"'}, **HX),
        "add",
        {"n": (None, '"x"')},
    ),
    "asset delete": (
        lambda c, w: confirm(c, f"/assets/{w['asset'].pk}/delete/", {"keys": ["cursor"]}, **HX),
        "delete",
        {"cursor": ("7", None)},
    ),
    "asset clear": (
        lambda c, w: confirm(c, f"/assets/{w['asset'].pk}/delete/", {"all": "1"}, **HX),
        "clear",
        {"cursor": ("7", None), "watermark": ('"w1"', None)},
    ),
}

API = {
    "PUT": (
        lambda c, w, h: c.put(
            f"{TI}/job", json.dumps({"value": 5, "expires_at": None}), content_type="application/json", **h
        ),
        "set",
        {"job": ('{"id": 1}', "5")},
    ),
    "PUT new": (
        lambda c, w, h: c.put(
            f"{TI}/{quote('a/b c', safe='')}", json.dumps({"value": 1}), content_type="application/json", **h
        ),
        "set",
        {"a/b c": (None, "1")},
    ),
    "PATCH": (
        lambda c, w, h: c.patch(f"{TI}/job", json.dumps({"value": [2]}), content_type="application/json", **h),
        "patch",
        {"job": ('{"id": 1}', "[2]")},
    ),
    "DELETE key": (lambda c, w, h: c.delete(f"{TI}/job", **h), "delete", {"job": ('{"id": 1}', None)}),
    "DELETE (clear)": (lambda c, w, h: c.delete(TI, **h), "clear", {"job": ('{"id": 1}', None), "other": ("2", None)}),
    "DELETE all map indices": (
        lambda c, w, h: c.delete(f"{MAPPED}?all_map_indices=true", **h),
        "clear",
        {"a": ("0", None)},
    ),
    "asset PUT": (
        lambda c, w, h: c.put(
            f"/api/v2/assets/{w['asset'].pk}/state-store/cursor",
            json.dumps({"value": 9}),
            content_type="application/json",
            **h,
        ),
        "set",
        {"cursor": ("7", "9")},
    ),
    "asset DELETE key": (
        lambda c, w, h: c.delete(f"/api/v2/assets/{w['asset'].pk}/state-store/cursor", **h),
        "delete",
        {"cursor": ("7", None)},
    ),
    "asset DELETE (clear)": (
        lambda c, w, h: c.delete(f"/api/v2/assets/{w['asset'].pk}/state-store", **h),
        "clear",
        {"cursor": ("7", None), "watermark": ('"w1"', None)},
    ),
}


def check(event, action, expected):
    assert event.action == action and event.status == "done"
    recorded = {}
    for key in event.keys.order_by("map_index", "key"):  # two keys named "a": map index 0 is checked
        recorded.setdefault(key.key, (key.before_value, key.after_value))
    assert recorded == expected
    assert event.key_count == event.keys.count()


@pytest.mark.parametrize("name", UI)
def test_every_page_action_records_one_event(web, world, operator, name):
    request, action, expected = UI[name]
    response = request(web, world)
    assert response.status_code in (204, 302), response.content
    event = AuditEvent.objects.get()
    check(event, action, expected)
    assert (event.via, event.actor, event.user_id, event.token_id) == ("ui", "operator", operator.pk, None)
    if name == "clear all map indexes":
        assert event.key_count == 2 and event.map_index is None


@pytest.mark.parametrize("name", API)
def test_every_api_write_records_one_event_with_its_token(client, world, token, operator, name):
    record, headers = token
    request, action, expected = API[name]
    response = request(client, world, headers)
    assert response.status_code in (200, 204), response.content
    event = AuditEvent.objects.get()
    check(event, action, expected)
    assert (event.via, event.actor, event.token_id, event.token_name) == ("api", "operator", record.pk, "nightly")


def test_api_writes_through_the_browser_session_record_no_token(web, world):
    response = web.delete(f"{TI}/job")
    assert response.status_code == 204
    event = AuditEvent.objects.get()
    assert (event.via, event.token_id, event.token_name) == ("api", None, "")


def test_reads_and_refused_writes_record_nothing(web, client, world, token):
    _, headers = token
    assert client.get(TI, **headers).status_code == 200
    assert client.get(f"/keys/task/{world['job']}/").status_code == 200
    assert (
        client.put(f"{TI}/job", json.dumps({"value": None}), content_type="application/json", **headers).status_code
        == 422
    )
    assert web.post(f"/keys/task/{world['job']}/edit/", {"value": "{bad"}, **HX).status_code == 422
    assert AuditEvent.objects.count() == 0


def test_patch_of_a_key_whose_task_instance_is_gone_is_refused_alike_by_page_and_api(
    web, client, world, token, task_key_factory
):
    """Airflow's rule (a value write needs its task instance) holds through both faces: same message, no change."""
    _, headers = token
    orphan = task_key_factory(world["run"], task_id="gone", key="k", value=1)
    page = web.post(f"/keys/task/{orphan.pk}/edit/", {"value": "2"}, **HX)
    api = client.patch(
        "/api/v2/dags/etl/dagRuns/r1/taskInstances/gone/state-store/k",
        json.dumps({"value": 2}),
        content_type="application/json",
        **headers,
    )
    message = "Task instance not found for dag_id='etl', run_id='r1', task_id='gone', map_index=-1"
    assert page.status_code == 422 and escape(message) in page.content.decode()
    assert api.status_code == 404 and api.json() == {"detail": message}
    assert TaskStateStore.objects.get(pk=orphan.pk).value == "1" and AuditEvent.objects.count() == 0
    assert AssetStateStore.objects.count() == 2
