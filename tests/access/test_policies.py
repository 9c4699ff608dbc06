"""The access policies (``access.policies``): one per action, the same answer on every face. Editing a value needs
view as well as change, whether through the dashboard's editor, the API's PATCH, the Django admin or the service
itself; the admin changes only what its form changed, through the services, audited via admin."""

import json
from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.utils import timezone

from statestore_admin.access import policies
from statestore_admin.access.actors import ADMIN, API, Actor
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.core.errors import Forbidden, NotFound
from statestore_admin.records.models import AuditEvent
from statestore_admin.state import services
from tests.admin_site.test_admin_state import change_url, opened
from tests.api.test_api import bearer
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
LATER = timezone.now().replace(microsecond=0) + timedelta(days=3)
RUN_ID = "r1"
EDIT_REFUSED = "Editing a value needs the permission to view"


@pytest.fixture
def keys(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl", run_id=RUN_ID)
    task_instance_factory(run, task_id="t")
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="cursor", value={"id": 7}, kind=None)
    return {"job": task_key_factory(run, task_id="t", key="job", value={"id": 1}, expires_at=LATER), "asset": asset}


@pytest.fixture
def writer(user_factory):
    """Change on both stores, and no view: may set expiries, never edit a value it cannot see."""
    return user_factory("writer", is_staff=True, perms=["task.change", "asset.change"])


def task_state(row) -> tuple:
    fresh = TaskStateStore.objects.get(pk=row.pk)
    return fresh.value, fresh.expires_at


def asset_value(asset) -> str:
    return AssetStateStore.objects.get(asset=asset, key="cursor").value


# The policies themselves ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "perms, allowed",
    [
        ([], set()),
        (["view"], {"view"}),
        (["change"], {"overwrite", "expire", "set"}),
        (["view", "change"], {"view", "overwrite", "edit", "expire", "set"}),
        (["add"], {"add", "set"}),
        (["delete"], {"delete", "clear", "delete_object"}),
        (["view", "add", "change", "delete"], {*policies.STORE_ACTIONS, policies.SET}),
    ],
)
def test_each_action_needs_its_permissions(user_factory, perms, allowed):
    user = user_factory("someone", perms=[f"task.{perm}" for perm in perms])
    actions = {*policies.STORE_ACTIONS, policies.SET}
    assert {action for action in actions if policies.allows(user, policies.TASK, action)} == allowed
    assert not any(policies.allows(user, policies.ASSET, action) for action in actions)  # per store
    for action in actions - allowed:
        with pytest.raises(Forbidden):
            policies.require(Actor(via=API, user=user), policies.TASK, action)


def test_a_command_acting_as_the_system_may_do_everything():
    system = Actor.command()
    assert all(policies.allows(system, store, action) for store in policies.STORES for action in policies.STORE_ACTIONS)
    assert policies.may_run_gc(system) and policies.may_take_snapshot(system)


def test_the_refusal_of_an_edit_names_what_is_missing(user_factory):
    change_only = user_factory("change_only", perms=["task.change"])
    view_only = user_factory("view_only", perms=["task.view"])
    with pytest.raises(Forbidden, match=EDIT_REFUSED):
        policies.require(change_only, policies.TASK, "edit")
    with pytest.raises(Forbidden, match="You do not have permission to change task state"):
        policies.require(view_only, policies.TASK, "edit")


# Edit needs view, on every face ----------------------------------------------------------------------------
def test_the_services_refuse_an_edit_without_view(writer, keys):
    actor = Actor(via=API, user=writer)
    with pytest.raises(Forbidden, match=EDIT_REFUSED):
        services.patch_task_key(actor=actor, ref=services.TaskKeyRef(id=keys["job"].pk), value="x")
    with pytest.raises(Forbidden, match=EDIT_REFUSED):
        services.set_asset_key(actor=actor, asset_id=keys["asset"].pk, key="cursor", value="x", mode=services.UPDATE)
    assert task_state(keys["job"]) == ('{"id": 1}', LATER) and asset_value(keys["asset"]) == '{"id": 7}'
    assert AuditEvent.objects.count() == 0


def test_the_dashboard_refuses_an_edit_without_view(client, writer, keys):
    client.force_login(writer)
    job, asset = keys["job"], keys["asset"]
    data = {"value": json.dumps("changed")}
    assert client.post(f"/keys/task/{job.pk}/edit/", data).status_code == 403
    assert client.post(f"/assets/{asset.pk}/key/edit/?key=cursor", data).status_code == 403
    assert task_state(job) == ('{"id": 1}', LATER) and asset_value(asset) == '{"id": 7}'
    assert AuditEvent.objects.count() == 0


def test_the_api_refuses_an_edit_without_view(client, writer, keys):
    url = f"/api/v2/dags/etl/dagRuns/{RUN_ID}/taskInstances/t/state-store/job"
    response = client.patch(url, json.dumps({"value": "changed"}), content_type="application/json", **bearer(writer))
    assert response.status_code == 403
    assert task_state(keys["job"]) == ('{"id": 1}', LATER) and AuditEvent.objects.count() == 0


def test_the_admin_refuses_an_edit_without_view(client, writer, keys):
    client.force_login(writer)
    job = keys["job"]
    response = client.post(change_url(job), {**opened(client, job), "new_value": json.dumps("changed")})
    assert response.status_code == 200 and EDIT_REFUSED in response.content.decode()
    assert task_state(job) == ('{"id": 1}', LATER) and AuditEvent.objects.count() == 0


# The admin changes only what its form changed, through the services ----------------------------------------
@pytest.fixture
def root(user_factory):
    return user_factory("root", is_staff=True, is_superuser=True)


def test_an_admin_edit_of_the_expiry_leaves_the_value_untouched(client, root, keys):
    client.force_login(root)
    job = keys["job"]
    before_update = TaskStateStore.objects.get(pk=job.pk).updated_at
    response = client.post(change_url(job), {**opened(client, job), "expiry": "never"})
    assert response.status_code == 302
    fresh = TaskStateStore.objects.get(pk=job.pk)
    assert (fresh.value, fresh.expires_at, fresh.updated_at) == ('{"id": 1}', None, before_update)
    event = AuditEvent.objects.get()
    assert (event.via, event.action, event.actor, event.status) == (ADMIN, "expiry", "root", "done")
    key = event.keys.get()
    assert (key.before_value, key.after_value) == ('{"id": 1}', '{"id": 1}')


def test_an_admin_edit_of_the_value_leaves_the_expiry_untouched(client, root, keys):
    client.force_login(root)
    job = keys["job"]
    response = client.post(change_url(job), {**opened(client, job), "new_value": '{"id": 2}'})
    assert response.status_code == 302
    assert task_state(job) == ('{"id": 2}', LATER)
    event = AuditEvent.objects.get()
    assert (event.via, event.action, event.actor, event.status) == (ADMIN, "patch", "root", "done")
    key = event.keys.get()
    assert (key.before_value, key.after_value) == ('{"id": 1}', '{"id": 2}')


def test_a_refusal_of_the_services_after_validation_is_shown_by_the_form(client, root, keys, monkeypatch):
    """The admin writes in ``save_model``, after the form validated: what the services refuse then (here, the
    key's task instance gone) is the change form again, with why, and nothing is written or logged."""
    client.force_login(root)
    job = keys["job"]
    data = {**opened(client, job), "new_value": '{"id": 2}'}

    def gone(**kwargs):
        raise NotFound("Task instance not found for dag_id='etl'")

    monkeypatch.setattr(services, "patch_task_key", gone)
    response = client.post(change_url(job), data)
    assert response.status_code == 200 and "Task instance not found" in response.content.decode()
    assert task_state(job) == ('{"id": 1}', LATER) and AuditEvent.objects.count() == 0
    assert not LogEntry.objects.exists()
