"""Undo where you are (issue 23 item 6), over HTTP: the toast of a delete, clear or expire offers the restore of
its audit event (to those who may restore), the undo is a CSRF-protected POST of that restore, the Audit list
names each event's keys, a link to a key by its id follows the key after a restore, and the "Restored" dialog
links to the restored keys."""

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

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def run(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="manual__undo")
    task_instance_factory(run, task_id="t")
    later = timezone.now() + timedelta(days=3)
    for name in ("job", "offset", "cursor", "batch", "<b>x</b>"):
        task_key_factory(run, task_id="t", key=name, value={"name": name}, expires_at=later)
    return run


@pytest.fixture
def asset(asset_factory, asset_key_factory):
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="watermark", value="2026-11-01")
    return asset


@pytest.fixture
def op_client(client, operator):
    client.force_login(operator)
    return client


def listed_in(response):
    return response.content.decode().split('name="listed" value="')[1].split('"')[0]


def act(client, url, params, **extra):
    dialog = client.get(url, params, **HX)
    assert dialog.status_code == 200, dialog.content
    return client.post(url, {**params, "listed": listed_in(dialog)}, **HX, **extra)


def toast_of(response) -> dict:
    return json.loads(response["HX-Trigger"])["toast"]


def test_a_delete_toast_offers_undo_and_the_undo_brings_the_key_back(op_client, run):
    key = TaskStateStore.objects.get(key="job")
    response = act(op_client, "/keys/task/delete/", {"ids": key.pk})
    assert response.status_code == 204
    event = AuditEvent.objects.latest("id")
    toast = toast_of(response)
    assert toast["message"].startswith("Deleted 1 key")
    assert toast["undo"] == f"/audit/{event.pk}/restore/"
    undone = op_client.post(toast["undo"], **HX)
    assert undone.status_code == 200
    assert TaskStateStore.objects.filter(key="job").exists()
    new = TaskStateStore.objects.get(key="job")
    assert f'href="/keys/task/{new.pk}/"' in undone.content.decode()  # the dialog links to the restored key


def test_expire_and_clear_toasts_offer_undo(op_client, run):
    key = TaskStateStore.objects.get(key="offset")
    expired = act(op_client, "/keys/task/expire/", {"ids": key.pk})
    assert toast_of(expired)["undo"] == f"/audit/{AuditEvent.objects.latest('id').pk}/restore/"
    cleared = act(op_client, "/keys/task/delete/", {"run": run.pk, "task_id": "t", "map_index": "-1"})
    assert toast_of(cleared)["undo"] == f"/audit/{AuditEvent.objects.latest('id').pk}/restore/"
    op_client.post(toast_of(cleared)["undo"], **HX)
    assert TaskStateStore.objects.filter(dag_run_id=run.pk).count() == 5


def test_an_asset_delete_toast_offers_undo(op_client, asset):
    response = act(op_client, f"/assets/{asset.pk}/delete/", {"keys": "watermark"})
    toast = toast_of(response)
    op_client.post(toast["undo"], **HX)
    assert AssetStateStore.objects.filter(asset_id=asset.pk, key="watermark").exists()


def test_a_delete_that_moves_to_another_page_carries_undo_in_its_message(op_client, run):
    key = TaskStateStore.objects.get(key="job")
    response = act(op_client, "/keys/task/delete/", {"ids": key.pk, "next": f"/runs/{run.pk}/tasks/t/"})
    assert response.status_code == 204
    page = op_client.get(response["HX-Redirect"]).content.decode()
    event = AuditEvent.objects.latest("id")
    form = re.search(r'<form method="post" action="/audit/(\d+)/restore/"[^>]*class="toast-undo">(.*?)</form>', page)
    assert form and int(form.group(1)) == event.pk
    assert 'name="csrfmiddlewaretoken"' in form.group(2)


def test_no_undo_for_someone_who_may_not_restore(user_factory, run):
    deleter = user_factory("deleter", perms=["task.view", "task.delete", "task.change"])  # no add: no restore
    client = Client()
    client.force_login(deleter)
    response = act(client, "/keys/task/delete/", {"ids": TaskStateStore.objects.get(key="job").pk})
    assert "undo" not in toast_of(response)
    event = AuditEvent.objects.latest("id")
    assert client.post(f"/audit/{event.pk}/restore/", **HX).status_code == 403  # and the restore refuses
    assert not TaskStateStore.objects.filter(key="job").exists()


def test_a_viewer_cannot_undo(op_client, viewer, run):
    act(op_client, "/keys/task/delete/", {"ids": TaskStateStore.objects.get(key="job").pk})
    event = AuditEvent.objects.latest("id")
    client = Client()
    client.force_login(viewer)
    assert client.post(f"/audit/{event.pk}/restore/", **HX).status_code == 403
    assert not TaskStateStore.objects.filter(key="job").exists()


def test_the_undo_needs_the_csrf_token(operator, run):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    page = client.get(f"/keys/task/{TaskStateStore.objects.get(key='job').pk}/").content.decode()
    token = re.search(r'"X-CSRFToken": "([^"]+)"', page).group(1)
    key = TaskStateStore.objects.get(key="job")
    dialog = client.get("/keys/task/delete/", {"ids": key.pk}, **HX)
    client.post("/keys/task/delete/", {"ids": key.pk, "listed": listed_in(dialog)}, HTTP_X_CSRFTOKEN=token, **HX)
    event = AuditEvent.objects.latest("id")
    assert client.post(f"/audit/{event.pk}/restore/", **HX).status_code == 403
    assert not TaskStateStore.objects.filter(key="job").exists()
    assert client.post(f"/audit/{event.pk}/restore/", HTTP_X_CSRFTOKEN=token, **HX).status_code == 200
    assert TaskStateStore.objects.filter(key="job").exists()


def test_an_old_link_to_a_restored_key_redirects_to_it(op_client, run):
    old = TaskStateStore.objects.get(key="job")
    act(op_client, "/keys/task/delete/", {"ids": old.pk})
    assert op_client.get(f"/keys/task/{old.pk}/").status_code == 404  # deleted: gone
    op_client.post(f"/audit/{AuditEvent.objects.latest('id').pk}/restore/", **HX)
    new = TaskStateStore.objects.get(key="job")
    assert new.pk != old.pk
    response = op_client.get(f"/keys/task/{old.pk}/")
    assert response.status_code == 302 and response["Location"] == f"/keys/task/{new.pk}/"


def test_an_old_link_does_not_reveal_a_key_out_of_scope(user_factory, op_client, run, dag_run_factory):
    old = TaskStateStore.objects.get(key="job")
    act(op_client, "/keys/task/delete/", {"ids": old.pk})
    op_client.post(f"/audit/{AuditEvent.objects.latest('id').pk}/restore/", **HX)
    from statestore_admin.records.models import AccessScope

    scoped = user_factory("scoped", perms=["task.view"], unscoped=False)
    AccessScope.objects.create(user=scoped, kind=AccessScope.Kind.DAG, pattern="other_*")
    client = Client()
    client.force_login(scoped)
    assert client.get(f"/keys/task/{old.pk}/").status_code == 404


def test_the_audit_list_names_the_keys(op_client, run):
    act(op_client, "/keys/task/delete/", {"run": run.pk, "task_id": "t", "map_index": "-1"})
    page = flat(op_client.get("/audit/").content.decode())
    names = re.search(r'data-testid="event-keys">(.*?)</span>', page, re.S).group(1)
    assert names.count("<code>") == 3
    assert "and 2 more" in names
    assert "<b>x</b>" not in page  # a key is user data: escaped


def test_an_old_link_to_a_key_in_a_region_follows_it_after_a_restore(op_client, run, region_factory):
    """Airflow 3.4: the same key name in two iterations of a loop; the old link finds its own iteration's key."""
    from tests import factories

    loop = region_factory(run, node_id="loop")
    factories.make_region_instance(run, "t", loop, 0)
    factories.make_region_instance(run, "t", loop, 1)
    first = factories.make_region_key(run, "t", loop, 0, key="job", value="first")
    factories.make_region_key(run, "t", loop, 1, key="job", value="second")
    undo = toast_of(act(op_client, "/keys/task/delete/", {"ids": first.pk}))["undo"]
    op_client.post(undo, **HX)
    again = TaskStateStore.objects.get(key="job", region_id=loop.pk, map_index=0)
    response = op_client.get(f"/keys/task/{first.pk}/")
    assert response.status_code == 302 and response["Location"] == f"/keys/task/{again.pk}/"
    assert json.loads(again.value) == "first"
