"""Editing a worker-side reference (issue 23 item 9), over HTTP with a real ``file://`` object storage (the
demo's kind of local object backend): the editor says that saving replaces the reference with an inline value
and leaves the object behind, and offers to delete the object too, after the row (the order of deletes)."""

import json
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.records.models import AuditEvent
from tests.conftest import BOTH_DATABASES
from tests.html import flat
from tests.objects_helpers import object_exists, read_only, ref_value, write_object

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
RUN_ID = "scheduled__2026-11-29"


@pytest.fixture
def world(object_storage, dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    store = object_storage
    run = dag_run_factory(dag_id="s3_ingest", run_id=RUN_ID)
    task_instance_factory(run, task_id="download")
    ref = write_object(store, store.task_ref("s3_ingest", RUN_ID, "download", -1, "manifest"), {"files": [1, 2]})
    row = task_key_factory(run, task_id="download", key="manifest", value=ref_value(ref))
    inline = task_key_factory(run, task_id="download", key="small", value=ref_value('{"n": 1}'))
    asset = asset_factory(name="orders", uri="s3://warehouse/orders")
    asset_ref = write_object(store, store.asset_ref("orders", "cursor"), {"id": 7})
    asset_key_factory(asset, key="cursor", value=ref_value(asset_ref))
    return {"store": store, "ref": ref, "row": row, "inline": inline, "asset": asset, "asset_ref": asset_ref}


@pytest.fixture
def op_client(client, operator):
    client.force_login(operator)
    return client


def edit(client, row, value, **extra):
    dialog = client.get(f"/keys/task/{row.pk}/edit/", **HX).content.decode()
    seen = re.search(r'name="seen_updated_at" value="([^"]+)"', dialog).group(1)
    return client.post(f"/keys/task/{row.pk}/edit/", {"value": value, "seen_updated_at": seen, **extra}, **HX)


def test_the_editor_says_what_saving_does_to_the_reference(op_client, world):
    dialog = op_client.get(f"/keys/task/{world['row'].pk}/edit/", **HX).content.decode()
    warning = dialog.split('data-testid="ref-edit-warning"')[1].split("</div>")[0]
    assert world["ref"] in warning and "replaces the reference with the inline value" in warning
    assert "left behind as an orphan" in warning and 'name="delete_object"' in warning
    inline = op_client.get(f"/keys/task/{world['inline'].pk}/edit/", **HX).content.decode()
    assert "holds its value inline (no object)" in inline and 'name="delete_object"' not in inline
    plain = TaskStateStore.objects.filter(pk=world["row"].pk).update(value='{"x": 1}')
    assert plain == 1
    assert "ref-edit-warning" not in op_client.get(f"/keys/task/{world['row'].pk}/edit/", **HX).content.decode()


def test_saving_without_the_box_leaves_the_object_as_an_orphan(op_client, world):
    response = edit(op_client, world["row"], '{"files": [3]}')
    assert response.status_code == 204
    assert json.loads(TaskStateStore.objects.get(pk=world["row"].pk).value) == {"files": [3]}
    assert object_exists(world["store"], world["ref"])


def test_saving_with_the_box_deletes_the_object_after_the_row(op_client, world):
    response = edit(op_client, world["row"], '{"files": [3]}', delete_object="1")
    assert response.status_code == 204
    toast = json.loads(response["HX-Trigger"])["toast"]
    assert toast["level"] == "success" and "Its worker-side object was deleted." in toast["message"]
    assert json.loads(TaskStateStore.objects.get(pk=world["row"].pk).value) == {"files": [3]}
    assert not object_exists(world["store"], world["ref"])
    event = AuditEvent.objects.latest("id")
    assert event.action == "patch" and event.details["objects"]["deleted"] == 1


def test_a_refused_save_deletes_no_object(op_client, world):
    row = world["row"]
    dialog = op_client.get(f"/keys/task/{row.pk}/edit/", **HX).content.decode()
    seen = re.search(r'name="seen_updated_at" value="([^"]+)"', dialog).group(1)
    TaskStateStore.objects.filter(pk=row.pk).update(updated_at=timezone.now() + timedelta(seconds=5))  # written since
    data = {"value": '{"files": [3]}', "seen_updated_at": seen, "delete_object": "1"}
    response = op_client.post(f"/keys/task/{row.pk}/edit/", data, **HX)
    assert response.status_code == 422 and 'data-testid="conflict"' in response.content.decode()
    assert object_exists(world["store"], world["ref"])
    assert 'name="delete_object" value="1" data-testid="delete-object" checked' in flat(response.content.decode())


def test_a_new_value_that_is_a_reference_keeps_the_object(op_client, world):
    response = edit(op_client, world["row"], json.dumps(ref_value(world["ref"] + ".bak")), delete_object="1")
    assert response.status_code == 422 and "is a worker-side reference itself" in response.content.decode()
    assert TaskStateStore.objects.get(pk=world["row"].pk).worker_ref == world["ref"]
    assert object_exists(world["store"], world["ref"])


def test_deleting_the_object_needs_the_delete_permission(user_factory, world):
    editor = user_factory("editor", perms=["task.view", "task.change"])
    client = Client()
    client.force_login(editor)
    dialog = client.get(f"/keys/task/{world['row'].pk}/edit/", **HX).content.decode()
    assert 'name="delete_object"' not in dialog and "needs the permission to delete keys" in dialog
    response = edit(client, world["row"], '{"files": [3]}', delete_object="1")
    assert response.status_code == 403
    assert TaskStateStore.objects.get(pk=world["row"].pk).worker_ref == world["ref"]
    assert object_exists(world["store"], world["ref"])


def test_an_object_that_cannot_be_deleted_is_a_warning_and_the_value_is_saved(op_client, world):
    directory = world["store"].path(world["ref"]).rsplit("/", 1)[0]
    with read_only(directory):
        response = edit(op_client, world["row"], '{"files": [3]}', delete_object="1")
    toast = json.loads(response["HX-Trigger"])["toast"]
    assert toast["level"] == "warning" and "could not be deleted and is now orphaned" in toast["message"]
    assert json.loads(TaskStateStore.objects.get(pk=world["row"].pk).value) == {"files": [3]}


def test_an_asset_reference_edit_deletes_its_object_too(op_client, world):
    asset = world["asset"]
    url = f"/assets/{asset.pk}/key/edit/?key=cursor"
    dialog = op_client.get(url, **HX).content.decode()
    assert world["asset_ref"] in dialog and 'name="delete_object"' in dialog
    seen = re.search(r'name="seen_updated_at" value="([^"]+)"', dialog).group(1)
    data = {"key": "cursor", "value": '{"id": 8}', "seen_updated_at": seen, "delete_object": "1"}
    response = op_client.post(f"/assets/{asset.pk}/key/edit/", data, **HX)
    assert response.status_code == 204
    assert json.loads(AssetStateStore.objects.get(asset_id=asset.pk, key="cursor").value) == {"id": 8}
    assert not object_exists(world["store"], world["asset_ref"])
