"""Restore files and restores as an attacker tries them: every face refuses the same files (an object naming a
key twice, integers out of range) in the same words; an asset out of a scoped user's scope answers as a
missing one does; and one web request restores a bounded number of keys."""

import html
import io
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.records.models import AccessScope, AuditEvent
from statestore_admin.tokens.models import ApiToken
from tests.conftest import ALL_PERMS, BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
RESTORE = "/api/statestore/v1/restore"
PAGE = "/audit/restore-file/"
HX = {"HTTP_HX_REQUEST": "true"}
MAX_INT = 2**31 - 1


@pytest.fixture
def scene(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl_orders", run_id="manual__1")
    task_instance_factory(run, task_id="load")
    task_key_factory(run, task_id="load", key="offset", value=41)
    inside = asset_factory(name="etl.orders", uri="s3://warehouse/etl/orders")
    outside = asset_factory(name="ml.features", uri="s3://warehouse/ml/features")
    asset_key_factory(inside, key="watermark", value="2026-11-30")
    asset_key_factory(outside, key="watermark", value="secret")
    return {"run": run, "inside": inside, "outside": outside}


def snapshot():
    return (
        sorted(TaskStateStore.objects.values_list("task_id", "key", "value", "expires_at")),
        sorted(AssetStateStore.objects.values_list("asset_id", "key", "value")),
        AuditEvent.objects.count(),
    )


def api_client(user) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(user)[1]}")


def page_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def words(response) -> str:
    """An API answer's messages, as a client reads them."""
    return json.dumps(response.json(), ensure_ascii=False).replace('\\"', '"')


def text(response) -> str:
    return html.unescape(re.sub(r"\s+", " ", response.content.decode()))


def through_every_face(user, content: str, tmp_path) -> dict[str, tuple[int, str]]:
    """The status and the words each face answers a restore file with: the page's upload, the API's JSON
    body and multipart upload, and the command (its exit code)."""
    answers = {}
    response = page_client(user).post(PAGE, {"file": SimpleUploadedFile("keys.json", content.encode())}, **HX)
    answers["page"] = (response.status_code, text(response))
    api = api_client(user)
    response = api.post(RESTORE, content, content_type="application/json")
    answers["api json"] = (response.status_code, words(response))
    response = api.post(RESTORE, {"file": SimpleUploadedFile("keys.json", content.encode())})
    answers["api upload"] = (response.status_code, words(response))
    path = tmp_path / "keys.json"
    path.write_text(content, encoding="utf-8")
    try:
        call_command("state_store_restore", str(path), stdout=io.StringIO(), stderr=io.StringIO())
        answers["command"] = (0, "")
    except CommandError as exc:
        answers["command"] = (exc.returncode, str(exc))
    return answers


def document(*entries: str) -> str:
    return '{"format": "statestore-admin/keys", "version": 1, "keys": [' + ", ".join(entries) + "]}"


TASK_ENTRY = '{"store": "task", "dag_id": "etl_orders", "run_id": "manual__1", "task_id": "load", "map_index": -1, '


# An object that names a key twice ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "content",
    [
        document(TASK_ENTRY + '"key": "offset", "key": "other", "value": 1}'),  # which key?
        document(TASK_ENTRY + '"key": "offset", "value": {"a": 1, "a": 2}}'),  # which value?
        document(TASK_ENTRY + '"key": "offset", "value": 7}')[:-1] + ', "keys": []}',  # which list?
    ],
)
def test_every_face_refuses_an_object_that_names_a_key_twice(scene, operator, content, tmp_path):
    before = snapshot()
    answers = through_every_face(operator, content, tmp_path)
    assert {face: status for face, (status, _) in answers.items()} == {
        "page": 422,
        "api json": 422,
        "api upload": 422,
        "command": 2,
    }
    for face, (_, words) in answers.items():
        assert "twice" in words, (face, words)
    assert snapshot() == before


# Integers out of range -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ('{"store": "asset", "asset_id": 2147483648, "key": "k", "value": 1}', "asset_id"),
        ('{"store": "asset", "asset_id": 99999999999999999999999, "key": "k", "value": 1}', "asset_id"),
        ('{"store": "asset", "asset_id": 0, "key": "k", "value": 1}', "asset_id"),
        (TASK_ENTRY.replace('"map_index": -1', '"map_index": 2147483648') + '"key": "k", "value": 1}', "map_index"),
        (TASK_ENTRY.replace('"map_index": -1', '"map_index": -2') + '"key": "k", "value": 1}', "map_index"),
    ],
)
def test_an_integer_out_of_range_is_named_as_such_by_every_face(scene, operator, entry, field, tmp_path):
    before = snapshot()
    answers = through_every_face(operator, document(entry), tmp_path)
    assert [status for status, _ in answers.values()] == [422, 422, 422, 2]
    for face, (_, words) in answers.items():
        assert f'keys[0]: "{field}" is out of range' in words, (face, words)
        assert "must be an integer" not in words
    assert snapshot() == before


def test_a_number_that_is_no_integer_is_still_not_an_integer(scene, operator, tmp_path):
    for given in ('"7"', "7.0", "true", "null"):
        answers = through_every_face(
            operator, document(f'{{"store": "asset", "asset_id": {given}, "key": "k", "value": 1}}'), tmp_path
        )
        for face, (status, words) in answers.items():
            assert status in (422, 2) and '"asset_id" must be an integer' in words, (face, given, words)


# An asset out of scope answers as a missing one ------------------------------------------------------------
@pytest.fixture
def scoped_admin(user_factory):
    user = user_factory("scoped-admin", perms=ALL_PERMS, unscoped=False)
    AccessScope.objects.create(user=user, kind="dag", pattern="etl_*")
    AccessScope.objects.create(user=user, kind="asset", pattern="etl.*")
    return user


def asset_document(asset_id: int, value="restored") -> str:
    entry = {"store": "asset", "asset_id": asset_id, "key": "watermark", "value": value}
    return json.dumps({"format": "statestore-admin/keys", "version": 1, "keys": [entry]})


def without(answer: str, asset_id: int) -> str:
    """The answer with the asset's id (where it names the asset) left out."""
    return re.sub(rf"(with id |\"asset_id\": ){asset_id}\b", r"\1<id>", answer)


def test_an_asset_out_of_scope_answers_as_a_missing_one_does(scene, scoped_admin):
    outside, missing = scene["outside"].pk, scene["outside"].pk + 1000
    before = snapshot()
    api, page = api_client(scoped_admin), page_client(scoped_admin)
    for overwrite in ("false", "true"):  # with a value that differs from the stored one: no conflict either
        answers = {}
        for asset_id in (outside, missing):
            response = api.post(
                f"{RESTORE}?overwrite={overwrite}", asset_document(asset_id), content_type="application/json"
            )
            assert "secret" not in response.content.decode()
            body = response.json()
            body.pop("events", None)
            answers[asset_id] = (response.status_code, without(json.dumps(body), asset_id))
        assert answers[outside] == answers[missing], answers
        assert answers[outside][0] == 200 and "no longer exists" in answers[outside][1]
    upload = {}
    for asset_id in (outside, missing):
        content = asset_document(asset_id).encode()
        data = {"file": SimpleUploadedFile("keys.json", content), "overwrite": "1"}
        preview = page.post(PAGE, data, **HX)  # what it would do, then "Restore" with the same file
        confirmed = re.search(r'name="confirmed" value="([0-9a-f]{64})"', preview.content.decode()).group(1)
        data = {"file": SimpleUploadedFile("keys.json", content), "overwrite": "1", "confirmed": confirmed}
        response = page.post(PAGE, data, **HX)
        assert "secret" not in response.content.decode()
        upload[asset_id] = (response.status_code, without(text(response), asset_id))
    assert upload[outside] == upload[missing] and upload[outside][0] == 200
    assert "no longer exists" in upload[outside][1]
    assert snapshot()[:2] == before[:2]  # the asset out of scope kept its value
    assert AssetStateStore.objects.get(asset=scene["outside"]).value == '"secret"'


def test_a_document_mixing_assets_in_and_out_of_scope_restores_those_in_scope(scene, scoped_admin):
    entries = [
        {"store": "asset", "asset_id": scene["inside"].pk, "key": "watermark", "value": "2026-12-01"},
        {"store": "asset", "asset_id": scene["outside"].pk, "key": "watermark", "value": "stolen"},
    ]
    content = json.dumps({"format": "statestore-admin/keys", "version": 1, "keys": entries})
    response = api_client(scoped_admin).post(f"{RESTORE}?overwrite=true", content, content_type="application/json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["restored"] == 1 and [m["asset_id"] for m in body["missing"]] == [scene["outside"].pk]
    values = dict(AssetStateStore.objects.values_list("asset_id", "value"))
    assert values == {scene["inside"].pk: '"2026-12-01"', scene["outside"].pk: '"secret"'}


# One web request restores a bounded number of keys ---------------------------------------------------------
def many_task_entries(count: int) -> str:
    entries = [
        {
            "store": "task",
            "dag_id": "etl_orders",
            "run_id": "manual__1",
            "task_id": "load",
            "map_index": -1,
            "key": f"k{i}",
            "value": i,
        }
        for i in range(count)
    ]
    return json.dumps({"format": "statestore-admin/keys", "version": 1, "keys": entries})


def test_a_page_or_api_restore_beyond_the_limit_is_refused_naming_it_and_the_command(scene, operator, tmp_path):
    content = many_task_entries(1001)
    before = snapshot()
    response = page_client(operator).post(PAGE, {"file": SimpleUploadedFile("keys.json", content.encode())}, **HX)
    assert response.status_code == 422
    page = text(response)
    assert "holds 1001 keys" in page and "at most 1000" in page and "manage.py state_store_restore FILE" in page
    for body in (content, {"file": SimpleUploadedFile("keys.json", content.encode())}):
        api = api_client(operator)
        response = (
            api.post(RESTORE, body, content_type="application/json")
            if isinstance(body, str)
            else api.post(RESTORE, body)
        )
        assert response.status_code == 422 and response["Content-Type"] == "application/json"
        message = response.json()["detail"][0]["msg"]
        assert "holds 1001 keys" in message and "manage.py state_store_restore FILE" in message
    assert snapshot() == before
    path = tmp_path / "keys.json"
    path.write_text(content, encoding="utf-8")
    call_command("state_store_restore", str(path), stdout=io.StringIO())  # the command has no limit
    assert TaskStateStore.objects.filter(key__startswith="k").count() == 1001
    response = api_client(operator).post(RESTORE, many_task_entries(1000), content_type="application/json")
    assert response.status_code == 200 and response.json()["unchanged"] == 1000  # the limit itself is allowed
    assert settings_value("RESTORE_MAX_KEYS") == 1000  # the default, which the words above name


def settings_value(name: str):
    from django.conf import settings

    return getattr(settings, name)


def test_undoing_an_event_beyond_the_limit_is_refused_on_the_page_and_the_api_not_by_the_command(
    scene, operator, settings
):
    settings.RESTORE_MAX_KEYS = 3
    api = api_client(operator)
    for i in range(4):
        TaskStateStore.objects.create(
            dag_run=scene["run"],
            dag_id="etl_orders",
            run_id="manual__1",
            task_id="load",
            map_index=-1,
            key=f"k{i}",
            value=str(i),
            updated_at=scene["run"].run_after,
        )
    cleared = api.delete("/api/v2/dags/etl_orders/dagRuns/manual__1/taskInstances/load/state-store")
    assert cleared.status_code == 204, cleared.content
    event = AuditEvent.objects.latest("id")
    assert event.key_count == 5
    before = snapshot()
    response = api.post(f"/api/statestore/v1/audit-events/{event.pk}/restore", "", content_type="application/json")
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["path", "id"]
    message = response.json()["detail"][0]["msg"]
    assert "holds 5 keys" in message and f"manage.py state_store_restore --event {event.pk}" in message
    response = page_client(operator).post(f"/audit/{event.pk}/restore/", **HX)
    assert response.status_code == 422 and f"state_store_restore --event {event.pk}" in text(response)
    assert snapshot() == before
    out = io.StringIO()
    call_command("state_store_restore", event=event.pk, stdout=out)
    assert "Restored 5 keys." in out.getvalue()
    assert TaskStateStore.objects.filter(dag_run=scene["run"]).count() == 5


def test_the_command_takes_a_file_or_an_event(tmp_path):
    for args, options in (((), {}), (("keys.json",), {"event": 1})):
        with pytest.raises(CommandError, match="either FILE or --event") as excinfo:
            call_command("state_store_restore", *args, **options)
        assert excinfo.value.returncode == 2
    with pytest.raises(CommandError, match="Audit event 999999 not found") as excinfo:
        call_command("state_store_restore", event=999999)
    assert excinfo.value.returncode == 2
