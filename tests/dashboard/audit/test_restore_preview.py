"""Smaller things of issue 23 item 15, over HTTP: "Restore from file" shows what it would restore before acting
(nothing changes until the same file is confirmed), and "Expire now" is disabled, with why, on an expired key."""

import hashlib
import json
import re
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.records.models import AuditEvent
from tests.conftest import BOTH_DATABASES
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
PAGE = "/audit/restore-file/"


@pytest.fixture
def run(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="manual__preview")
    task_instance_factory(run, task_id="t")
    later = timezone.now() + timedelta(days=3)
    task_key_factory(run, task_id="t", key="job", value={"id": 1}, expires_at=later)
    task_key_factory(run, task_id="t", key="offset", value=41, expires_at=later)
    task_key_factory(run, task_id="t", key="old", value=1, expires_at=timezone.now() - timedelta(hours=1))
    return run


@pytest.fixture
def op_client(client, operator):
    client.force_login(operator)
    return client


def document(run, **values) -> bytes:
    entries = [
        {
            "store": "task",
            "dag_id": run.dag_id,
            "run_id": run.run_id,
            "task_id": "t",
            "map_index": -1,
            "key": key,
            "value": value,
            "expires_at": None,
        }
        for key, value in values.items()
    ]
    return json.dumps({"format": "statestore-admin/keys", "version": 1, "keys": entries}).encode()


def post(client, content: bytes, **extra):
    return client.post(PAGE, {"file": SimpleUploadedFile("keys.json", content), **extra}, **HX)


def test_the_upload_previews_and_changes_nothing(op_client, run):
    content = document(run, job={"id": 2}, offset=41, new="<b>x</b>")
    TaskStateStore.objects.filter(key="offset").update(value="41", expires_at=None)  # as in the file
    events = AuditEvent.objects.count()
    response = post(op_client, content)
    page = flat(response.content.decode())
    assert response.status_code == 200 and 'data-testid="upload-preview"' in page
    assert f'name="confirmed" value="{hashlib.sha256(content).hexdigest()}"' in page
    assert re.search(r"writes <strong>1</strong> key ", page)  # new (absent)
    assert "leaves 1 already as in the file" in page  # offset
    assert re.search(r"<strong>1</strong> now holds another value", page)  # job: a conflict, shown side by side
    assert 'data-testid="conflicts"' in page and "Overwrite 1 and restore 2 keys" in page
    assert 'data-will="restore"' in page and "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    assert TaskStateStore.objects.get(key="job").value == '{"id": 1}'
    assert not TaskStateStore.objects.filter(key="new").exists()
    assert AuditEvent.objects.count() == events


def test_confirming_the_same_file_restores(op_client, run):
    content = document(run, job={"id": 2})
    TaskStateStore.objects.filter(key="job").delete()
    post(op_client, content)
    assert not TaskStateStore.objects.filter(key="job").exists()
    response = post(op_client, content, confirmed=hashlib.sha256(content).hexdigest())
    assert response.status_code == 200 and "Restored 1 key" in response.content.decode()
    assert json.loads(TaskStateStore.objects.get(key="job").value) == {"id": 2}


def test_another_file_than_the_previewed_one_is_previewed_not_restored(op_client, run):
    previewed = document(run, job={"id": 2})
    response = post(op_client, document(run, job={"id": 3}), confirmed=hashlib.sha256(previewed).hexdigest())
    assert response.status_code == 200 and "This is not the file that was previewed" in response.content.decode()
    assert TaskStateStore.objects.get(key="job").value == '{"id": 1}'


def test_a_viewer_gets_no_preview(client, viewer, run):
    client.force_login(viewer)
    assert post(client, document(run, job={"id": 2})).status_code == 403


def test_expire_now_is_disabled_with_the_reason_on_an_expired_key(op_client, run):
    expired = op_client.get(f"/keys/task/{TaskStateStore.objects.get(key='old').pk}/").content.decode()
    button = re.search(r'<button[^>]*data-testid="expire-now"[^>]*>', expired).group(0)
    assert "disabled" in button and 'aria-describedby="expire-now-why"' in button and "hx-get" not in button
    assert "Already expired" in expired
    live = op_client.get(f"/keys/task/{TaskStateStore.objects.get(key='job').pk}/").content.decode()
    assert "disabled" not in re.search(r'<button[^>]*data-testid="expire-now"[^>]*>', live).group(0)
