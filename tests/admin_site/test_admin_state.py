"""Django admin's state store pages: the task state list (columns, filters, search, no value loaded), two audited
actions and the change form through the services, read-only and value-less views by permission, scoping (404 out of
scope), the asset list linking to the dashboard, and the access scopes' admin."""

import html
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.sites import site
from django.contrib.auth.models import Group
from django.contrib.messages import get_messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.db import SessionStore
from django.db import connections
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from statestore_admin.admin_site import state_store as state_admin
from statestore_admin.admin_site.state_store import TaskStateStoreAdmin
from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.records.models import AccessScope, AuditEvent
from tests.conftest import BOTH_DATABASES

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


def test_there_is_no_add_or_delete_view(client, root, keys):
    client.force_login(root)
    job = keys["job"]
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


# The list: columns, filters, search --------------------------------------------------------------------
def rows_of(response) -> list[str]:
    """The keys listed on a changelist page, in order."""
    return [html.unescape(k) for k in re.findall(r'<td class="field-key">(.*?)</td>', response.content.decode())]


@pytest.fixture
def statuses(dag_run_factory, task_instance_factory, task_key_factory):
    """One key per expiry status, in two DAGs."""
    now = timezone.now()
    etl, ml = dag_run_factory(dag_id="etl_daily", run_id="r1"), dag_run_factory(dag_id="ml_train", run_id="r2")
    for run in (etl, ml):
        task_instance_factory(run, task_id="t")
    return {
        "gone": task_key_factory(etl, task_id="t", key="gone", value="x" * 40, expires_at=now - timedelta(hours=1)),
        "soon": task_key_factory(etl, task_id="t", key="soon", value=[1, 2], expires_at=now + timedelta(hours=2)),
        "later": task_key_factory(ml, task_id="t", key="later", value={"a": 1}, expires_at=now + timedelta(days=9)),
        "never": task_key_factory(ml, task_id="t", key="never", value=7),
    }


def test_the_list_shows_size_and_expiry_status_without_loading_a_value(client, root, statuses):
    client.force_login(root)
    with CaptureQueriesContext(connections["airflow"]) as queries:
        page = client.get(URL)
    assert page.status_code == 200
    text = page.content.decode()
    for column in ("dag_id", "run_id", "task_id", "map_index", "key", "size", "updated", "expiry_status"):
        assert f'column-{column}"' in text
    cells = dict(re.findall(r'<td class="field-key">(.*?)</td>.*?<td class="field-size">(\d+)</td>', text, flags=re.S))
    assert cells == {"gone": "42", "soon": "6", "later": "8", "never": "1"}  # len(json.dumps(value))
    status = dict(
        re.findall(r'<td class="field-key">(.*?)</td>.*?<td class="field-expiry_status">(.*?)</td>', text, re.S)
    )
    assert status == {
        "gone": "expired, awaiting GC",
        "soon": "expiring within 24 h",
        "later": "not expired",
        "never": "never expires",
    }
    selects = [q["sql"] for q in queries.captured_queries if "task_state_store" in q["sql"]]
    for sql in selects:  # the value only inside LENGTH(…), never as a column; no count of the whole table
        assert sql.replace('LENGTH("task_state_store"."value")', "").count('"value"') == 0, sql
        assert "DISTINCT" not in sql.upper()
    # The capped count reads one row past the cap to tell "exactly 10,000" from "more".
    assert any("LIMIT 10001" in sql for sql in selects if "COUNT(" in sql)


@pytest.mark.parametrize(
    "status, expected",
    [("expired", ["gone"]), ("expiring", ["soon"]), ("never", ["never"]), ("live", ["never", "later", "soon"])],
)
def test_the_status_filter(client, root, statuses, status, expected):
    client.force_login(root)
    page = client.get(URL, {"status": status})
    assert page.status_code == 200
    assert sorted(rows_of(page)) == sorted(expected)
    assert sorted(rows_of(client.get(URL, {"status": "bogus"}))) == sorted(statuses)  # unknown: no filter


def test_the_dag_filter_offers_the_dags_with_state_and_filters(client, root, statuses, monkeypatch):
    client.force_login(root)
    text = client.get(URL).content.decode()
    assert "?dag_id=etl_daily" in text and "?dag_id=ml_train" in text
    assert sorted(rows_of(client.get(URL, {"dag_id": "ml_train"}))) == ["later", "never"]
    assert sorted(rows_of(client.get(URL, {"dag_id": "etl_daily", "status": "expired"}))) == ["gone"]
    monkeypatch.setattr(state_admin, "DAG_CHOICES", 1)
    capped = client.get(URL).content.decode()
    assert "the first 1 of 2; search finds the others" in capped
    assert "?dag_id=etl_daily" in capped and "?dag_id=ml_train" not in capped
    chosen = client.get(URL, {"dag_id": "ml_train"})  # beyond the cap, chosen by URL: filtered and shown
    assert sorted(rows_of(chosen)) == ["later", "never"] and "?dag_id=ml_train" in chosen.content.decode()


@pytest.mark.parametrize("q, expected", [("soo", ["soon"]), ("ml_tr", ["later", "never"]), ("r1", ["gone", "soon"])])
def test_search_by_key_dag_run_and_task(client, root, statuses, q, expected):
    client.force_login(root)
    assert sorted(rows_of(client.get(URL, {"q": q}))) == expected


def test_search_by_task_id(client, root, statuses, dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="other", run_id="r3")
    task_instance_factory(run, task_id="special_task")
    task_key_factory(run, task_id="special_task", key="k")
    client.force_login(root)
    assert rows_of(client.get(URL, {"q": "special_t"})) == ["k"]


# The change form ------------------------------------------------------------------------------------
def change_url(row) -> str:
    return f"{URL}{row.pk}/change/"


def opened(client, row) -> dict:
    """The change form as a browser would post it back untouched."""
    page = client.get(change_url(row))
    assert page.status_code == 200
    text = page.content.decode()
    textarea = re.search(r'<textarea name="new_value"[^>]*>\n?(.*?)</textarea>', text, re.S)
    seen = re.search(r'name="seen_updated_at" value="([^"]*)"', text)
    return {
        "new_value": html.unescape(textarea.group(1)) if textarea else "",
        "expiry": "keep",
        "expires_at_text": "",
        "seen_updated_at": html.unescape(seen.group(1)) if seen else "",
        "_save": "Save",
    }


def row_state(row):
    fresh = TaskStateStore.objects.get(pk=row.pk)
    return fresh.value, fresh.expires_at, fresh.updated_at


def test_the_change_form_edits_the_value_through_the_service_audited_via_admin(client, root, keys):
    client.force_login(root)
    job = keys["job"]
    data = opened(client, job)
    assert json.loads(data["new_value"]) == {"id": 1}
    response = client.post(change_url(job), {**data, "new_value": '{"id": 2}'})
    assert response.status_code == 302 and response["Location"] == URL
    fresh = TaskStateStore.objects.get(pk=job.pk)
    assert (fresh.value, fresh.expires_at) == ('{"id": 2}', LATER)  # the expiry kept
    event = AuditEvent.objects.get()
    assert (event.via, event.action, event.actor, event.status, event.key_count) == (
        "admin",
        "patch",
        "root",
        "done",
        1,
    )
    key = event.keys.get()
    assert (key.key, key.before_value, key.after_value) == ("job", '{"id": 1}', '{"id": 2}')


def test_the_change_form_sets_the_expiry_and_leaves_an_untouched_value_alone(client, root, keys):
    client.force_login(root)
    job = keys["job"]
    at = timezone.now().replace(microsecond=0) + timedelta(days=40)
    response = client.post(change_url(job), {**opened(client, job), "expiry": "at", "expires_at_text": at.isoformat()})
    assert response.status_code == 302
    assert row_state(job)[:2] == ('{"id": 1}', at)
    event = AuditEvent.objects.get()
    assert (event.via, event.action) == ("admin", "expiry")
    assert client.post(change_url(job), {**opened(client, job), "expiry": "never"}).status_code == 302
    assert row_state(job)[:2] == ('{"id": 1}', None)
    assert AuditEvent.objects.filter(via="admin", action="expiry").count() == 2
    assert AuditEvent.objects.filter(action="patch").count() == 0


def test_saving_an_untouched_form_changes_nothing(client, root, keys):
    client.force_login(root)
    before = state()
    assert client.post(change_url(keys["job"]), opened(client, keys["job"])).status_code == 302
    assert state() == before and AuditEvent.objects.count() == 0


@pytest.mark.parametrize(
    "change, message",
    [
        ({"new_value": "{not json"}, "Not valid JSON"),
        ({"new_value": ""}, "Not valid JSON"),
        ({"new_value": "null"}, "null is not a storable value."),
        ({"new_value": "[" * 70 + "]" * 70}, "nest more than 64 levels"),
        ({"new_value": json.dumps("x" * 30)}, "32 bytes as JSON; [state_store] max_value_storage_bytes allows 20"),
        ({"new_value": '"ok"', "expiry": "at", "expires_at_text": "tomorrow"}, "Not a date and time"),
        ({"new_value": '"ok"', "expiry": "at", "expires_at_text": "2026-12-01T00:00:00"}, "Give a time zone"),
        ({"expiry": "sometimes"}, "Select a valid choice"),
    ],
)
def test_bad_input_is_a_form_error_and_nothing_changes(client, root, keys, monkeypatch, change, message):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__MAX_VALUE_STORAGE_BYTES", "20")
    client.force_login(root)
    job = keys["job"]
    before = row_state(job)
    response = client.post(change_url(job), {**opened(client, job), **change})
    assert response.status_code == 200
    text = html.unescape(response.content.decode())
    assert message in text and "errornote" in text
    assert row_state(job) == before and AuditEvent.objects.count() == 0


def test_a_value_written_since_the_form_opened_is_a_conflict(client, root, keys):
    client.force_login(root)
    job = keys["job"]
    data = opened(client, job)
    TaskStateStore.objects.filter(pk=job.pk).update(value='"by a task"', updated_at=timezone.now())
    response = client.post(change_url(job), {**data, "new_value": '"mine"'})
    assert response.status_code == 200 and "after you opened it" in response.content.decode()
    assert TaskStateStore.objects.get(pk=job.pk).value == '"by a task"' and AuditEvent.objects.count() == 0


def test_a_view_only_user_gets_a_read_only_page_and_a_refused_post(client, user_factory, keys):
    looker = user_factory("looker", is_staff=True, perms=["task.view"])
    client.force_login(looker)
    job = keys["job"]
    page = client.get(change_url(job))
    assert page.status_code == 200
    text = page.content.decode()
    assert "&quot;id&quot;: 1" in text  # the value, shown
    assert 'name="_save"' not in text and "<textarea" not in text and 'name="expiry"' not in text
    before = state()
    data = {"new_value": '"changed"', "expiry": "never", "seen_updated_at": "", "_save": "Save"}
    assert client.post(change_url(job), data).status_code == 403
    assert state() == before and AuditEvent.objects.count() == 0


def test_a_change_only_user_sets_the_expiry_but_not_the_value_it_cannot_see(client, user_factory, keys):
    """Editing a value needs view as well as change, in the admin as on every face (``access.policies``): a user
    with change only sets a key's expiry by its page, without seeing its value, and a value sent anyway is
    refused with nothing written."""
    writer = user_factory("writer", is_staff=True, perms=["task.change"])
    client.force_login(writer)
    job = keys["job"]
    page = client.get(change_url(job))
    assert page.status_code == 200
    text = page.content.decode()
    assert "&quot;id&quot;" not in text and '"id"' not in text and "field-size" not in text
    assert 'name="new_value"' not in text and 'name="expiry"' in text and 'name="_save"' in text
    assert client.get(URL).status_code == 403  # the list (and its count) needs view
    assert "/admin/airflow/taskstatestore/" not in client.get("/admin/").content.decode()
    response = client.post(change_url(job), {**opened(client, job), "expiry": "never"})  # no value sent: kept
    assert response.status_code == 302 and response["Location"] == change_url(job)
    assert row_state(job)[:2] == ('{"id": 1}', None)
    refused = client.post(change_url(job), {**opened(client, job), "new_value": "[3]"})
    assert refused.status_code == 200
    assert "Editing a value needs the permission to view task state" in html.unescape(refused.content.decode())
    assert row_state(job)[:2] == ('{"id": 1}', None)
    assert list(AuditEvent.objects.order_by("id").values_list("via", "action")) == [("admin", "expiry")]


def test_a_missing_key_is_a_404(client, root, keys):
    client.force_login(root)
    assert client.get(f"{URL}999999/change/").status_code == 404
    assert client.get(f"{URL}nope/change/").status_code == 404


# Scoping ------------------------------------------------------------------------------------------------
@pytest.fixture
def etl_team(user_factory):
    """A staff Operator-like user whose group may see etl_* DAGs only (and the asset "etl_out")."""
    member = user_factory("etl_member", is_staff=True, perms=["task.view", "task.change", "asset.view"], unscoped=False)
    group = Group.objects.create(name="etl team")
    member.groups.add(group)
    AccessScope.objects.create(group=group, kind="dag", pattern="etl_*")
    AccessScope.objects.create(group=group, kind="asset", pattern="etl_out")
    return member


def test_a_scoped_user_sees_only_their_dags_and_gets_404_elsewhere(client, etl_team, statuses):
    client.force_login(etl_team)
    page = client.get(URL)
    assert sorted(rows_of(page)) == ["gone", "soon"]
    text = page.content.decode()
    assert "ml_train" not in text and "?dag_id=etl_daily" in text
    assert rows_of(client.get(URL, {"q": "later"})) == [] and rows_of(client.get(URL, {"dag_id": "ml_train"})) == []
    ml_key = statuses["never"]
    before = state()
    assert client.get(change_url(ml_key)).status_code == 404
    assert client.post(change_url(ml_key), {"new_value": "1", "expiry": "never", "_save": "Save"}).status_code == 404
    assert client.get(f"{URL}{ml_key.pk}/history/").status_code == 404
    act(client, "expire_now", ml_key)
    assert state() == before and AuditEvent.objects.count() == 0
    assert client.get(change_url(statuses["soon"])).status_code == 200


# Asset state ----------------------------------------------------------------------------------------------
ASSETS = "/admin/airflow/asset/"


@pytest.fixture
def assets(asset_factory, asset_key_factory):
    etl_out, ml_model = asset_factory(name="etl_out"), asset_factory(name="ml_model")
    for key in ("a", "b"):
        asset_key_factory(etl_out, key=key, value="secret-etl")
    asset_key_factory(ml_model, key="m", value="secret-ml")
    return {"etl": etl_out, "ml": ml_model, "empty": asset_factory(name="etl_empty")}


def asset_rows(response) -> dict[str, tuple[str, str]]:
    text = response.content.decode()
    found = re.findall(
        r'<td class="field-name">(.*?)</td>.*?<td class="field-key_count">(\d+)</td>.*?href="([^"]+)"', text, re.S
    )
    return {name: (count, link) for name, count, link in found}


def test_the_asset_list_links_to_the_dashboard_and_keeps_values_out(client, root, assets):
    client.force_login(root)
    assert ASSETS in client.get("/admin/").content.decode()
    page = client.get(ASSETS)
    assert page.status_code == 200
    assert asset_rows(page) == {
        "etl_out": ("2", f"/assets/{assets['etl'].pk}/"),
        "ml_model": ("1", f"/assets/{assets['ml'].pk}/"),
        "etl_empty": ("0", f"/assets/{assets['empty'].pk}/"),
    }
    text = page.content.decode()
    assert "composite primary key" in text and "secret-" not in text
    assert set(asset_rows(client.get(ASSETS, {"with_state": "yes"}))) == {"etl_out", "ml_model"}
    assert set(asset_rows(client.get(ASSETS, {"q": "ml_"}))) == {"ml_model"}
    opened_page = client.get(f"{ASSETS}{assets['ml'].pk}/change/")
    assert opened_page.status_code == 302 and opened_page["Location"] == f"/assets/{assets['ml'].pk}/"
    assert client.get(f"{ASSETS}add/").status_code == 403


def test_a_scoped_user_lists_only_their_assets(client, etl_team, assets):
    client.force_login(etl_team)
    assert asset_rows(client.get(ASSETS)) == {"etl_out": ("2", f"/assets/{assets['etl'].pk}/")}
    assert client.get(f"{ASSETS}{assets['ml'].pk}/change/").status_code == 404


def test_the_asset_list_needs_view_on_asset_state(client, user_factory, assets):
    tasks_only = user_factory("tasks_only", is_staff=True, perms=["task.view", "asset.change"])
    client.force_login(tasks_only)
    assert client.get(ASSETS).status_code == 403
    assert client.get(f"{ASSETS}{assets['etl'].pk}/change/").status_code == 403
    assert ASSETS not in client.get("/admin/").content.decode()


# Access scopes --------------------------------------------------------------------------------------------
SCOPES = "/admin/state/accessscope/"


def test_the_scope_admin_adds_a_group_scope_and_refuses_bad_patterns(client, root):
    team = Group.objects.create(name="ml team")
    client.force_login(root)
    assert client.get(f"{SCOPES}add/").status_code == 200
    response = client.post(f"{SCOPES}add/", {"group": team.pk, "kind": "dag", "pattern": "ml_*"})
    assert response.status_code == 302
    assert list(AccessScope.objects.values_list("group__name", "user", "kind", "pattern")) == [
        ("ml team", None, "dag", "ml_*")
    ]
    for pattern, message in (("", "This field is required."), ("ml\\x01", "printable characters only")):
        refused = client.post(
            f"{SCOPES}add/", {"group": team.pk, "kind": "dag", "pattern": pattern.replace("\\x01", "\x01")}
        )
        assert refused.status_code == 200 and message in html.unescape(refused.content.decode())
    nobody = client.post(f"{SCOPES}add/", {"kind": "dag", "pattern": "x_*"})
    assert nobody.status_code == 200 and "A scope belongs to either a group or a user." in nobody.content.decode()
    assert AccessScope.objects.count() == 1
    listing = client.get(SCOPES).content.decode()
    assert "ml_*" in listing
    assert "State store scope" in client.get(f"/admin/auth/group/{team.pk}/change/").content.decode()
    assert "State store scope" in client.get(f"/admin/auth/user/{root.pk}/change/").content.decode()


@pytest.mark.parametrize("zone", ["Pacific/Kiritimati", "Etc/GMT+12"])
def test_times_at_the_ends_of_the_calendar_are_shown_as_written_and_edited(client, root, keys, zone):
    """An expiry or update time of 0001-01-01 or 9999-12-31 has no wall time in UTC+14 or UTC-12 (issue 36): the
    list and the change form show it in UTC, saying so, and the form still saves."""
    early, late = datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    job = keys["job"]
    TaskStateStore.objects.filter(pk=job.pk).update(updated_at=late, expires_at=late)
    TaskStateStore.objects.filter(pk=keys["never"].pk).update(updated_at=early, expires_at=early)
    client.force_login(root)
    client.cookies["tz"] = zone
    listed = client.get(URL)
    assert listed.status_code == 200
    text = listed.content.decode()
    assert "0001-01-01 00:00:00 UTC" in text or "9999-12-31 23:59:59 UTC" in text
    for row in (job, keys["never"]):
        assert client.get(change_url(row)).status_code == 200
    data = opened(client, job)
    assert data["seen_updated_at"] == "9999-12-31T23:59:59.999999Z"
    saved = client.post(change_url(job), {**data, "new_value": '{"id": 3}'})
    assert saved.status_code == 302
    assert row_state(job)[0] == '{"id": 3}'
