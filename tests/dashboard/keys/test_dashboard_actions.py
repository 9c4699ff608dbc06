"""The dashboard's actions: each through its confirmation or form, with permissions, CSRF and bad input."""

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from tests.conftest import BOTH_DATABASES
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def run(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl")
    for map_index in (0, 1):
        task_instance_factory(run, task_id="mapped", map_index=map_index)
        task_key_factory(run, task_id="mapped", map_index=map_index, key="a", value=map_index)
        task_key_factory(run, task_id="mapped", map_index=map_index, key="b", value=map_index)
    task_instance_factory(run, task_id="t")
    later = timezone.now() + timedelta(days=3)
    task_key_factory(run, task_id="t", key="job", value={"id": 1}, expires_at=later)
    return run


@pytest.fixture
def job(run):
    return TaskStateStore.objects.get(key="job")


@pytest.fixture
def asset(asset_factory, asset_key_factory):
    asset = asset_factory(name="orders")
    asset_key_factory(
        asset, key="watermark", value="2026-11-01", kind="task", dag_id="etl", run_id="r", task_id="t", map_index=-1
    )
    asset_key_factory(asset, key="cursor", value={"id": 7}, kind="watcher")
    return asset


@pytest.fixture
def op_client(client, operator):
    client.force_login(operator)
    return client


def toast(response):
    assert response.status_code == 204, response.content
    events = json.loads(response["HX-Trigger"])
    assert events["stateChanged"] and events["closeModal"]
    return events["toast"]["message"]


def listed_in(response):
    return response.content.decode().split('name="listed" value="')[1].split('"')[0]


def values():
    return {(k.task_id, k.map_index, k.key): (k.value, k.expires_at) for k in TaskStateStore.objects.all()}


# Edit value ------------------------------------------------------------------------------------
def test_edit_value_keeps_the_expiry(op_client, job):
    form = op_client.get(f"/keys/task/{job.pk}/edit/", **HX)
    assert form.status_code == 200 and "&quot;id&quot;: 1" in form.content.decode()
    message = toast(op_client.post(f"/keys/task/{job.pk}/edit/", {"value": '{"id": 2, "ok": true}'}, **HX))
    assert "Saved the value of 'job'" in message
    job_after = TaskStateStore.objects.get(pk=job.pk)
    assert job_after.value == '{"id": 2, "ok": true}' and job_after.expires_at == job.expires_at
    assert job_after.updated_at > job.updated_at


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", "Not valid JSON"),
        ("null", "null is not a storable value"),
        ("NaN", "NaN and Infinity are not valid JSON"),
        ('{"x": Infinity}', "NaN and Infinity are not valid JSON"),
        ("1e999", "NaN and Infinity are not valid JSON"),
        ("", "This field is required"),
    ],
)
def test_bad_values_are_refused_next_to_the_field(op_client, job, value, message):
    before = values()
    response = op_client.post(f"/keys/task/{job.pk}/edit/", {"value": value}, **HX)
    assert response.status_code == 422
    html = response.content.decode()
    assert message in html and 'class="error field-error"' in html
    assert values() == before


def test_oversized_value_is_refused(op_client, job, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__MAX_VALUE_STORAGE_BYTES", "20")
    response = op_client.post(f"/keys/task/{job.pk}/edit/", {"value": json.dumps("x" * 30)}, **HX)
    assert response.status_code == 422
    assert "32 bytes as JSON; [state_store] max_value_storage_bytes allows 20" in response.content.decode()
    assert TaskStateStore.objects.get(pk=job.pk).value == '{"id": 1}'


def test_edit_refuses_a_value_changed_since_the_form_opened(op_client, job):
    seen = job.updated_at
    TaskStateStore.objects.filter(pk=job.pk).update(value='"written by a task"', updated_at=timezone.now())
    response = op_client.post(
        f"/keys/task/{job.pk}/edit/", {"value": '"mine"', "seen_updated_at": seen.isoformat()}, **HX
    )
    assert response.status_code == 422 and "after you opened it" in response.content.decode()
    assert TaskStateStore.objects.get(pk=job.pk).value == '"written by a task"'


def test_edit_of_a_deleted_key_closes_the_dialog_and_says_so(op_client, job):
    TaskStateStore.objects.filter(pk=job.pk).delete()
    response = op_client.post(f"/keys/task/{job.pk}/edit/", {"value": "1"}, **HX)
    assert response.status_code == 404 and response["Content-Type"].startswith("text/plain")
    assert "deleted after you opened it" in response.content.decode()  # the page's error toast says so
    assert json.loads(response["HX-Trigger"]) == {"closeModal": True, "stateChanged": True}


# Expiry ----------------------------------------------------------------------------------------
def test_expiry_default_uses_the_configured_retention(op_client, job, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS", "7")
    form = op_client.get(f"/keys/task/{job.pk}/expiry/", **HX).content.decode()
    assert "Default (7 days" in form and "30 days" not in form
    toast(op_client.post(f"/keys/task/{job.pk}/expiry/", {"expiry": "default"}, **HX))
    expires = TaskStateStore.objects.get(pk=job.pk).expires_at
    assert abs(expires - (timezone.now() + timedelta(days=7))) < timedelta(minutes=1)


def test_expiry_default_with_zero_retention_is_never(op_client, job, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS", "0")
    assert "Default (never" in op_client.get(f"/keys/task/{job.pk}/expiry/", **HX).content.decode()
    toast(op_client.post(f"/keys/task/{job.pk}/expiry/", {"expiry": "default"}, **HX))
    assert TaskStateStore.objects.get(pk=job.pk).expires_at is None


def test_expiry_never_and_at(op_client, job):
    toast(op_client.post(f"/keys/task/{job.pk}/expiry/", {"expiry": "never"}, **HX))
    assert TaskStateStore.objects.get(pk=job.pk).expires_at is None
    message = toast(
        op_client.post(
            f"/keys/task/{job.pk}/expiry/", {"expiry": "at", "expires_at": "2027-01-02T03:04:05+02:00"}, **HX
        )
    )
    assert message.startswith("'job' expires on 2 Jan 2027, 01:04 (in ")  # for people, in the user's zone (UTC)
    assert TaskStateStore.objects.get(pk=job.pk).expires_at.isoformat() == "2027-01-02T01:04:05+00:00"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"expiry": "at", "expires_at": "2027-01-02T03:04:05"}, "naive date and time is ambiguous"),
        ({"expiry": "at", "expires_at": "tomorrow"}, "Not a date and time"),
        ({"expiry": "at", "expires_at": ""}, "Pick a date and time"),
        ({"expiry": "sometime"}, "Select a valid choice"),
    ],
)
def test_bad_expiry_is_refused(op_client, job, fields, message):
    response = op_client.post(f"/keys/task/{job.pk}/expiry/", fields, **HX)
    assert response.status_code == 422 and message in response.content.decode()
    assert TaskStateStore.objects.get(pk=job.pk).expires_at == job.expires_at


# Expire, delete, bulk, clear -------------------------------------------------------------------
def test_expire_now_through_the_confirmation(op_client, job):
    confirm = op_client.get("/keys/task/expire/", {"ids": job.pk}, **HX)
    html = confirm.content.decode()
    assert 'data-testid="confirm-count">1<' in html and "next garbage collection" in html
    message = toast(op_client.post("/keys/task/expire/", {"ids": job.pk, "listed": listed_in(confirm)}, **HX))
    assert message == "Expired 1 key."
    assert TaskStateStore.objects.get(pk=job.pk).expires_at <= timezone.now()


def test_delete_one_key(op_client, job):
    confirm = op_client.get("/keys/task/delete/", {"ids": job.pk}, **HX)
    assert "<code><bdi>job</bdi></code>" in confirm.content.decode()
    assert (
        toast(op_client.post("/keys/task/delete/", {"ids": job.pk, "listed": listed_in(confirm)}, **HX))
        == "Deleted 1 key."
    )
    assert not TaskStateStore.objects.filter(pk=job.pk).exists()


def test_bulk_expire_and_delete_selected(op_client, run):
    ids = list(TaskStateStore.objects.filter(key="a").values_list("pk", flat=True))
    confirm = op_client.get("/keys/task/expire/", {"ids": ids}, **HX)
    assert 'data-testid="confirm-count">2<' in confirm.content.decode()
    assert (
        toast(op_client.post("/keys/task/expire/", {"ids": ids, "listed": listed_in(confirm)}, **HX))
        == "Expired 2 keys."
    )
    confirm = op_client.get("/keys/task/delete/", {"ids": ids}, **HX)
    toast(op_client.post("/keys/task/delete/", {"ids": ids, "listed": listed_in(confirm)}, **HX))
    assert set(TaskStateStore.objects.values_list("key", flat=True)) == {"b", "job"}


def test_nothing_selected_is_a_clear_message(op_client, run):
    response = op_client.get("/keys/task/delete/", **HX)
    assert response.status_code == 422 and "Select at least one key" in response.content.decode()
    assert op_client.post("/keys/task/delete/", {"listed": ""}, **HX).status_code == 422
    assert TaskStateStore.objects.count() == 5


@pytest.mark.parametrize(
    ("map_index", "left"),
    [("0", {("mapped", 1, "a"), ("mapped", 1, "b"), ("t", -1, "job")}), ("all", {("t", -1, "job")})],
)
def test_clear_a_map_index_or_all_of_them(op_client, run, map_index, left):
    scope = {"run": run.pk, "task_id": "mapped", "map_index": map_index}
    confirm = op_client.get("/keys/task/delete/", scope, **HX)
    count = 2 if map_index == "0" else 4
    assert f'data-testid="confirm-count">{count}<' in confirm.content.decode()
    toast(op_client.post("/keys/task/delete/", {**scope, "listed": listed_in(confirm)}, **HX))
    assert set(values()) == left


def test_expire_all_keys_of_a_task_instance(op_client, run):
    scope = {"run": run.pk, "task_id": "mapped", "map_index": "1"}
    confirm = op_client.get("/keys/task/expire/", scope, **HX)
    toast(op_client.post("/keys/task/expire/", {**scope, "listed": listed_in(confirm)}, **HX))
    expired = set(TaskStateStore.objects.filter(expires_at__lte=timezone.now()).values_list("map_index", "key"))
    assert expired == {(1, "a"), (1, "b")}


def test_keys_written_after_the_confirmation_are_kept(op_client, run, task_key_factory):
    scope = {"run": run.pk, "task_id": "mapped", "map_index": "all"}
    confirm = op_client.get("/keys/task/delete/", scope, **HX)
    later = timezone.now() + timedelta(seconds=1)
    TaskStateStore.objects.filter(map_index=0, key="a").update(value="99", updated_at=later)
    task_key_factory(run, task_id="mapped", map_index=1, key="new", updated_at=later)
    message = toast(op_client.post("/keys/task/delete/", {**scope, "listed": listed_in(confirm)}, **HX))
    assert (
        message
        == "Deleted 3 keys; kept 2 keys that changed after the list was shown (1 added, 1 written since): 'a', 'new'."
    )
    assert set(values()) == {("mapped", 0, "a"), ("mapped", 1, "new"), ("t", -1, "job")}


def test_confirmation_without_its_list_changes_nothing(op_client, job):
    response = op_client.post("/keys/task/delete/", {"ids": job.pk}, **HX)
    assert response.status_code == 422 and "list of keys is missing" in response.content.decode()
    assert TaskStateStore.objects.filter(pk=job.pk).exists()


def test_bad_ids_are_refused(op_client, job):
    assert op_client.get("/keys/task/delete/", {"ids": "x"}, **HX).status_code == 422
    assert op_client.get("/keys/task/delete/", {"run": "999999", "task_id": "t"}, **HX).status_code == 404


# Add -------------------------------------------------------------------------------------------
def test_add_a_key(op_client, run, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS", "2")
    data = {"key": "path/with: spaces ✓", "value": '{"n": 1}', "map_index": "1", "expiry": "default"}
    assert toast(op_client.post(f"/runs/{run.pk}/tasks/mapped/add/", data, **HX)) == "Added 'path/with: spaces ✓'."
    row = TaskStateStore.objects.get(key="path/with: spaces ✓")
    assert (row.map_index, row.value, row.dag_id, row.run_id) == (1, '{"n": 1}', "etl", run.run_id)
    assert abs(row.expires_at - (timezone.now() + timedelta(days=2))) < timedelta(minutes=1)


@pytest.mark.parametrize(
    ("data", "status", "message"),
    [
        ({"key": "k" * 513}, 422, "at most 512 characters; this one has 513"),
        ({"key": "a", "map_index": "0"}, 422, "already exists on this task instance"),
        ({"key": "x", "map_index": "7"}, 422, "No map index 7: mapped has map indexes 0–1 in this run."),
        ({"key": "x", "map_index": "-2"}, 422, "No map index -2"),
        ({"key": "x", "value": "null"}, 422, "null is not a storable value"),
        ({"key": "x", "expiry": "at", "expires_at": "2030-01-01 00:00"}, 422, "naive"),
    ],
)
def test_bad_additions_change_nothing(op_client, run, data, status, message):
    before = values()
    fields = {"key": "x", "value": "1", "map_index": "0", "expiry": "default", **data}
    response = op_client.post(f"/runs/{run.pk}/tasks/mapped/add/", fields, **HX)
    assert response.status_code == status and message in response.content.decode()
    assert values() == before


def test_a_512_character_key_is_fine(op_client, run):
    key = "k" * 512
    toast(
        op_client.post(
            f"/runs/{run.pk}/tasks/t/add/", {"key": key, "value": "1", "map_index": "-1", "expiry": "never"}, **HX
        )
    )
    assert TaskStateStore.objects.filter(key=key, expires_at__isnull=True).exists()


# Assets ----------------------------------------------------------------------------------------
def test_edit_an_asset_key_records_the_api_writer(op_client, asset):
    toast(
        op_client.post(
            f"/assets/{asset.pk}/key/edit/?key=watermark", {"key": "watermark", "value": '"2026-12-01"'}, **HX
        )
    )
    row = AssetStateStore.objects.get(asset=asset, key="watermark")
    assert row.value == '"2026-12-01"' and row.last_updated_by_kind == "api"
    assert row.last_updated_by_dag_id is None and row.last_updated_by_task_id is None


def test_add_and_delete_an_asset_key(op_client, asset):
    toast(op_client.post(f"/assets/{asset.pk}/add/", {"key": "new", "value": "[1, 2]"}, **HX))
    assert AssetStateStore.objects.get(asset=asset, key="new").value == "[1, 2]"
    duplicate = op_client.post(f"/assets/{asset.pk}/add/", {"key": "new", "value": "3"}, **HX)
    assert duplicate.status_code == 422 and "already exists" in duplicate.content.decode()
    confirm = op_client.get(f"/assets/{asset.pk}/delete/", {"keys": "new"}, **HX)
    assert (
        toast(op_client.post(f"/assets/{asset.pk}/delete/", {"keys": "new", "listed": listed_in(confirm)}, **HX))
        == "Deleted 1 key."
    )
    assert set(AssetStateStore.objects.values_list("key", flat=True)) == {"watermark", "cursor"}


def test_clear_an_asset_lists_keys_and_values_first(op_client, asset):
    confirm = op_client.get(f"/assets/{asset.pk}/delete/", {"all": "1"}, **HX)
    html = confirm.content.decode()
    assert "Clear all state of asset orders?" in html and 'data-testid="confirm-count">2<' in html
    assert (
        "<code><bdi>watermark</bdi></code>" in html
        and "&quot;2026-11-01&quot;" in html
        and "{&quot;id&quot;: 7}" in html
    )
    message = toast(op_client.post(f"/assets/{asset.pk}/delete/", {"all": "1", "listed": listed_in(confirm)}, **HX))
    assert message == "Cleared the state of asset 'orders': deleted 2 keys."
    assert not AssetStateStore.objects.exists()


def test_unknown_asset_is_404(op_client):
    assert op_client.get("/assets/999999/delete/", {"all": "1"}, **HX).status_code == 404
    assert op_client.post("/assets/999999/add/", {"key": "k", "value": "1"}, **HX).status_code == 404


# Permissions, CSRF, plain forms ------------------------------------------------------------------
def action_requests(run, job, asset):
    return [
        ("get", f"/keys/task/{job.pk}/edit/", {}),
        ("post", f"/keys/task/{job.pk}/edit/", {"value": "2"}),
        ("post", f"/keys/task/{job.pk}/expiry/", {"expiry": "never"}),
        ("get", "/keys/task/delete/", {"ids": job.pk}),
        ("post", "/keys/task/delete/", {"ids": job.pk, "listed": ""}),
        ("post", "/keys/task/expire/", {"ids": job.pk, "listed": ""}),
        ("post", f"/runs/{run.pk}/tasks/t/add/", {"key": "n", "value": "1", "map_index": "-1", "expiry": "never"}),
        ("post", f"/assets/{asset.pk}/key/edit/?key=cursor", {"key": "cursor", "value": "1"}),
        ("post", f"/assets/{asset.pk}/add/", {"key": "n", "value": "1"}),
        ("post", f"/assets/{asset.pk}/delete/", {"all": "1", "listed": ""}),
    ]


def snapshot():
    return values(), set(AssetStateStore.objects.values_list("key", "value", "last_updated_by_kind"))


def test_viewers_get_403_and_change_nothing(client, viewer, run, job, asset):
    client.force_login(viewer)
    before = snapshot()
    for method, url, data in action_requests(run, job, asset):
        response = getattr(client, method)(url, data, **HX)
        assert response.status_code == 403, (method, url)
        assert response.content.decode().startswith("You do not have permission")
    assert snapshot() == before


def test_change_permission_does_not_allow_delete(client, user_factory, job, asset):
    client.force_login(user_factory("changer", perms=["task.view", "task.change", "asset.view", "asset.change"]))
    assert client.post(f"/keys/task/{job.pk}/edit/", {"value": "5"}, **HX).status_code == 204
    assert client.post("/keys/task/delete/", {"ids": job.pk, "listed": ""}, **HX).status_code == 403
    assert client.post(f"/assets/{asset.pk}/delete/", {"all": "1", "listed": ""}, **HX).status_code == 403
    assert TaskStateStore.objects.filter(pk=job.pk).exists() and AssetStateStore.objects.count() == 2


def test_anonymous_actions_go_to_the_login(client, run, job, asset):
    for method, url, data in action_requests(run, job, asset):
        response = getattr(client, method)(url, data)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), url


def test_posts_need_the_csrf_token(operator, job, asset):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(f"/keys/task/{job.pk}/edit/", {"value": "2"}, **HX).status_code == 403
    assert client.post(f"/assets/{asset.pk}/delete/", {"all": "1", "listed": ""}, **HX).status_code == 403
    assert TaskStateStore.objects.get(pk=job.pk).value == '{"id": 1}' and AssetStateStore.objects.count() == 2
    token = client.get(f"/keys/task/{job.pk}/").cookies["csrftoken"].value
    assert client.post(f"/keys/task/{job.pk}/edit/", {"value": "2"}, HTTP_X_CSRFTOKEN=token, **HX).status_code == 204


def test_without_javascript_forms_are_pages_and_redirect(op_client, job):
    page = op_client.get(f"/keys/task/{job.pk}/edit/?next=/keys/task/{job.pk}/")
    assert "<html" in page.content.decode() and 'name="next" value="/keys/task/' in page.content.decode()
    response = op_client.post(f"/keys/task/{job.pk}/edit/", {"value": "3", "next": f"/keys/task/{job.pk}/"})
    assert response.status_code == 302 and response["Location"] == f"/keys/task/{job.pk}/"
    followed = op_client.get(response["Location"]).content.decode()
    assert "Saved the value of" in followed
    evil = op_client.post(f"/keys/task/{job.pk}/edit/", {"value": "4", "next": "https://evil.example/"})
    assert evil["Location"] == f"/keys/task/{job.pk}/"


def test_delete_from_the_key_page_moves_on(op_client, job):
    next_url = f"/runs/{job.dag_run_id}/tasks/t/?map_index=-1"
    confirm = op_client.get("/keys/task/delete/", {"ids": job.pk, "next": next_url}, **HX)
    response = op_client.post(
        "/keys/task/delete/", {"ids": job.pk, "listed": listed_in(confirm), "next": next_url}, **HX
    )
    assert response.status_code == 204 and response["HX-Redirect"] == next_url


def test_deleting_worker_refs_warns_about_the_external_objects(op_client, run, task_key_factory):
    ref = task_key_factory(run, task_id="t", key="ref", value={"__airflow_state_ref__": "s3://bucket/ref"})
    job = TaskStateStore.objects.get(key="job")
    html = flat(op_client.get("/keys/task/delete/", {"ids": [ref.pk, job.pk]}, **HX).content.decode())
    assert "<strong>1</strong> of these keys is a worker-side reference" in html
    assert "worker-side reference" not in op_client.get("/keys/task/delete/", {"ids": job.pk}, **HX).content.decode()
