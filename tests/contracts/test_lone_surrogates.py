"""Lone UTF-16 surrogates ("\\ud800": JSON's escapes can spell half of a pair). Every write path refuses them
in keys and values (docs/writes.md); rows that Airflow wrote with them (its SDK stores ``json.dumps`` text,
which escapes them) are read, listed, shown, downloaded and audited without a 500, and restoring one is
refused with a message."""

import csv
import html
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import OperationalError, ProgrammingError, connections, transaction
from django.utils import timezone

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.core import values
from statestore_admin.records.models import AuditEvent
from statestore_admin.tokens.models import ApiToken
from tests.airflow_schema import index_column
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
RUN_ID = "manual__surrogates"
TASKS = f"/api/v2/dags/etl/dagRuns/{RUN_ID}/taskInstances"
HX = {"HTTP_HX_REQUEST": "true"}
EVENTS = "/api/statestore/v1/audit-events"
RESTORE = "/api/statestore/v1/restore"
# As Airflow's SDK stores them: json.dumps text, in which a lone surrogate is a \u escape.
POISON_TEXT = '"\\ud800"'
NESTED_TEXT = '{"a": [1, 2, "x\\udc80"], "\\udfff": true}'


@pytest.fixture
def scene(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl", run_id=RUN_ID)
    task_instance_factory(run, task_id="t")
    task_key_factory(run, task_id="t", key="clean", value={"ok": 1})
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="clean", value=[1])
    return {"run": run, "asset": asset}


@pytest.fixture
def poisoned(scene):
    """Rows written the way Airflow writes them, with raw SQL into its tables."""
    now = timezone.now()
    with connections["airflow"].cursor() as cursor:
        for key, text in (("poison", POISON_TEXT), ("nested", NESTED_TEXT)):
            cursor.execute(
                f"INSERT INTO task_state_store (dag_run_id, task_id, {index_column()}, key, dag_id, run_id, value, "
                "updated_at)"
                " VALUES (%s, 't', -1, %s, 'etl', %s, %s, %s)",
                [scene["run"].pk, key, RUN_ID, text, now],
            )
        cursor.execute(
            "INSERT INTO asset_state_store (asset_id, key, value, updated_at, last_updated_by_kind)"
            " VALUES (%s, 'poison', %s, %s, 'task')",
            [scene["asset"].pk, '"\\udc80"', now],
        )
    return scene


@pytest.fixture
def api(client, operator):
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {ApiToken.issue(operator, 'tests')[1]}"
    return client


@pytest.fixture
def op_client(client, operator):
    client.force_login(operator)
    return client


def state():
    return (
        sorted(TaskStateStore.objects.values_list("key", "value", "expires_at")),
        sorted(AssetStateStore.objects.values_list("key", "value")),
        AuditEvent.objects.count(),
    )


def text_of(response) -> str:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return content.decode("utf-8")  # strict: a page is valid UTF-8


# The rule ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "where"),
    [
        ("\ud800", "(U+D800) at $"),
        ({"a": [1, 2, "x\udc80"]}, "(U+DC80) at $.a[2]"),
        ({"ok": {"\udfff": 1}}, '(U+DFFF) in the key $.ok["\\udfff"]'),
        ({"a b": ["fine", {"c": "\udbff!"}]}, '(U+DBFF) at $["a b"][1].c'),
    ],
)
def test_the_rule_names_the_surrogate_and_where_it_is(value, where):
    with pytest.raises(values.Invalid) as excinfo:
        values.encode_value(value)
    assert f"The value contains a lone surrogate {where}" in excinfo.value.message_dict["value"][0]
    with pytest.raises(values.Invalid, match="lone surrogate \\(U\\+D800\\) at character 3"):
        values.clean_key("ab\ud800")


def test_a_surrogate_pair_is_one_character_and_allowed():
    pair = json.loads('"\\ud83d\\ude00"')
    assert pair == "\U0001f600" and values.lone_surrogate({pair: [pair]}) is None
    assert values.encode_value({pair: pair}) == '{"\\ud83d\\ude00": "\\ud83d\\ude00"}'
    assert values.clean_key(pair) == pair


# Writes: refused everywhere, nothing changes ---------------------------------------------------------------
def api_put(client, url, body):
    return client.put(url, json.dumps(body), content_type="application/json")


def refused_422(response, loc, message):
    assert response.status_code == 422, response.content
    assert response["Content-Type"] == "application/json"
    detail = response.json()["detail"]
    assert [d["loc"] for d in detail] == [loc], detail
    assert detail[0]["type"] == "value_error" and message in detail[0]["msg"], detail


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ("\ud800", "(U+D800) at $"),
        ({"a": [1, 2, "x\udc80"]}, "(U+DC80) at $.a[2]"),
        ({"\ud800": 1}, "(U+D800) in the key"),
    ],
)
def test_api_put_and_patch_refuse_a_surrogate_in_a_value(api, scene, value, where):
    before = state()
    for method, url in (
        ("put", f"{TASKS}/t/state-store/poison"),
        ("patch", f"{TASKS}/t/state-store/clean"),
        ("put", f"/api/v2/assets/{scene['asset'].pk}/state-store/poison"),
    ):
        response = getattr(api, method)(url, json.dumps({"value": value}), content_type="application/json")
        refused_422(response, ["body", "value"], f"The value contains a lone surrogate {where}")
    assert state() == before


def test_the_raw_body_with_the_escape_is_refused_as_the_attacker_sent_it(api, scene):
    before = state()
    response = api.put(f"{TASKS}/t/state-store/poison", '{"value": "\\ud800"}', content_type="application/json")
    refused_422(response, ["body", "value"], "lone surrogate (U+D800) at $")
    assert state() == before
    assert api.get(f"{TASKS}/t/state-store/poison").status_code == 404


def edit_refused(response, message):
    assert response.status_code == 422, response.content
    page = html.unescape(text_of(response))
    assert message in page and "field-error" in page


def test_the_page_editor_and_add_forms_refuse_a_surrogate(op_client, scene):
    before = state()
    clean = TaskStateStore.objects.get(key="clean")
    asset = scene["asset"].pk
    edit_refused(
        op_client.post(f"/keys/task/{clean.pk}/edit/", {"value": '{"ok": "\\ud800"}'}, **HX),
        "lone surrogate (U+D800) at $.ok",
    )
    edit_refused(
        op_client.post(
            f"/runs/{scene['run'].pk}/tasks/t/add/",
            {"key": "new", "value": '["\\udc80"]', "map_index": "-1", "expiry": "never"},
            **HX,
        ),
        "lone surrogate (U+DC80) at $[0]",
    )
    edit_refused(
        op_client.post(f"/assets/{asset}/key/edit/?key=clean", {"key": "clean", "value": '"\\ud800"'}, **HX),
        "lone surrogate (U+D800) at $",
    )
    edit_refused(
        op_client.post(f"/assets/{asset}/add/", {"key": "new", "value": '{"\\udc80": 1}'}, **HX),
        "lone surrogate (U+DC80) in the key",
    )
    assert state() == before


def test_django_admin_refuses_a_surrogate(client, user_factory, scene):
    root = user_factory("root", is_staff=True, is_superuser=True)
    client.force_login(root)
    clean = TaskStateStore.objects.get(key="clean")
    before = state()
    response = client.post(
        f"/admin/airflow/taskstatestore/{clean.pk}/change/",
        {"new_value": '"\\ud800"', "expiry": "keep", "expires_at_text": "", "seen_updated_at": "", "_save": "Save"},
    )
    assert response.status_code == 200
    page = html.unescape(text_of(response))
    assert "lone surrogate (U+D800) at $" in page and "errornote" in page
    assert state() == before


def document(**entry) -> str:
    base = {"store": "task", "dag_id": "etl", "run_id": RUN_ID, "task_id": "t", "map_index": -1, "key": "k"}
    return json.dumps({"format": "statestore-admin/keys", "version": 1, "keys": [{**base, "value": 1, **entry}]})


BAD_DOCUMENTS = [
    (document(key="bad\ud800key"), "lone surrogate (U+D800) at character 4"),
    (document(value={"a": ["\udc80"]}), "lone surrogate (U+DC80) at $.a[0]"),
    (document(value_json='"\\ud800"'), "lone surrogate (U+D800) at $"),
    (document(task_id="t\ud800"), "lone surrogate (U+D800)"),
]


@pytest.mark.parametrize(("content", "message"), BAD_DOCUMENTS)
def test_restore_of_a_document_with_a_surrogate_is_refused(api, op_client, scene, tmp_path, content, message):
    before = state()
    response = api.post(RESTORE, content, content_type="application/json")
    assert response.status_code == 422, response.content
    assert message in json.dumps(response.json(), ensure_ascii=False)
    response = api.post(RESTORE, {"file": SimpleUploadedFile("keys.json", content.encode())})
    assert response.status_code == 422 and message in json.dumps(response.json(), ensure_ascii=False)

    upload = SimpleUploadedFile("keys.json", content.encode())
    response = op_client.post("/audit/restore-file/", {"file": upload}, **HX)
    assert response.status_code == 422
    page = html.unescape(text_of(response))
    assert message in page and "Nothing was restored" in page

    path = tmp_path / "keys.json"
    path.write_text(content)
    with pytest.raises((CommandError, SystemExit)) as excinfo:
        call_command("state_store_restore", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    assert message in str(excinfo.value) or getattr(excinfo.value, "code", 0) not in (0, None)
    assert state() == before


# Reads of rows that Airflow wrote ------------------------------------------------------------------------
def valid_json(response):
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    content = response.content.decode("utf-8")  # strict: valid UTF-8
    return json.loads(content)


def test_api_reads_and_lists_answer_the_escape(api, poisoned):
    asset = poisoned["asset"].pk
    assert valid_json(api.get(f"{TASKS}/t/state-store/poison"))["value"] == "\ud800"
    nested = valid_json(api.get(f"{TASKS}/t/state-store/nested"))["value"]
    assert nested == {"a": [1, 2, "x\udc80"], "\udfff": True}
    assert b"\\ud800" in api.get(f"{TASKS}/t/state-store/poison").content
    listed = valid_json(api.get(f"{TASKS}/t/state-store"))["task_state_store"]
    assert {e["key"]: e["value"] for e in listed}["poison"] == "\ud800"
    assert valid_json(api.get(f"/api/v2/assets/{asset}/state-store/poison"))["value"] == "\udc80"
    assert valid_json(api.get(f"/api/v2/assets/{asset}/state-store"))["total_entries"] == 2
    assert valid_json(api.get(f"{TASKS}/t/state-store/poison?resolve=true"))["resolved"] is True
    found = valid_json(api.get("/api/statestore/v1/search/task-keys", {"key": "poison"}))["items"]
    assert [(k["key"], k["preview"]) for k in found] == [("poison", POISON_TEXT)]
    found = valid_json(api.get("/api/statestore/v1/search/asset-keys", {"key": "poison"}))["items"]
    assert [k["key"] for k in found] == ["poison"]


def test_non_ascii_answers_stay_as_they_are_without_surrogates(api, scene):
    assert api_put(api, f"{TASKS}/t/state-store/greeting", {"value": "Grüße"}).status_code == 204
    assert "Grüße".encode() in api.get(f"{TASKS}/t/state-store/greeting").content


def test_pages_show_the_value_escaped_with_a_notice(op_client, poisoned):
    run, asset = poisoned["run"], poisoned["asset"]
    poison = TaskStateStore.objects.get(key="poison")
    nested = TaskStateStore.objects.get(key="nested")
    for url in (
        f"/keys/task/{poison.pk}/",
        f"/keys/task/{nested.pk}/",
        f"/assets/{asset.pk}/key/?key=poison",
    ):
        response = op_client.get(url)
        assert response.status_code == 200, url
        page = text_of(response)
        assert "\\ud800" in page or "\\udc80" in page, url
        assert "lone surrogate" in page, url
    assert "lone surrogate (U+DC80) at $.a[2]" in html.unescape(text_of(op_client.get(f"/keys/task/{nested.pk}/")))
    for url in (
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/tasks/t/",
        f"/assets/{asset.pk}/",
        "/search/?q=poison",
        "/search/?value=x",
        f"/keys/task/{poison.pk}/edit/",
        f"/admin/airflow/taskstatestore/{poison.pk}/change/",
    ):
        response = op_client.get(url, **HX) if url.endswith("/edit/") else op_client.get(url)
        if url.startswith("/admin/"):  # the operator is not staff: Django admin sends them to its login
            assert response.status_code == 302 and "/admin/login/" in response["Location"], url
        else:
            assert response.status_code == 200, url
            text_of(response)


def test_the_editor_shows_the_escape_and_saving_it_untouched_is_refused(op_client, poisoned):
    poison = TaskStateStore.objects.get(key="poison")
    form = html.unescape(text_of(op_client.get(f"/keys/task/{poison.pk}/edit/", **HX)))
    assert '"\\ud800"' in form and "holds a lone surrogate (U+D800) at $" in form
    before = state()
    edit_refused(op_client.post(f"/keys/task/{poison.pk}/edit/", {"value": '"\\ud800"'}, **HX), "lone surrogate")
    assert state() == before
    response = op_client.post(f"/keys/task/{poison.pk}/edit/", {"value": '"fixed"'}, **HX)
    assert response.status_code == 204 and TaskStateStore.objects.get(pk=poison.pk).value == '"fixed"'


def listed_in(response) -> str:
    return text_of(response).split('name="listed" value="')[1].split('"')[0]


def test_confirmations_list_them_and_deletes_go_through(op_client, poisoned):
    ids = list(TaskStateStore.objects.filter(key__in=["poison", "nested"]).values_list("pk", flat=True))
    confirm = op_client.get("/keys/task/delete/", {"ids": ids}, **HX)
    assert confirm.status_code == 200 and "\\ud800" in text_of(confirm)
    response = op_client.post("/keys/task/delete/", {"ids": ids, "listed": listed_in(confirm)}, **HX)
    assert response.status_code == 204, response.content
    assert not TaskStateStore.objects.filter(pk__in=ids).exists()
    asset = poisoned["asset"].pk
    confirm = op_client.get(f"/assets/{asset}/delete/", {"all": "1"}, **HX)
    assert confirm.status_code == 200 and "\\udc80" in text_of(confirm)
    response = op_client.post(f"/assets/{asset}/delete/", {"all": "1", "listed": listed_in(confirm)}, **HX)
    assert response.status_code == 204, response.content
    assert not AssetStateStore.objects.filter(asset_id=asset).exists()
    assert AuditEvent.objects.filter(action__in=["delete", "clear"]).count() == 2
    for event in AuditEvent.objects.all():
        assert op_client.get(f"/audit/{event.pk}/").status_code == 200


def test_django_admin_shows_them_escaped(client, user_factory, poisoned):
    client.force_login(user_factory("root", is_staff=True, is_superuser=True))
    assert client.get("/admin/airflow/taskstatestore/").status_code == 200
    page = text_of(client.get(f"/admin/airflow/taskstatestore/{TaskStateStore.objects.get(key='poison').pk}/change/"))
    assert "\\ud800" in page


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_downloads_hold_the_escaped_text(op_client, poisoned, fmt):
    run, asset = poisoned["run"], poisoned["asset"]
    for url in (
        f"/runs/{run.pk}/export/",
        f"/runs/{run.pk}/tasks/t/export/",
        f"/assets/{asset.pk}/keys/export/",
        "/search/export/?q=poison",
    ):
        response = op_client.get(url, {"format": fmt})
        assert response.status_code == 200, url
        content = text_of(response)
        assert "\\ud800" in content or "\\udc80" in content, url
        if fmt == "json":
            json.loads(content)
        else:
            assert list(csv.reader(io.StringIO(content)))


def delete_poison(api):
    response = api.delete(f"{TASKS}/t/state-store/poison")
    assert response.status_code == 204
    return AuditEvent.objects.latest("id")


def test_audit_of_a_surrogate_answers_everywhere(api, op_client, poisoned):
    event = delete_poison(api)
    items = valid_json(api.get(EVENTS))["items"]
    assert items[0]["id"] == event.pk
    for params in ({"store": "task"}, {"key": "poison"}, {"dag_id": "etl"}, {"action": "delete"}):
        assert valid_json(api.get(EVENTS, params))["items"], params
    detail = valid_json(api.get(f"{EVENTS}/{event.pk}"))
    assert detail["keys"][0]["before"]["value"] == "\ud800"
    for url in ("/audit/", f"/audit/{event.pk}/", f"/keys/task/{TaskStateStore.objects.get(key='nested').pk}/"):
        response = op_client.get(url)
        assert response.status_code == 200, url
        text_of(response)
    page = html.unescape(text_of(op_client.get(f"/audit/{event.pk}/")))
    assert '"\\ud800"' in page and "holds a lone surrogate (U+D800) at $" in page
    response = op_client.get("/audit/export/", {"format": "json"})
    assert response.status_code == 200 and json.loads(text_of(response))
    response = op_client.get("/audit/export/", {"format": "csv"})
    assert response.status_code == 200 and text_of(response)


def test_restore_of_an_event_holding_a_surrogate_is_refused(api, op_client, poisoned):
    event = delete_poison(api)
    before = state()
    response = api.post(f"{EVENTS}/{event.pk}/restore", "", content_type="application/json")
    assert response.status_code == 422, response.content
    assert "lone surrogate (U+D800) at $" in json.dumps(response.json())
    response = op_client.post(f"/audit/{event.pk}/restore/", **HX)
    assert response.status_code == 422
    assert "lone surrogate (U+D800) at $" in html.unescape(text_of(response))
    assert state() == before


def test_restore_of_a_download_holding_a_surrogate_is_refused(api, op_client, poisoned):
    content = text_of(op_client.get(f"/runs/{poisoned['run'].pk}/export/", {"format": "json"}))
    TaskStateStore.objects.filter(key="poison").delete()
    before = state()
    response = api.post(RESTORE, content, content_type="application/json")
    assert response.status_code == 422 and "lone surrogate" in json.dumps(response.json())
    assert state() == before


# What each database holds --------------------------------------------------------------------------------
def test_a_raw_surrogate_key_cannot_come_from_airflow(scene):
    """Airflow's writers are Python: neither driver can send a raw lone surrogate (a value is JSON-escaped by
    json.dumps, a key is not), so a key holding one cannot come from Airflow. PostgreSQL's UTF-8 text cannot
    hold one at all; SQLite stores the bytes a non-Python client gives it, which no Python reader, Airflow's
    included, can then decode."""
    connection = connections["airflow"]
    with pytest.raises(UnicodeEncodeError), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO asset_state_store (asset_id, key, value, updated_at) VALUES (%s, %s, '1', %s)",
            [scene["asset"].pk, "\ud800", timezone.now()],
        )
    if connection.vendor == "postgresql":
        with pytest.raises(ProgrammingError, match="surrogate"), transaction.atomic(using="airflow"):
            with connection.cursor() as cursor:
                cursor.execute("SELECT U&'\\D800'")
    else:
        with connection.cursor() as cursor:
            cursor.execute("SELECT hex(char(55296))")
            assert cursor.fetchone() == ("EDA080",)  # stored as the bytes UTF-8 would give, were it allowed
            with pytest.raises(OperationalError, match="Could not decode to UTF-8"):
                cursor.execute("SELECT char(55296)")
                cursor.fetchone()
