"""Worker-side references in Airflow's /api/v2 endpoints (issue 15): ``?resolve=true`` (our extension, off by
default) and the ``X-Statestore-*`` headers on deletes and clears. Without them the answers are Airflow's.

A real ``file://`` object storage in ``tmp_path`` (see tests/dashboard/objects/test_worker_refs_pages.py for how it
is set up).
"""

import json
from pathlib import Path

import pytest

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.objects import store as objects
from statestore_admin.records.models import AuditEvent
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES
from tests.dashboard.objects.test_worker_refs_pages import (  # noqa: F401
    immutable,
    ref_value,
    set_common_io,
    storage,
    write_object,
    write_ref,
)

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

RUN_ID = "scheduled__2026-12-01T00:00:00+00:00"
TASKS = f"/api/v2/dags/etl/dagRuns/{RUN_ID.replace('+', '%2B')}/taskInstances"
EXTENSION_FIELDS = {"reference", "resolved", "resolve_error"}


def bearer(user) -> dict:
    _, token = ApiToken.issue(user, "tests")
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


@pytest.fixture
def api(client, operator):
    client.defaults.update(bearer(operator))
    return client


@pytest.fixture
def reading(settings):
    settings.WORKER_BACKEND_READ = True


@pytest.fixture
def scene(storage, dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):  # noqa: F811
    """A mapped task's key at map index 3 and a plain task's keys, an asset with keys by name and by URI."""
    run = dag_run_factory(dag_id="etl", run_id=RUN_ID)
    task_instance_factory(run, task_id="load", map_index=3)
    task_instance_factory(run, task_id="plain")
    ref = write_ref(storage, storage.task_ref("etl", RUN_ID, "load", 3, "cursor/a b"), {"offset": 1200})
    mapped = task_key_factory(run, task_id="load", map_index=3, key="cursor/a b", value=ref_value(ref))
    other = write_ref(storage, storage.task_ref("etl", RUN_ID, "load", 3, "second"), [1, 2])
    task_key_factory(run, task_id="load", map_index=3, key="second", value=ref_value(other))
    task_key_factory(run, task_id="load", map_index=3, key="inline", value=ref_value('{"small": true}'))
    task_key_factory(run, task_id="plain", key="job", value={"id": 7})
    asset = asset_factory(name="orders", uri="s3://warehouse/orders")
    by_name = write_ref(storage, storage.asset_ref("orders", "watermark"), "2026-11-30")
    asset_key_factory(asset, key="watermark", value=ref_value(by_name), kind="task")
    by_uri = write_ref(storage, storage.asset_ref("s3://warehouse/orders", "seen"), {"n": 2})
    asset_key_factory(asset, key="seen", value=ref_value(by_uri), kind="task")
    return {"run": run, "mapped": mapped, "asset": asset, "storage": storage}


def key_url(key: str, task_id: str = "load", map_index: int = 3) -> str:
    return f"{TASKS}/{task_id}/state-store/{key.replace('/', '%2F').replace(' ', '%20')}?map_index={map_index}"


# ?resolve=true ----------------------------------------------------------------------------------------
def test_resolve_gives_the_value_behind_a_task_reference(api, scene, reading):
    body = api.get(key_url("cursor/a b") + "&resolve=true").json()
    assert body["value"] == {"offset": 1200} and body["resolved"] is True and body["resolve_error"] is None
    assert body["reference"] == scene["mapped"].worker_ref and body["reference"].endswith("/3/cursor%2Fa%20b.gz")
    assert set(body) == {"key", "value", "updated_at", "expires_at"} | EXTENSION_FIELDS
    assert api.get(key_url("second") + "&resolve=1").json()["value"] == [1, 2]


def test_resolve_gives_the_value_behind_asset_references(api, scene, reading):
    asset = scene["asset"]
    body = api.get(f"/api/v2/assets/{asset.pk}/state-store/watermark?resolve=true").json()
    assert body["value"] == "2026-11-30" and body["resolved"] is True and body["last_updated_by"]["kind"] == "task"
    assert body["reference"] == scene["storage"].asset_ref("orders", "watermark")
    body = api.get(f"/api/v2/assets/{asset.pk}/state-store/seen?resolve=true").json()
    assert body["value"] == {"n": 2} and body["resolved"] is True


def test_without_resolve_the_answer_is_airflows(api, scene, reading):
    plain = api.get(key_url("cursor/a b"))
    assert plain.content == api.get(key_url("cursor/a b") + "&resolve=false").content
    body = plain.json()
    assert set(body) == {"key", "value", "updated_at", "expires_at"}
    assert body["value"] == {"__airflow_state_ref__": scene["mapped"].worker_ref}
    stored = json.loads(TaskStateStore.objects.get(pk=scene["mapped"].pk).value)
    assert plain.content.decode().count(stored["__airflow_state_ref__"]) == 1
    asset = api.get(f"/api/v2/assets/{scene['asset'].pk}/state-store/watermark").json()
    assert set(asset) == {"key", "value", "updated_at", "last_updated_by"} and "__airflow_state_ref__" in asset["value"]


def test_resolve_of_plain_and_inline_values(api, scene):
    body = api.get(key_url("job", task_id="plain", map_index=-1) + "&resolve=true").json()
    assert (body["value"], body["reference"], body["resolved"], body["resolve_error"]) == ({"id": 7}, None, True, None)
    body = api.get(key_url("inline") + "&resolve=true").json()  # no read needed: reading may stay off
    assert body["value"] == {"small": True} and body["reference"] == '{"small": true}' and body["resolved"] is True


@pytest.mark.parametrize("bad", ["maybe", "", "2", "truee"])
def test_an_invalid_resolve_is_a_422_like_every_bad_query_parameter(api, scene, bad):
    response = api.get(key_url("cursor/a b") + f"&resolve={bad}")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "resolve"]
    response = api.get(f"/api/v2/assets/{scene['asset'].pk}/state-store/seen?resolve={bad}")
    assert response.status_code == 422


def test_resolve_says_why_a_value_is_not_given(api, scene, settings, task_key_factory, tmp_path):
    off = api.get(key_url("cursor/a b") + "&resolve=true").json()  # WORKER_BACKEND_READ is off by default
    assert off["resolved"] is False and "off" in off["resolve_error"]
    assert off["value"] == {"__airflow_state_ref__": scene["mapped"].worker_ref}
    settings.WORKER_BACKEND_READ = True
    store, run = scene["storage"], scene["run"]
    task_key_factory(
        run, task_id="load", map_index=3, key="gone", value=ref_value(store.task_ref("etl", RUN_ID, "load", 3, "gone"))
    )
    assert "dangling reference" in api.get(key_url("gone") + "&resolve=true").json()["resolve_error"]
    task_key_factory(run, task_id="load", map_index=3, key="passwd", value=ref_value("file:///etc/passwd"))
    passwd = api.get(key_url("passwd") + "&resolve=true")
    assert passwd.json()["resolved"] is False and "outside" in passwd.json()["resolve_error"]
    assert b"root:" not in passwd.content
    write_object(tmp_path / "secret.json.gz", "outside-the-base")
    task_key_factory(run, task_id="load", map_index=3, key="dots", value=ref_value(f"{store.base}/../secret.json.gz"))
    dots = api.get(key_url("dots") + "&resolve=true")
    assert dots.json()["resolved"] is False and b"outside-the-base" not in dots.content
    settings.WORKER_BACKEND_READ_MAX_BYTES = 5
    assert "too large" in api.get(key_url("cursor/a b") + "&resolve=true").json()["resolve_error"]


def test_resolve_needs_view_permission_as_the_plain_get(client, user_factory, scene, reading):
    client.defaults.update(bearer(user_factory("deleter", perms=["task.delete", "asset.delete"])))
    response = client.get(key_url("cursor/a b") + "&resolve=true")
    assert response.status_code == 403 and b"1200" not in response.content
    assert client.get(f"/api/v2/assets/{scene['asset'].pk}/state-store/seen?resolve=true").status_code == 403


def test_the_schema_documents_the_extension(api):
    schema = api.get("/api/schema/?format=json").json()
    item = schema["paths"]["/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/state-store/{key}"]
    assert "resolve" in {p["name"] for p in item["get"]["parameters"]}
    assert set(item["delete"]["responses"]["204"]["headers"]) == {
        "X-Statestore-Audit-Event",
        "X-Statestore-Objects-Deleted",
        "X-Statestore-Objects-Failed",
    }
    properties = schema["components"]["schemas"]["TaskStateStoreItemResponse"]["properties"]
    assert EXTENSION_FIELDS <= set(properties)
    assert "reference" not in schema["components"]["schemas"]["TaskStateStoreResponse"]["properties"]


# Headers on deletes ------------------------------------------------------------------------------------
def latest_event() -> AuditEvent:
    return AuditEvent.objects.order_by("-pk").first()


def test_delete_of_a_task_key_names_its_event_and_deletes_the_object(api, scene):
    path = Path(scene["storage"].path(scene["mapped"].worker_ref))
    response = api.delete(key_url("cursor/a b"))
    assert response.status_code == 204 and response.content == b""
    assert response["X-Statestore-Audit-Event"] == str(latest_event().pk)
    assert (response["X-Statestore-Objects-Deleted"], response["X-Statestore-Objects-Failed"]) == ("1", "0")
    assert not path.exists() and not TaskStateStore.objects.filter(pk=scene["mapped"].pk).exists()


def test_delete_of_a_plain_key_or_an_absent_one(api, scene):
    response = api.delete(key_url("job", task_id="plain", map_index=-1))
    assert response.status_code == 204 and response["X-Statestore-Audit-Event"] == str(latest_event().pk)
    assert "X-Statestore-Objects-Deleted" not in response and "X-Statestore-Objects-Failed" not in response
    inline = api.delete(key_url("inline"))  # an inline reference has no object
    assert inline.status_code == 204 and "X-Statestore-Objects-Deleted" not in inline
    absent = api.delete(key_url("nothing-here"))
    assert absent.status_code == 204 and "X-Statestore-Audit-Event" not in absent


def test_clear_of_a_task_instance_counts_its_objects(api, scene):
    response = api.delete(f"{TASKS}/load/state-store?map_index=3")
    assert response.status_code == 204
    assert response["X-Statestore-Audit-Event"] == str(latest_event().pk)
    assert (response["X-Statestore-Objects-Deleted"], response["X-Statestore-Objects-Failed"]) == ("2", "0")
    assert not TaskStateStore.objects.filter(task_id="load").exists()


def test_delete_and_clear_of_asset_keys(api, scene):
    asset = scene["asset"]
    one = api.delete(f"/api/v2/assets/{asset.pk}/state-store/watermark")
    assert one.status_code == 204 and one["X-Statestore-Objects-Deleted"] == "1"
    assert one["X-Statestore-Audit-Event"] == str(latest_event().pk)
    clear = api.delete(f"/api/v2/assets/{asset.pk}/state-store")
    assert clear.status_code == 204 and clear["X-Statestore-Objects-Deleted"] == "1"
    assert clear["X-Statestore-Objects-Failed"] == "0" and not AssetStateStore.objects.filter(asset=asset).exists()


def test_a_failed_object_delete_is_counted_and_the_row_stays_deleted(api, scene, immutable):  # noqa: F811
    path = Path(scene["storage"].path(scene["mapped"].worker_ref))
    immutable(path.parent)
    response = api.delete(key_url("cursor/a b"))
    assert response.status_code == 204
    assert (response["X-Statestore-Objects-Deleted"], response["X-Statestore-Objects-Failed"]) == ("0", "1")
    assert not TaskStateStore.objects.filter(pk=scene["mapped"].pk).exists() and path.exists()
    event = latest_event()
    assert response["X-Statestore-Audit-Event"] == str(event.pk)
    failures = event.details["objects"]["failures"]
    assert event.details["objects"]["failed"] == 1 and failures[0]["ref"] == scene["mapped"].worker_ref
    # The clear of what remains deletes the other object: the directory is still immutable, it fails too.
    clear = api.delete(f"{TASKS}/load/state-store?map_index=3")
    assert clear["X-Statestore-Objects-Failed"] == "1" and clear["X-Statestore-Objects-Deleted"] == "0"


def test_without_storage_an_objects_delete_fails_and_is_counted(api, scene, monkeypatch):
    set_common_io(monkeypatch, "path", None)
    assert objects.storage() is None
    response = api.delete(key_url("cursor/a b"))
    assert response.status_code == 204 and response["X-Statestore-Objects-Failed"] == "1"
    assert Path(scene["storage"].path(scene["mapped"].worker_ref)).exists()  # left behind: an orphan


def test_delete_needs_delete_permission(client, user_factory, scene):
    client.defaults.update(bearer(user_factory("viewer2", perms=["task.view", "asset.view"])))
    response = client.delete(key_url("cursor/a b"))
    assert response.status_code == 403 and "X-Statestore-Audit-Event" not in response
    assert client.delete(f"/api/v2/assets/{scene['asset'].pk}/state-store").status_code == 403
    assert TaskStateStore.objects.filter(pk=scene["mapped"].pk).exists()
