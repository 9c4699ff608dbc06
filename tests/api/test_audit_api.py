"""The audit trail and undo over the API: /api/statestore/v1/audit-events, .../restore and /restore."""

import json
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import AssetStateStore, DagRun, TaskStateStore
from statestore_admin.exports import documents as exports
from statestore_admin.records.models import AuditEvent
from statestore_admin.state import services
from statestore_admin.state.selectors import TaskAddress
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
RUN_ID = "scheduled__2026-11-29T00:00:00+00:00"
TASK = f"/api/v2/dags/etl/dagRuns/{RUN_ID.replace('+', '%2B')}/taskInstances/t/state-store"
EVENTS = "/api/statestore/v1/audit-events"
RESTORE = "/api/statestore/v1/restore"
LATER = timezone.now().replace(microsecond=0) + timedelta(days=3)


@pytest.fixture
def scene(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl", run_id=RUN_ID)
    task_instance_factory(run, task_id="t")
    task_key_factory(run, task_id="t", key="a", value={"n": 1}, expires_at=LATER)
    task_key_factory(run, task_id="t", key="b", value="not-expiring")
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="watermark", value="2026-11-30")
    return {"run": run, "asset": asset}


@pytest.fixture
def token(operator):
    return ApiToken.issue(operator, "nightly")


@pytest.fixture
def api(client, token):
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token[1]}"
    return client


def bearer(user) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(user)[1]}"}


def put(client, url, body):
    return client.put(url, json.dumps(body), content_type="application/json")


def post_json(client, url, body=None):
    return client.post(url, json.dumps(body) if body is not None else "", content_type="application/json")


def events(client, **params) -> list[dict]:
    response = client.get(EVENTS, params)
    assert response.status_code == 200, response.content
    return response.json()["items"]


def state():
    task = sorted(TaskStateStore.objects.values_list("task_id", "key", "value", "expires_at"))
    return task, sorted(AssetStateStore.objects.values_list("asset_id", "key", "value"))


def task_key(client, key):
    return client.get(f"{TASK}/{key}")


# Events of API writes ------------------------------------------------------------------------------------
def test_api_writes_are_events_with_the_token_and_exact_keys(api, scene, token):
    record, _ = token
    assert put(api, f"{TASK}/c", {"value": [1, 2], "expires_at": None}).status_code == 204
    assert api.patch(f"{TASK}/a", json.dumps({"value": {"n": 2}}), content_type="application/json").status_code == 200
    assert api.delete(f"{TASK}/c").status_code == 204
    assert api.delete(TASK).status_code == 204
    assert put(api, f"/api/v2/assets/{scene['asset'].pk}/state-store/watermark", {"value": "next"}).status_code == 204
    items = events(api)
    assert [e["action"] for e in items] == ["set", "clear", "delete", "patch", "set"]
    for item in items:
        assert (item["actor"], item["via"], item["outcome"], item["host"]) == ("operator", "api", "done", "127.0.0.1")
        assert item["token"] == {"id": record.pk, "name": "nightly"}
        assert item["finished_at"] and item["at"].endswith("Z") and item["restored_from"] is None
    asset_set, clear, delete, patch, create = items
    assert set(create) >= {"id", "os_user", "store", "asset_name", "asset_uri", "key_count", "details", "error"}
    assert (create["store"], create["dag_id"], create["run_id"], create["task_id"], create["map_index"]) == (
        "task",
        "etl",
        RUN_ID,
        "t",
        -1,
    )
    assert create["keys"] == [
        {
            "key": "c",
            "map_index": -1,
            "region_id": None,  # outside any region
            "dag_id": "etl",
            "run_id": RUN_ID,
            "task_id": "t",
            "asset_id": None,
            "before": None,
            "after": {"value": [1, 2], "expires_at": None},
            "truncated": False,
        }
    ]
    assert create["keys_truncated"] is False and create["keys_next_cursor"] is None
    later = LATER.isoformat().replace("+00:00", "Z")
    assert patch["keys"][0]["before"] == {"value": {"n": 1}, "expires_at": later}
    assert patch["keys"][0]["after"] == {"value": {"n": 2}, "expires_at": later}
    assert delete["keys"][0]["before"] == {"value": [1, 2], "expires_at": None} and delete["keys"][0]["after"] is None
    assert clear["key_count"] == 2 and {k["key"] for k in clear["keys"]} == {"a", "b"}
    assert (asset_set["store"], asset_set["asset_id"], asset_set["asset_name"]) == (
        "asset",
        scene["asset"].pk,
        "orders",
    )
    assert asset_set["keys"][0]["before"] == {"value": "2026-11-30"}  # asset keys have no expiry
    assert asset_set["keys"][0]["after"] == {"value": "next"}
    assert api.get(f"{EVENTS}/{create['id']}").json() == create


def test_a_value_that_is_not_json_is_shown_as_its_text(api, scene):
    TaskStateStore.objects.filter(key="b").update(value="plain text, not JSON")
    api.delete(f"{TASK}/b")
    assert events(api)[0]["keys"][0]["before"]["value"] == "plain text, not JSON"


# Filters and pagination ------------------------------------------------------------------------------------
@pytest.fixture
def mixed(api, scene, dag_run_factory, task_instance_factory, task_key_factory, user_factory):
    """Events: api delete of etl/t "a"; ui expire of other/x "o"; api asset set; command delete of etl/t "b"."""
    api.delete(f"{TASK}/a")
    other_run = dag_run_factory(dag_id="other", run_id="r2")
    task_instance_factory(other_run, task_id="x")
    row = task_key_factory(other_run, task_id="x", key="o", value=1)
    alice = user_factory("alice", perms=["task.view", "task.change"])
    services.expire_task_keys(actor=Actor(via="ui", user=alice), selection=services.TaskSelection(ids=(row.pk,)))
    put(api, f"/api/v2/assets/{scene['asset'].pk}/state-store/watermark", {"value": 2})
    services.delete_task_keys(
        actor=Actor.command(), selection=services.TaskSelection(address=TaskAddress("etl", RUN_ID, "t"), keys=("b",))
    )
    return list(AuditEvent.objects.order_by("id"))


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, [3, 2, 1, 0]),
        ({"actor": "operator"}, [2, 0]),
        ({"actor": "alice"}, [1]),
        ({"action": "delete"}, [3, 0]),
        ({"action": "expire"}, [1]),
        ({"via": "api"}, [2, 0]),
        ({"via": "command"}, [3]),
        ({"dag_id": "etl"}, [3, 0]),
        ({"run_id": "r2"}, [1]),
        ({"task_id": "x"}, [1]),
        ({"dag_id": "etl", "via": "api"}, [0]),
        ({"key": "o"}, [1]),
        ({"key": "b"}, [3]),
        ({"key": "nope"}, []),
        ({"since": "2000-01-01T00:00:00Z"}, [3, 2, 1, 0]),
        ({"until": "2000-01-01T00:00:00+00:00"}, []),
    ],
)
def test_each_filter(api, mixed, params, expected):
    assert [e["id"] for e in events(api, **params)] == [mixed[i].pk for i in expected]


def test_asset_and_time_filters(api, mixed):
    asset_event = mixed[2]
    assert [e["id"] for e in events(api, asset_id=asset_event.asset_id)] == [asset_event.pk]
    AuditEvent.objects.filter(pk=mixed[0].pk).update(at=timezone.now() - timedelta(days=2))
    yesterday = (timezone.now() - timedelta(days=1)).isoformat()
    assert [e["id"] for e in events(api, until=yesterday)] == [mixed[0].pk]
    assert mixed[0].pk not in [e["id"] for e in events(api, since=yesterday)]


@pytest.mark.parametrize(
    ("query", "loc"),
    [
        ("action=bogus", ["query", "action"]),
        ("via=web", ["query", "via"]),
        ("asset_id=x", ["query", "asset_id"]),
        ("since=2026-01-01T00:00:00", ["query", "since"]),
        ("until=yesterday", ["query", "until"]),
        ("since=2026-02-30T00:00:00Z", ["query", "since"]),
        ("limit=0", ["query", "limit"]),
        ("limit=201", ["query", "limit"]),
        ("limit=ten", ["query", "limit"]),
    ],
)
def test_bad_filters_are_422_naming_the_parameter(api, scene, query, loc):
    response = api.get(f"{EVENTS}?{query}")
    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [loc]


def test_cursor_pagination(api, scene):
    for n in range(5):
        put(api, f"{TASK}/k{n}", {"value": n})
    seen, cursor, pages = [], None, 0
    while True:
        body = api.get(EVENTS, {"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        seen += [e["id"] for e in body["items"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert pages == 3 and seen == sorted(seen, reverse=True) and len(set(seen)) == 5
    assert [e["id"] for e in events(api, limit=200)] == seen


def test_many_keys_are_capped_in_the_list_and_paged_in_the_detail(api, scene, task_key_factory, monkeypatch):
    for n in range(148):
        task_key_factory(scene["run"], task_id="t", key=f"bulk/{n:03d}")
    api.delete(TASK)
    listed = events(api)[0]
    assert listed["key_count"] == 150 and len(listed["keys"]) == 100 and listed["keys_truncated"] is True
    detail = api.get(f"{EVENTS}/{listed['id']}").json()
    assert len(detail["keys"]) == 150 and detail["keys_truncated"] is False and detail["keys_next_cursor"] is None
    assert detail["keys"][:100] == listed["keys"]
    rest = api.get(f"{EVENTS}/{listed['id']}", {"keys_cursor": listed["keys_next_cursor"]}).json()
    assert rest["keys"] == detail["keys"][100:]
    monkeypatch.setattr("statestore_admin.api.ours.audit.DETAIL_KEYS", 120)
    first = api.get(f"{EVENTS}/{listed['id']}").json()
    assert len(first["keys"]) == 120 and first["keys_truncated"] is True
    second = api.get(f"{EVENTS}/{listed['id']}", {"keys_cursor": first["keys_next_cursor"]}).json()
    assert first["keys"] + second["keys"] == detail["keys"] and second["keys_next_cursor"] is None


def test_unknown_event_is_404(api, scene):
    assert api.get(f"{EVENTS}/987654").json() == {"detail": "Audit event 987654 not found"}
    assert api.get(f"{EVENTS}/987654").status_code == 404
    response = post_json(api, f"{EVENTS}/987654/restore")
    assert response.status_code == 404 and response.json() == {"detail": "Audit event 987654 not found"}
    assert api.get(f"{EVENTS}/99999999999999999999").status_code == 404


# Restore an event ----------------------------------------------------------------------------------------
def test_restore_round_trip(api, scene, token):
    before = task_key(api, "a").json()
    api.delete(f"{TASK}/a")
    assert task_key(api, "a").status_code == 404
    deleted = events(api)[0]
    response = post_json(api, f"{EVENTS}/{deleted['id']}/restore")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["restored"], body["unchanged"], body["kept"], body["missing"]) == (1, 0, [], [])
    after = task_key(api, "a").json()
    assert (after["value"], after["expires_at"]) == (before["value"], before["expires_at"])
    restore = api.get(f"{EVENTS}/{body['events'][0]}").json()
    assert (restore["action"], restore["via"], restore["restored_from"]) == ("restore", "api", deleted["id"])
    assert restore["token"] == {"id": token[0].pk, "name": "nightly"}
    assert restore["keys"][0]["before"] is None and restore["keys"][0]["after"]["value"] == {"n": 1}
    again = post_json(api, f"{EVENTS}/{deleted['id']}/restore").json()
    assert (again["restored"], again["unchanged"], again["events"]) == (0, 1, [])


def test_a_conflict_is_409_then_overwrite_or_keep(api, scene):
    api.delete(f"{TASK}/a")
    deleted = events(api)[0]
    put(api, f"{TASK}/a", {"value": "rewritten"})
    before = state()
    response = post_json(api, f"{EVENTS}/{deleted['id']}/restore")
    assert response.status_code == 409
    body = response.json()
    assert "written again" in body["detail"] and len(body["conflicts"]) == 1
    conflict = body["conflicts"][0]
    assert (conflict["key"], conflict["dag_id"], conflict["task_id"]) == ("a", "etl", "t")
    assert conflict["current"]["value"] == '"rewritten"' and conflict["restore"]["value"] == '{"n": 1}'
    assert state() == before
    kept = post_json(api, f"{EVENTS}/{deleted['id']}/restore", {"resolutions": {conflict["id"]: "keep"}}).json()
    assert kept["restored"] == 0 and [k["key"] for k in kept["kept"]] == ["a"] and state() == before
    assert post_json(api, f"{EVENTS}/{deleted['id']}/restore", {"resolutions": {"x": "maybe"}}).status_code == 422
    assert post_json(api, f"{EVENTS}/{deleted['id']}/restore", {"other": 1}).status_code == 422
    response = api.post(f"{EVENTS}/{deleted['id']}/restore?overwrite=true")
    assert response.status_code == 200 and response.json()["restored"] == 1
    assert task_key(api, "a").json()["value"] == {"n": 1}


def test_a_key_whose_dag_run_was_deleted_is_reported_missing(api, scene):
    api.delete(f"{TASK}/a")
    deleted = events(api)[0]
    DagRun.objects.filter(pk=scene["run"].pk).delete()
    body = post_json(api, f"{EVENTS}/{deleted['id']}/restore").json()
    assert body["restored"] == 0 and body["events"] == []
    assert [(m["key"], m["dag_id"], m["run_id"]) for m in body["missing"]] == [("a", "etl", RUN_ID)]
    assert "no longer exists" in body["missing"][0]["reason"]


def test_gc_and_failed_events_are_not_restorable(api, scene):
    for action, status in (("gc", "done"), ("delete", "failed")):
        event = AuditEvent.objects.create(actor="x", via="gc", action=action, store="task", status=status)
        response = post_json(api, f"{EVENTS}/{event.pk}/restore")
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["path", "id"]


# Restore an export document ----------------------------------------------------------------------------
def export_of_everything() -> str:
    return "".join(exports.iter_document(TaskStateStore.objects.all(), AssetStateStore.objects.all()))


@pytest.mark.parametrize("how", ["json", "multipart"])
def test_restore_an_export_document(api, scene, how):
    document = export_of_everything()
    before = state()
    api.delete(TASK)
    api.delete(f"/api/v2/assets/{scene['asset'].pk}/state-store")
    put(api, f"{TASK}/a", {"value": "different"})
    assert state() != before
    if how == "json":
        response = api.post(RESTORE, document, content_type="application/json")
    else:
        response = api.post(RESTORE, {"file": SimpleUploadedFile("keys.json", document.encode())})
    assert response.status_code == 409 and [c["key"] for c in response.json()["conflicts"]] == ["a"]
    if how == "json":
        response = api.post(f"{RESTORE}?overwrite=true", document, content_type="application/json")
    else:
        upload = SimpleUploadedFile("keys.json", document.encode(), content_type="application/json")
        response = api.post(f"{RESTORE}?overwrite=true", {"file": upload})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["restored"], body["unchanged"], body["missing"]) == (3, 0, [])
    assert len(body["events"]) == 2  # one per store
    assert [(t, k, v) for t, k, v, _ in state()[0]] == [(t, k, v) for t, k, v, _ in before[0]]
    assert [e for _, _, _, e in state()[0]] == [e for _, _, _, e in before[0]]
    assert state()[1] == before[1]
    assert task_key(api, "a").json()["expires_at"] == LATER.isoformat().replace("+00:00", "Z")
    restores = events(api, action="restore")
    assert {e["store"] for e in restores} == {"task", "asset"} and all(e["via"] == "api" for e in restores)


def test_bad_uploads_are_422_and_change_nothing(api, scene):
    document = json.loads(export_of_everything())
    api.delete(f"{TASK}/a")
    before, count = state(), AuditEvent.objects.count()
    broken = {**document, "keys": [*document["keys"], {"store": "task", "key": "x"}]}
    cases = [
        api.post(RESTORE, json.dumps(broken), content_type="application/json"),
        api.post(RESTORE, json.dumps({"format": "something else"}), content_type="application/json"),
        api.post(RESTORE, json.dumps([1, 2]), content_type="application/json"),
        api.post(RESTORE, "{not json", content_type="application/json"),
        api.post(RESTORE, "", content_type="application/json"),
        api.post(RESTORE, {"file": SimpleUploadedFile("k.json", b"\xff\xfe not utf-8")}),
        api.post(RESTORE, {"file": SimpleUploadedFile("k.json", json.dumps(broken).encode())}),
        api.post(RESTORE, {"other": "field"}),
        api.post(RESTORE, "format=x", content_type="application/x-www-form-urlencoded"),
    ]
    nul = {**document, "keys": [{**document["keys"][0], "dag_id": "etl\x00"}]}
    cases.append(api.post(RESTORE, json.dumps(nul), content_type="application/json"))
    assert [r.status_code for r in cases] == [422] * len(cases)
    assert "keys[3]" in cases[0].json()["detail"][0]["msg"] and cases[0].json()["detail"][0]["loc"] == ["body"]
    assert cases[6].json()["detail"][0]["loc"] == ["body", "file"]
    assert cases[9].json()["detail"][0]["loc"] == ["body", "keys", 0, "dag_id"]
    assert state() == before and AuditEvent.objects.count() == count


# Permissions ------------------------------------------------------------------------------------------------
def restore_calls(client, event_id):
    return [
        post_json(client, f"{EVENTS}/{event_id}/restore"),
        client.post(RESTORE, export_of_everything(), content_type="application/json"),
    ]


def test_401_without_credentials(api, scene):
    api.delete(f"{TASK}/a")
    event_id = AuditEvent.objects.get().pk
    anonymous = Client()
    before = state()
    responses = [anonymous.get(EVENTS), anonymous.get(f"{EVENTS}/{event_id}"), *restore_calls(anonymous, event_id)]
    assert [r.status_code for r in responses] == [401] * 4
    assert responses[0].json() == {"detail": "Not authenticated"} and responses[0]["WWW-Authenticate"] == "Bearer"
    assert state() == before and AuditEvent.objects.count() == 1


def test_403_without_permissions(api, scene, user_factory):
    api.delete(f"{TASK}/a")
    event_id = AuditEvent.objects.get().pk
    before = state()
    stranger = Client(**bearer(user_factory("nobody")))
    responses = [stranger.get(EVENTS), stranger.get(f"{EVENTS}/{event_id}"), *restore_calls(stranger, event_id)]
    assert [r.status_code for r in responses] == [403] * 4
    assert all(r.json() == {"detail": "Forbidden"} for r in responses)
    assert state() == before and AuditEvent.objects.count() == 1


def test_view_only_reads_but_cannot_restore(api, scene, viewer):
    api.delete(f"{TASK}/a")
    event_id = AuditEvent.objects.get().pk
    before = state()
    reader = Client(**bearer(viewer))
    assert [e["id"] for e in events(reader)] == [event_id]
    assert reader.get(f"{EVENTS}/{event_id}").status_code == 200
    assert [r.status_code for r in restore_calls(reader, event_id)] == [403, 403]
    assert state() == before and AuditEvent.objects.count() == 1


def test_each_store_needs_its_own_view_permission(api, scene, user_factory):
    api.delete(f"{TASK}/a")
    put(api, f"/api/v2/assets/{scene['asset'].pk}/state-store/watermark", {"value": 3})
    task_event, asset_event = AuditEvent.objects.order_by("id")
    tasks_only = Client(**bearer(user_factory("tasks", perms=["task.view"])))
    assert [e["id"] for e in events(tasks_only)] == [task_event.pk]
    assert tasks_only.get(f"{EVENTS}/{asset_event.pk}").status_code == 403
    assets_only = Client(**bearer(user_factory("assets", perms=["asset.view"])))
    assert [e["id"] for e in events(assets_only)] == [asset_event.pk]
    assert assets_only.get(f"{EVENTS}/{task_event.pk}").status_code == 403
    # An asset writer may not view a task event, so cannot restore it; its own store's events it can.
    writer = Client(**bearer(user_factory("w", perms=["asset.view", "asset.add", "asset.change", "asset.delete"])))
    assert post_json(writer, f"{EVENTS}/{task_event.pk}/restore").status_code == 403
    assert TaskStateStore.objects.filter(key="a").count() == 0
    assert post_json(writer, f"{EVENTS}/{asset_event.pk}/restore").status_code == 200


def test_pages_hold_only_events_the_caller_may_view(api, scene, user_factory):
    for n in range(3):
        put(api, f"/api/v2/assets/{scene['asset'].pk}/state-store/k{n}", {"value": n})
        put(api, f"{TASK}/k{n}", {"value": n})
    tasks_only = Client(**bearer(user_factory("tasks", perms=["task.view"])))
    body = tasks_only.get(EVENTS, {"limit": 2}).json()
    assert [e["store"] for e in body["items"]] == ["task", "task"] and body["next_cursor"]
    rest = tasks_only.get(EVENTS, {"limit": 2, "cursor": body["next_cursor"]}).json()
    assert [e["store"] for e in rest["items"]] == ["task"]


def test_session_restore_needs_csrf(api, scene, operator):
    api.delete(f"{TASK}/a")
    event_id = AuditEvent.objects.get().pk
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    assert browser.get(EVENTS).status_code == 200
    assert post_json(browser, f"{EVENTS}/{event_id}/restore").status_code == 403
    csrf = browser.get("/").cookies["csrftoken"].value
    response = browser.post(f"{EVENTS}/{event_id}/restore", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 200 and response.json()["restored"] == 1


def test_schema_declares_the_endpoints(api):
    paths = api.get("/api/schema/?format=json").json()["paths"]
    assert set(paths["/api/statestore/v1/audit-events"]) == {"get"}
    assert set(paths["/api/statestore/v1/audit-events/{id}"]) == {"get"}
    assert set(paths["/api/statestore/v1/audit-events/{id}/restore"]) == {"post"}
    body = paths["/api/statestore/v1/restore"]["post"]["requestBody"]["content"]
    assert set(body) == {"application/json", "multipart/form-data"}


def test_listing_runs_the_same_queries_for_3_or_30_events(api, operator, dag_run_factory, task_instance_factory):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    run = dag_run_factory(dag_id="many", run_id="r")
    task_instance_factory(run, task_id="t")
    actor = Actor(via="ui", user=operator)
    address = TaskAddress("many", "r", "t")
    api.get(EVENTS)  # the token's last_used_at is written on the first use of the minute

    def queries_for(events: int) -> int:
        for i in range(events - AuditEvent.objects.count()):
            key = f"k{events}-{i}"
            services.set_task_key(actor=actor, address=address, key=key, value=i, expiry=services.Expiry("never"))
        with CaptureQueriesContext(connections["default"]) as captured:
            assert len(api.get(EVENTS, {"limit": 50}).json()["items"]) == events
        return len(captured)

    assert queries_for(3) == queries_for(30)
