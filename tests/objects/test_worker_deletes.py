"""Deletes and clears of rows holding worker-side references, through every face that deletes state (the
dashboard's actions, Airflow's /api/v2 DELETE endpoints, Django admin's "Delete" action), on a real
``file://`` object storage configured as common.io's backend is: the rows go first and are committed, then
their objects; a failed object delete keeps the row deleted, is recorded in the audit event and told in the
answer, and leaves an orphan. Inline references (values under the threshold) never touch the storage."""

import json
from pathlib import Path

import fsspec
import pytest
from django.db import connections
from fsspec.implementations.local import LocalFileSystem

from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.exports import restore as restores
from statestore_admin.objects import store as objects
from statestore_admin.records.models import AuditEvent
from statestore_admin.state import services
from tests.conftest import ALL_PERMS, BOTH_DATABASES
from tests.listing import confirm
from tests.objects_helpers import (
    ENV_PATH,
    file_storage,
    object_exists,
    read_only,
    ref_value,
    set_option,
    write_object,
)

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
TI = "/api/v2/dags/etl/dagRuns/r%201/taskInstances/t/state-store"
MAPPED = "/api/v2/dags/etl/dagRuns/r%201/taskInstances/mapped/state-store"
ADMIN = "/admin/airflow/taskstatestore/"


@pytest.fixture
def store(tmp_path, monkeypatch):
    return file_storage(tmp_path, monkeypatch)


@pytest.fixture
def world(store, dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    """A run "r 1" of "etl": task "t" with an object ("job"), an inline reference ("small") and a plain value;
    a mapped task with an object at map indexes 0, 1 and 12; asset "orders" (uri s3://bucket/orders) with an
    object written by name, one by uri and an inline one. ``refs`` names every object, ``rows`` their rows."""
    run = dag_run_factory(dag_id="etl", run_id="r 1")
    task_instance_factory(run, task_id="t")
    refs, rows = {}, {}

    def task_object(task_id, map_index, key, value):
        ref = write_object(store, store.task_ref("etl", "r 1", task_id, map_index, key), value)
        name = key if task_id == "t" else f"{task_id}[{map_index}]"
        refs[name] = ref
        rows[name] = task_key_factory(run, task_id=task_id, map_index=map_index, key=key, value=ref_value(ref)).pk

    task_object("t", -1, "job", {"id": 1})
    rows["small"] = task_key_factory(run, task_id="t", key="small", value=ref_value('{"a": 1}')).pk
    rows["plain"] = task_key_factory(run, task_id="t", key="plain", value=2).pk
    for map_index in (0, 1, 12):
        task_instance_factory(run, task_id="mapped", map_index=map_index)
        task_object("mapped", map_index, "a", [map_index])
    asset = asset_factory(name="orders", uri="s3://bucket/orders")
    refs["by_name"] = write_object(store, store.asset_ref("orders", "by_name"), "n")
    refs["by_uri"] = write_object(store, store.asset_ref("s3://bucket/orders", "by_uri"), "u")
    for key in ("by_name", "by_uri"):
        rows[key] = asset_key_factory(asset, key=key, value=ref_value(refs[key])).pk
    rows["asset_inline"] = asset_key_factory(asset, key="asset_inline", value=ref_value("3")).pk
    return {"run": run, "asset": asset, "refs": refs, "rows": rows, "store": store}


@pytest.fixture
def ui(operator):
    return Actor(via="ui", user=operator, host="127.0.0.1")


@pytest.fixture
def operator(user_factory):
    """The operator may also use Django admin (staff), with every store permission."""
    return user_factory("operator", perms=ALL_PERMS, is_staff=True)


@pytest.fixture
def web(client, operator):
    client.force_login(operator)
    return client


def toast(response) -> dict:
    return json.loads(response["HX-Trigger"])["toast"]


def admin_messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


# Every face: (request, names of the objects it deletes, audit action) ---------------------------------
FACES = {
    "page: delete a key": (
        lambda c, w: confirm(c, "/keys/task/delete/", {"ids": [w["rows"]["job"]]}, **HX),
        ["job"],
        "delete",
    ),
    "page: delete keys with and without objects": (
        lambda c, w: confirm(
            c, "/keys/task/delete/", {"ids": [w["rows"][n] for n in ("job", "small", "plain", "mapped[1]")]}, **HX
        ),
        ["job", "mapped[1]"],
        "delete",
    ),
    "page: clear a task instance": (
        lambda c, w: confirm(c, "/keys/task/delete/", {"run": w["run"].pk, "task_id": "t", "map_index": "-1"}, **HX),
        ["job"],
        "clear",
    ),
    "page: clear one map index": (
        lambda c, w: confirm(
            c, "/keys/task/delete/", {"run": w["run"].pk, "task_id": "mapped", "map_index": "12"}, **HX
        ),
        ["mapped[12]"],
        "clear",
    ),
    "page: clear all map indexes": (
        lambda c, w: confirm(
            c, "/keys/task/delete/", {"run": w["run"].pk, "task_id": "mapped", "map_index": "all"}, **HX
        ),
        ["mapped[0]", "mapped[1]", "mapped[12]"],
        "clear",
    ),
    "page: delete an asset key (by name)": (
        lambda c, w: confirm(c, f"/assets/{w['asset'].pk}/delete/", {"keys": ["by_name"]}, **HX),
        ["by_name"],
        "delete",
    ),
    "page: delete an asset key (by uri)": (
        lambda c, w: confirm(c, f"/assets/{w['asset'].pk}/delete/", {"keys": ["by_uri", "asset_inline"]}, **HX),
        ["by_uri"],
        "delete",
    ),
    "page: clear an asset": (
        lambda c, w: confirm(c, f"/assets/{w['asset'].pk}/delete/", {"all": "1"}, **HX),
        ["by_name", "by_uri"],
        "clear",
    ),
    "api: DELETE a key": (lambda c, w: c.delete(f"{TI}/job"), ["job"], "delete"),
    "api: DELETE a task instance's keys": (lambda c, w: c.delete(TI), ["job"], "clear"),
    "api: DELETE one map index": (lambda c, w: c.delete(f"{MAPPED}?map_index=12"), ["mapped[12]"], "clear"),
    "api: DELETE all map indices": (
        lambda c, w: c.delete(f"{MAPPED}?all_map_indices=true"),
        ["mapped[0]", "mapped[1]", "mapped[12]"],
        "clear",
    ),
    "api: DELETE an asset key": (
        lambda c, w: c.delete(f"/api/v2/assets/{w['asset'].pk}/state-store/by_uri"),
        ["by_uri"],
        "delete",
    ),
    "api: DELETE an asset's keys": (
        lambda c, w: c.delete(f"/api/v2/assets/{w['asset'].pk}/state-store"),
        ["by_name", "by_uri"],
        "clear",
    ),
    "admin: Delete action": (
        lambda c, w: c.post(
            ADMIN,
            {"action": "delete_keys", "_selected_action": [w["rows"][n] for n in ("job", "small", "mapped[0]")]},
            follow=True,
        ),
        ["job", "mapped[0]"],
        "delete",
    ),
}
DELETED_ROWS = {  # rows each face deletes besides those of its objects
    "page: delete keys with and without objects": ["small", "plain"],
    "page: clear a task instance": ["small", "plain"],
    "page: delete an asset key (by uri)": ["asset_inline"],
    "page: clear an asset": ["asset_inline"],
    "api: DELETE a task instance's keys": ["small", "plain"],
    "api: DELETE an asset's keys": ["asset_inline"],
    "admin: Delete action": ["small"],
}


def _row_exists(world, name) -> bool:
    model = AssetStateStore if name.startswith(("by_", "asset_")) else TaskStateStore
    if model is AssetStateStore:
        return model.objects.filter(asset_id=world["asset"].pk, key=name).exists()
    return model.objects.filter(pk=world["rows"][name]).exists()


@pytest.mark.parametrize("face", FACES)
def test_every_face_deletes_the_rows_and_then_their_objects(web, world, face):
    request, deleted, action = FACES[face]
    response = request(web, world)
    assert response.status_code in (200, 204), response.content
    store, refs = world["store"], world["refs"]
    gone_rows = set(deleted) | set(DELETED_ROWS.get(face, []))
    for name in world["rows"]:
        assert _row_exists(world, name) is (name not in gone_rows), name
    for name, ref in refs.items():
        assert object_exists(store, ref) is (name not in deleted), name
    event = AuditEvent.objects.get()
    assert (event.action, event.status) == (action, "done")
    assert event.details["objects"] == {"deleted": len(deleted), "missing": 0, "failed": 0, "failures": []}
    if face.startswith("page"):
        assert toast(response)["level"] == "success"
        assert "could not be deleted" not in toast(response)["message"]
    if face.startswith("api"):  # our headers on Airflow's 204
        assert response["X-Statestore-Audit-Event"] == str(event.pk)
        assert response["X-Statestore-Objects-Deleted"] == str(len(deleted))
        assert response["X-Statestore-Objects-Failed"] == "0"


def test_clear_all_map_indices_through_the_service_reports_every_object(world, ui):
    outcome = services.clear_task_instance(
        actor=ui, scope=services.TaskAddress("etl", "r 1", "mapped", -1), all_map_indices=True
    )
    assert (outcome.changed, outcome.objects.deleted, outcome.objects.failed_count) == (3, 3, 0)
    assert outcome.event.details["all_map_indices"] is True
    assert not any(object_exists(world["store"], world["refs"][f"mapped[{i}]"]) for i in (0, 1, 12))


# A failed object delete -----------------------------------------------------------------------------------
def _locked_dir(world, name) -> Path:
    return Path(world["store"].path(world["refs"][name])).parent


def _check_failed(world, name, event):
    ref = world["refs"][name]
    assert not _row_exists(world, name)  # the row stays deleted
    assert object_exists(world["store"], ref)  # the object remains: an orphan
    recorded = event.details["objects"]
    assert (recorded["deleted"], recorded["missing"], recorded["failed"]) == (0, 0, 1)
    [failure] = recorded["failures"]
    assert failure["ref"] == ref and failure["error"].startswith(("PermissionError", "OSError"))
    assert event.status == "done" and event.key_count == 1
    return failure


def test_page_delete_into_a_read_only_directory(web, world):
    with read_only(_locked_dir(world, "job")):
        response = confirm(web, "/keys/task/delete/", {"ids": [world["rows"]["job"]]}, **HX)
    assert response.status_code == 204
    failure = _check_failed(world, "job", AuditEvent.objects.get())
    assert toast(response)["level"] == "warning"
    message = toast(response)["message"]
    assert message.startswith("Deleted 1 key")
    assert "1 worker-side object could not be deleted and is now orphaned" in message
    assert world["refs"]["job"] in message and failure["error"] in message and "Orphans page" in message


def test_page_clear_of_an_asset_with_one_read_only_object(web, world):
    with read_only(_locked_dir(world, "by_uri")):
        response = confirm(web, f"/assets/{world['asset'].pk}/delete/", {"all": "1"}, **HX)
    assert response.status_code == 204
    event = AuditEvent.objects.get()
    assert AssetStateStore.objects.filter(asset_id=world["asset"].pk).count() == 0
    assert not object_exists(world["store"], world["refs"]["by_name"])
    assert object_exists(world["store"], world["refs"]["by_uri"])
    recorded = event.details["objects"]
    assert (recorded["deleted"], recorded["failed"]) == (1, 1)
    assert recorded["failures"][0]["ref"] == world["refs"]["by_uri"]
    assert world["refs"]["by_uri"] in toast(response)["message"]


def test_api_delete_into_a_read_only_directory(web, world):
    with read_only(_locked_dir(world, "job")):
        response = web.delete(f"{TI}/job")
    assert response.status_code == 204 and response.content == b""
    _check_failed(world, "job", AuditEvent.objects.get())
    assert (response["X-Statestore-Objects-Deleted"], response["X-Statestore-Objects-Failed"]) == ("0", "1")


def test_admin_delete_into_a_read_only_directory(web, world):
    with read_only(_locked_dir(world, "job")):
        response = web.post(ADMIN, {"action": "delete_keys", "_selected_action": [world["rows"]["job"]]}, follow=True)
    assert response.status_code == 200
    _check_failed(world, "job", AuditEvent.objects.get())
    [message] = admin_messages(response)
    assert "could not be deleted" in message and world["refs"]["job"] in message
    assert [m.level_tag for m in response.context["messages"]] == ["warning"]


def test_the_orphan_is_overwritten_by_the_next_write_of_the_same_key(world, ui):
    """Airflow's recovery: the reference is deterministic, so the worker's next write of the key lands on the
    orphan (written here as the provider writes)."""
    store, ref = world["store"], world["refs"]["job"]
    with read_only(_locked_dir(world, "job")):
        services.delete_task_keys(actor=ui, selection=services.TaskSelection(ids=(world["rows"]["job"],)))
    assert object_exists(store, ref)
    assert write_object(store, store.task_ref("etl", "r 1", "t", -1, "job"), {"id": 2}) == ref
    assert objects.read_object(store, ref, 100) == b'{"id": 2}'


# Inline and unreachable references ---------------------------------------------------------------------
def test_inline_references_never_touch_the_storage(web, world, tmp_path):
    """The whole storage is read-only and would fail any delete: an inline reference's delete does not try."""
    with read_only(tmp_path / "state"):
        response = confirm(web, "/keys/task/delete/", {"ids": [world["rows"]["small"], world["rows"]["plain"]]}, **HX)
        api = web.delete(f"/api/v2/assets/{world['asset'].pk}/state-store/asset_inline")
    assert response.status_code == 204 and api.status_code == 204
    assert "worker-side" not in toast(response)["message"] and toast(response)["level"] == "success"
    assert "X-Statestore-Objects-Deleted" not in api and "X-Statestore-Objects-Failed" not in api
    assert api["X-Statestore-Audit-Event"]
    for event in AuditEvent.objects.all():
        assert "objects" not in event.details and event.status == "done"
    assert not _row_exists(world, "small") and not _row_exists(world, "asset_inline")


def test_inline_references_without_any_storage_configured(web, world, monkeypatch, ui):
    set_option(monkeypatch, ENV_PATH, None)
    assert objects.storage() is None
    outcome = services.delete_task_keys(actor=ui, selection=services.TaskSelection(ids=(world["rows"]["small"],)))
    assert outcome.changed == 1 and outcome.objects is None


def test_an_object_reference_without_storage_configured_fails_and_is_reported(world, monkeypatch, ui):
    set_option(monkeypatch, ENV_PATH, None)
    outcome = services.delete_task_keys(actor=ui, selection=services.TaskSelection(ids=(world["rows"]["job"],)))
    assert outcome.changed == 1 and not _row_exists(world, "job")
    assert outcome.objects.failed_count == 1 and outcome.objects.failed[0][0] == world["refs"]["job"]
    assert "state_store_objectstorage_path" in outcome.event.details["objects"]["failures"][0]["error"]
    assert object_exists(world["store"], world["refs"]["job"])


def test_a_reference_outside_the_base_is_never_deleted(web, world, tmp_path, task_key_factory):
    outside = tmp_path / "elsewhere.json"
    outside.write_text("1")
    row = task_key_factory(world["run"], task_id="t", key="crafted", value=ref_value(f"file://{outside}"))
    traversal = task_key_factory(
        world["run"], task_id="t", key="traversal", value=ref_value(f"{world['store'].base}/../elsewhere.json")
    )
    response = confirm(web, "/keys/task/delete/", {"ids": [row.pk, traversal.pk]}, **HX)
    assert response.status_code == 204
    assert outside.read_text() == "1"
    assert not TaskStateStore.objects.filter(pk__in=[row.pk, traversal.pk]).exists()
    recorded = AuditEvent.objects.get().details["objects"]
    assert (recorded["deleted"], recorded["failed"]) == (0, 2)
    assert all("never opens or deletes" in f["error"] for f in recorded["failures"])
    assert "2 worker-side objects could not be deleted" in toast(response)["message"]


def test_an_already_missing_object_counts_as_missing(web, world):
    Path(world["store"].path(world["refs"]["job"])).unlink()
    response = web.delete(f"{TI}/job")
    assert response.status_code == 204
    assert AuditEvent.objects.get().details["objects"] == {"deleted": 0, "missing": 1, "failed": 0, "failures": []}


# Edits and undo --------------------------------------------------------------------------------------------
def test_an_edit_keeps_the_object_and_its_undo_restores_the_reference(web, world, ui, read_objects):
    store, ref = world["store"], world["refs"]["job"]
    response = web.post(f"/keys/task/{world['rows']['job']}/edit/", {"value": '{"id": 9}'}, **HX)
    assert response.status_code in (200, 204), response.content
    assert TaskStateStore.objects.get(pk=world["rows"]["job"]).value == '{"id": 9}'
    assert object_exists(store, ref)  # the object is left for the undo (it is an orphan meanwhile)
    outcome = restores.restore_event(actor=ui, event_id=AuditEvent.objects.get().pk)
    assert outcome.dangling == []  # the object was kept: nothing dangles
    row = TaskStateStore.objects.get(key="job")
    assert json.loads(row.value) == ref_value(ref)
    assert objects.resolve_task_row(row).text == '{"id": 1}'


def test_undo_of_a_delete_restores_a_reference_to_a_deleted_object(web, world, ui, read_objects):
    """What happens today: the delete removed the object after the row; the undo brings back the row, and with
    it a reference whose object is gone (a dangling reference: Airflow's SDK reads it as no value)."""
    store, ref = world["store"], world["refs"]["job"]
    confirm(web, "/keys/task/delete/", {"ids": [world["rows"]["job"]]}, **HX)
    assert not object_exists(store, ref)
    outcome = restores.restore_event(actor=ui, event_id=AuditEvent.objects.get().pk)
    assert outcome.restored == 1 and outcome.dangling == [ref]
    assert "1 restored reference points at a worker-side object that no longer exists" in outcome.describe()
    assert ref in outcome.describe()
    row = TaskStateStore.objects.get(key="job", task_id="t")
    assert json.loads(row.value) == ref_value(ref)
    assert not object_exists(store, ref)
    resolved = objects.resolve_task_row(row)
    assert resolved.text is None and "dangling" in resolved.error
    # Undoing the restore deletes the row again; its object is already missing.
    restore = AuditEvent.objects.filter(action="restore").get()
    restores.restore_event(actor=ui, event_id=restore.pk)
    assert not TaskStateStore.objects.filter(key="job", task_id="t").exists()


def test_undo_of_a_delete_from_the_audit_page_says_the_reference_dangles(web, world):
    ref = world["refs"]["by_uri"]
    web.delete(f"/api/v2/assets/{world['asset'].pk}/state-store/by_uri")
    event = AuditEvent.objects.get()
    response = web.post(f"/audit/{event.pk}/restore/", **HX)
    assert response.status_code == 200, response.content
    message = toast(response)["message"]
    assert message.startswith("Restored 1 key") and "no longer exists" in message and ref in message
    assert json.loads(AssetStateStore.objects.get(key="by_uri").value) == ref_value(ref)
    assert not object_exists(world["store"], ref)


# The order: the rows are deleted and committed before any object is touched ----------------------------------
class ObservedFileSystem(LocalFileSystem):
    """The local filesystem under another protocol, noting what the databases hold when it is asked to delete
    an object. Its objects are real files; only the observation is added."""

    protocol = ("observedfile",)
    seen: list[dict] = []

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, str) and path.startswith("observedfile://"):
            path = path[len("observedfile://") :]
        return super()._strip_protocol(path)

    def rm_file(self, path):
        ObservedFileSystem.seen.append(
            {
                "path": path,
                "rows": TaskStateStore.objects.count() + AssetStateStore.objects.count(),
                "airflow_in_transaction": connections["airflow"].in_atomic_block,
                "default_in_transaction": connections["default"].in_atomic_block,
                "events": list(AuditEvent.objects.values_list("status", flat=True)),
            }
        )
        return super().rm_file(path)


@pytest.fixture
def observed(tmp_path, monkeypatch):
    fsspec.register_implementation("observedfile", ObservedFileSystem, clobber=True)
    ObservedFileSystem.seen = []
    store = file_storage(tmp_path, monkeypatch)
    set_option(monkeypatch, ENV_PATH, f"observedfile://{tmp_path}/state/")
    store = objects.storage()
    assert store.base == f"observedfile://{tmp_path}/state"
    return store


@pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True)
def test_rows_are_deleted_and_committed_before_their_objects(
    observed, ui, dag_run_factory, task_instance_factory, task_key_factory, committed_airflow_tables
):
    run = dag_run_factory(dag_id="etl", run_id="r")
    task_instance_factory(run, task_id="t")
    refs = [write_object(observed, observed.task_ref("etl", "r", "t", -1, k), k) for k in ("a", "b")]
    for key, ref in zip(("a", "b"), refs, strict=True):
        task_key_factory(run, task_id="t", key=key, value=ref_value(ref))
    outcome = services.clear_task_instance(actor=ui, scope=services.TaskAddress("etl", "r", "t", -1))
    assert outcome.objects.deleted == 2
    assert sorted(s["path"] for s in ObservedFileSystem.seen) == [observed.path(r) for r in refs]
    for seen in ObservedFileSystem.seen:
        assert seen["rows"] == 0  # the rows were gone
        assert not seen["airflow_in_transaction"] and not seen["default_in_transaction"]  # and committed
        assert seen["events"] == ["done"]  # the audit event finished


@pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True)
def test_an_asset_clear_through_the_api_deletes_committed_rows_before_their_objects(
    observed, client, operator, asset_factory, asset_key_factory, committed_airflow_tables
):
    asset = asset_factory(name="orders", uri="s3://bucket/orders")
    refs = [
        write_object(observed, observed.asset_ref("orders", "by_name"), 1),
        write_object(observed, observed.asset_ref("s3://bucket/orders", "by_uri"), 2),
    ]
    for key, ref in zip(("by_name", "by_uri"), refs, strict=True):
        asset_key_factory(asset, key=key, value=ref_value(ref))
    client.force_login(operator)
    response = client.delete(f"/api/v2/assets/{asset.pk}/state-store")
    assert response.status_code == 204 and response["X-Statestore-Objects-Deleted"] == "2"
    assert sorted(s["path"] for s in ObservedFileSystem.seen) == sorted(observed.path(r) for r in refs)
    for seen in ObservedFileSystem.seen:
        assert seen["rows"] == 0
        assert not seen["airflow_in_transaction"] and not seen["default_in_transaction"]
        assert seen["events"] == ["done"]
