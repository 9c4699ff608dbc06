"""Django admin's task state pages: a read-only list and two audited actions through the services."""

import json
from datetime import timedelta

import pytest
from django.contrib.admin.sites import site
from django.contrib.messages import get_messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.db import SessionStore
from django.test import RequestFactory
from django.utils import timezone

from statestore_admin.airflow.admin import TaskStateStoreAdmin
from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.state.models import AuditEvent

from .conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
URL = "/admin/airflow/taskstatestore/"
LATER = timezone.now().replace(microsecond=0) + timedelta(days=3)


@pytest.fixture
def keys(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="r1")
    task_instance_factory(run, task_id="t")
    return {
        "job": task_key_factory(run, task_id="t", key="job", value={"id": 1}, expires_at=LATER),
        "never": task_key_factory(run, task_id="t", key="never", value="n"),
        "other": task_key_factory(run, task_id="t", key="other<b>", value=[1]),
    }


@pytest.fixture
def root(user_factory):
    return user_factory("root", is_staff=True, is_superuser=True)


def state():
    return sorted(TaskStateStore.objects.values_list("key", "value", "expires_at"))


def act(client, action, *rows):
    return client.post(URL, {"action": action, "_selected_action": [r.pk for r in rows]}, follow=True)


def test_a_superuser_browses_and_searches(client, root, keys):
    client.force_login(root)
    page = client.get(URL)
    assert page.status_code == 200
    html = page.content.decode()
    assert "job" in html and "other&lt;b&gt;" in html and "other<b>" not in html  # escaped
    assert 'value="expire_now"' in html and 'value="delete_keys"' in html and "delete_selected" not in html
    assert "Add task state store" not in html
    found = client.get(URL, {"q": "nev"}).content.decode()
    assert "never" in found and ">job<" not in found
    assert client.get(URL, {"q": "etl"}).status_code == 200


def test_the_change_form_is_read_only_and_there_is_no_add_or_delete_view(client, root, keys):
    client.force_login(root)
    job = keys["job"]
    form = client.get(f"{URL}{job.pk}/change/")
    assert form.status_code == 200
    html = form.content.decode()
    assert "&quot;id&quot;: 1" in html and 'name="_save"' not in html and "<textarea" not in html
    assert client.post(f"{URL}{job.pk}/change/", {"key": "renamed", "value": "2"}).status_code == 403
    assert client.get(f"{URL}add/").status_code == 403
    assert client.get(f"{URL}{job.pk}/delete/").status_code == 403
    assert client.post(f"{URL}{job.pk}/delete/", {"post": "yes"}).status_code == 403
    assert TaskStateStore.objects.get(pk=job.pk).key == "job"
    assert AuditEvent.objects.count() == 0


def test_expire_now_is_one_admin_event_with_before_and_after(client, root, keys):
    client.force_login(root)
    before = state()
    response = act(client, "expire_now", keys["job"], keys["never"])
    assert response.status_code == 200
    assert "Expired 2 keys." in [str(m) for m in response.context["messages"]]
    event = AuditEvent.objects.get()
    assert (event.via, event.action, event.actor, event.key_count, event.status) == (
        "admin",
        "expire",
        "root",
        2,
        "done",
    )
    recorded = {k.key: k for k in event.keys.all()}
    assert set(recorded) == {"job", "never"}
    now = TaskStateStore.objects.get(pk=keys["job"].pk).expires_at
    assert now <= timezone.now()
    assert (recorded["job"].before_value, recorded["job"].before_expires_at) == ('{"id": 1}', LATER)
    assert (recorded["job"].after_value, recorded["job"].after_expires_at) == ('{"id": 1}', now)
    assert (recorded["never"].before_expires_at, recorded["never"].after_expires_at) == (None, now)
    assert TaskStateStore.objects.get(pk=keys["other"].pk).expires_at is None  # not selected
    assert len(state()) == len(before)


def test_delete_is_one_admin_event_with_before_and_no_after(client, root, keys):
    client.force_login(root)
    response = act(client, "delete_keys", keys["job"])
    assert "Deleted 1 key." in [str(m) for m in response.context["messages"]]
    assert not TaskStateStore.objects.filter(pk=keys["job"].pk).exists()
    assert TaskStateStore.objects.count() == 2
    event = AuditEvent.objects.get()
    assert (event.via, event.action, event.key_count, event.dag_id, event.task_id) == ("admin", "delete", 1, "etl", "t")
    key = event.keys.get()
    assert (key.key, key.before_value, key.before_expires_at) == ("job", json.dumps({"id": 1}), LATER)
    assert (key.after_value, key.after_expires_at) == (None, None)


def test_staff_without_delete_permission_cannot_delete(client, user_factory, keys):
    staff = user_factory("staff", is_staff=True, perms=["task.view", "task.change"])
    client.force_login(staff)
    html = client.get(URL).content.decode()
    assert 'value="expire_now"' in html and 'value="delete_keys"' not in html
    before = state()
    act(client, "delete_keys", keys["job"], keys["never"])
    client.post(f"{URL}{keys['job'].pk}/delete/", {"post": "yes"})
    assert state() == before and AuditEvent.objects.count() == 0


def test_staff_with_view_only_can_browse_but_not_act(client, user_factory, keys):
    staff = user_factory("looker", is_staff=True, perms=["task.view"])
    client.force_login(staff)
    assert client.get(URL).status_code == 200
    before = state()
    act(client, "expire_now", keys["job"])
    act(client, "delete_keys", keys["job"])
    assert state() == before and AuditEvent.objects.count() == 0


def test_a_refusal_of_the_service_is_an_error_message_and_changes_nothing(user_factory, keys):
    """The actions' own permission gate hides them; should the service still refuse, the admin says so."""
    staff = user_factory("looker", is_staff=True, perms=["task.view"])
    request = RequestFactory().post(URL)
    request.user, request.session = staff, SessionStore()
    request._messages = FallbackStorage(request)
    model_admin = TaskStateStoreAdmin(TaskStateStore, site)
    before = state()
    model_admin.delete_keys(request, TaskStateStore.objects.filter(pk=keys["job"].pk))
    model_admin.expire_now(request, TaskStateStore.objects.filter(pk=keys["job"].pk))
    assert [(m.level_tag, str(m)) for m in get_messages(request)] == [
        ("error", "You do not have permission to delete task state."),
        ("error", "You do not have permission to change task state."),
    ]
    assert state() == before and AuditEvent.objects.count() == 0
