"""The REST API: Airflow's /api/v2 state-store contract (docs/airflow.md), authentication, permissions, our API."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.state import selectors
from statestore_admin.tokens.models import ApiToken
from tests.conftest import ALL_PERMS, BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
RUN_ID = "scheduled__2026-11-29T00:00:00+00:00"
TASKS = f"/api/v2/dags/etl/dagRuns/{RUN_ID.replace('+', '%2B')}/taskInstances"


@pytest.fixture
def scene(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl", run_id=RUN_ID)
    task_instance_factory(run, task_id="t")
    for map_index in (0, 1):
        task_instance_factory(run, task_id="mapped", map_index=map_index)
        task_key_factory(run, task_id="mapped", map_index=map_index, key="k", value=map_index)
    for key in ("b", "a", "c"):
        task_key_factory(run, task_id="t", key=key, value={"key": key}, expires_at=timezone.now() + timedelta(days=1))
    asset = asset_factory(name="orders")
    asset_key_factory(
        asset, key="watermark", value="2026-11-30", kind="task", dag_id="etl", run_id=RUN_ID, task_id="t", map_index=-1
    )
    asset_key_factory(asset, key="legacy", value=1, kind=None)
    return {"run": run, "asset": asset}


def writer_34() -> dict:
    """What Airflow 3.4 adds to a writer that recorded no task instance (3.3: nothing); tests/api/
    test_airflow_v2_regions.py covers a task writer's identity."""
    return {"task_instance_id": None, "try_number": None} if selectors.addresses_regions() else {}


def bearer(user) -> dict:
    _, token = ApiToken.issue(user, "tests")
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


@pytest.fixture
def api(client, operator):
    client.defaults.update(bearer(operator))
    return client


def put(client, url, body):
    return client.put(url, json.dumps(body), content_type="application/json")


def patch(client, url, body):
    return client.patch(url, json.dumps(body), content_type="application/json")


# Task state: reads -------------------------------------------------------------------------------
def test_list_sorted_by_key_with_total(api, scene):
    body = api.get(f"{TASKS}/t/state-store").json()
    assert [e["key"] for e in body["task_state_store"]] == ["a", "b", "c"]
    assert body["total_entries"] == 3
    entry = body["task_state_store"][0]
    assert set(entry) == {"key", "value", "updated_at", "expires_at"}
    assert entry["value"] == {"key": "a"} and entry["updated_at"].endswith("Z") and entry["expires_at"].endswith("Z")


def test_list_pagination_limit_and_offset(api, scene, task_key_factory):
    for n in range(120):
        task_key_factory(scene["run"], task_id="t", key=f"z{n:03d}")
    default = api.get(f"{TASKS}/t/state-store").json()
    assert len(default["task_state_store"]) == 50 and default["total_entries"] == 123
    capped = api.get(f"{TASKS}/t/state-store?limit=500").json()
    assert len(capped["task_state_store"]) == 100
    page = api.get(f"{TASKS}/t/state-store?limit=2&offset=3").json()
    assert [e["key"] for e in page["task_state_store"]] == ["z000", "z001"]
    assert api.get(f"{TASKS}/t/state-store?limit=0").json()["task_state_store"] == []


def test_list_of_an_unknown_task_instance_is_empty(api, scene):
    assert api.get(f"{TASKS}/nope/state-store").json() == {"task_state_store": [], "total_entries": 0}


def test_map_index(api, scene):
    assert api.get(f"{TASKS}/mapped/state-store?map_index=1").json()["task_state_store"][0]["value"] == 1
    assert api.get(f"{TASKS}/mapped/state-store/k?map_index=0").json()["value"] == 0
    assert api.get(f"{TASKS}/mapped/state-store").json()["total_entries"] == 0  # default -1


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        ("map_index=-2", "greater_than_equal"),
        ("map_index=x", "int_parsing"),
        ("limit=-1", "greater_than_equal"),
        ("offset=x", "int_parsing"),
    ],
)
def test_bad_query_parameters_are_422(api, scene, query, kind):
    response = api.get(f"{TASKS}/t/state-store?{query}")
    assert response.status_code == 422
    if query == "map_index=-2" and selectors.addresses_regions():  # Airflow 3.4 says it in words
        assert response.json() == {"detail": "map_index must be greater than or equal to -1"}
        return
    detail = response.json()["detail"][0]
    assert detail["type"] == kind and detail["loc"] == ["query", query.split("=")[0]]


def test_get_a_key_and_not_found(api, scene):
    assert api.get(f"{TASKS}/t/state-store/a").json()["value"] == {"key": "a"}
    missing = api.get(f"{TASKS}/t/state-store/nope")
    assert missing.status_code == 404 and missing.json() == {"detail": "Task state store key 'nope' not found"}


# Task state: writes ------------------------------------------------------------------------------
def test_put_creates_with_default_expiry(api, scene, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS", "3")
    response = put(api, f"{TASKS}/t/state-store/new", {"value": [1, "two", {"three": 3.5}]})
    assert response.status_code == 204 and response.content == b""
    row = TaskStateStore.objects.get(task_id="t", key="new")
    assert row.value == '[1, "two", {"three": 3.5}]'
    assert abs(row.expires_at - (timezone.now() + timedelta(days=3))) < timedelta(minutes=1)


@pytest.mark.parametrize(
    ("expires_at", "expected"), [(None, None), ("2031-02-03T04:05:06+01:00", "2031-02-03T03:05:06Z")]
)
def test_put_with_explicit_expiry_overwrites(api, scene, expires_at, expected):
    assert put(api, f"{TASKS}/t/state-store/a", {"value": "v2", "expires_at": expires_at}).status_code == 204
    body = api.get(f"{TASKS}/t/state-store/a").json()
    assert body["value"] == "v2" and body["expires_at"] == expected


def test_put_with_zero_retention_never_expires(api, scene, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS", "0")
    put(api, f"{TASKS}/t/state-store/a", {"value": 1, "expires_at": "default"})
    assert TaskStateStore.objects.get(task_id="t", key="a").expires_at is None


def test_keys_with_slashes_colons_and_spaces(api, scene):
    key = "path/to: the key ✓"
    url = f"{TASKS}/t/state-store/path%2Fto%3A%20the%20key%20%E2%9C%93"
    assert put(api, url, {"value": 1}).status_code == 204
    assert api.get(url).json()["key"] == key
    assert TaskStateStore.objects.filter(key=key).exists()
    assert api.delete(url).status_code == 204 and not TaskStateStore.objects.filter(key=key).exists()


def test_patch_keeps_the_expiry_and_answers_null(api, scene):
    before = TaskStateStore.objects.get(task_id="t", key="a")
    response = patch(api, f"{TASKS}/t/state-store/a", {"value": {"patched": True}})
    assert response.status_code == 200 and response.content == b"null"
    after = TaskStateStore.objects.get(pk=before.pk)
    assert after.value == '{"patched": true}' and after.expires_at == before.expires_at
    missing = patch(api, f"{TASKS}/t/state-store/nope", {"value": 1})
    assert missing.status_code == 404 and missing.json() == {"detail": "Task state store key 'nope' not found"}


def test_delete_a_key_even_when_absent(api, scene):
    assert api.delete(f"{TASKS}/t/state-store/a").status_code == 204
    assert api.delete(f"{TASKS}/t/state-store/a").status_code == 204
    assert not TaskStateStore.objects.filter(task_id="t", key="a").exists()


def test_clear_one_map_index_or_all(api, scene):
    assert api.delete(f"{TASKS}/mapped/state-store?map_index=0").status_code == 204
    assert set(TaskStateStore.objects.filter(task_id="mapped").values_list("map_index", flat=True)) == {1}
    assert api.delete(f"{TASKS}/mapped/state-store?all_map_indices=true").status_code == 204
    assert not TaskStateStore.objects.filter(task_id="mapped").exists()
    assert TaskStateStore.objects.filter(task_id="t").count() == 3


@pytest.mark.parametrize(
    ("method", "path", "detail"),
    [
        ("put", "/nope/state-store/k", "map_index=-1"),
        ("patch", "/nope/state-store/k", "map_index=-1"),
        ("delete", "/nope/state-store/k", "map_index=-1"),
        ("delete", "/nope/state-store", "map_index=-1"),
        ("delete", "/nope/state-store?all_map_indices=true", "all_map_indices=True"),
        ("delete", "/mapped/state-store", "map_index=-1"),
    ],
)
def test_writes_to_an_unknown_task_instance_are_404(api, scene, method, path, detail):
    call = {"put": put, "patch": patch}.get(method)
    response = call(api, f"{TASKS}{path}", {"value": 1}) if call else api.delete(f"{TASKS}{path}")
    assert response.status_code == 404
    task = path.split("/")[1]
    assert response.json() == {
        "detail": f"Task instance not found for dag_id='etl', run_id='{RUN_ID}', task_id='{task}', {detail}"
    }


# Validation --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "kind", "loc", "msg"),
    [
        ({"value": None}, "value_error", ["body", "value"], "Value error, value cannot be null"),
        ({"value": 1, "extra": 2}, "extra_forbidden", ["body", "extra"], "Extra inputs are not permitted"),
        ({}, "missing", ["body", "value"], "Field required"),
        ([1], "model_attributes_type", ["body"], "Input should be a valid dictionary or object to extract fields from"),
        (
            {"value": 1, "expires_at": "2030-01-01T00:00:00"},
            "timezone_aware",
            ["body", "expires_at", "datetime"],
            "Input should have timezone info",
        ),
        ({"value": 1, "expires_at": "soon"}, "datetime_from_date_parsing", ["body", "expires_at", "datetime"], None),
        ({"value": 1, "expires_at": 5}, "datetime_type", ["body", "expires_at", "datetime"], None),
    ],
)
def test_strict_bodies(api, scene, body, kind, loc, msg):
    before = TaskStateStore.objects.get(task_id="t", key="a").value
    response = put(api, f"{TASKS}/t/state-store/a", body)
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert (detail["type"], detail["loc"]) == (kind, loc)
    if msg:
        assert detail["msg"] == msg
    assert TaskStateStore.objects.get(task_id="t", key="a").value == before


@pytest.mark.parametrize("raw", ['{"value": NaN}', '{"value": [Infinity]}', '{"value": -Infinity}', '{"value": 1e999}'])
def test_nan_and_infinity_are_422_not_500(api, scene, raw):
    response = api.put(f"{TASKS}/t/state-store/a", raw, content_type="application/json")
    assert response.status_code == 422
    assert "non-finite numbers" in response.json()["detail"][0]["msg"]


def test_invalid_utf8_is_refused(api, scene):
    response = api.put(f"{TASKS}/t/state-store/a", b'{"value": "\xff\xfe"}', content_type="application/json")
    assert response.status_code == 422 and response.json()["detail"][0]["type"] == "json_invalid"
    assert TaskStateStore.objects.get(task_id="t", key="a").value == '{"key": "a"}'


def test_malformed_json_and_missing_body(api, scene):
    broken = api.put(f"{TASKS}/t/state-store/a", '{"value": ', content_type="application/json")
    assert broken.status_code == 422 and broken.json()["detail"][0]["type"] == "json_invalid"
    empty = api.put(f"{TASKS}/t/state-store/a", "", content_type="application/json")
    assert empty.status_code == 422 and empty.json()["detail"][0]["loc"] == ["body"]


def test_oversized_value(api, scene, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__MAX_VALUE_STORAGE_BYTES", "10")
    response = put(api, f"{TASKS}/t/state-store/a", {"value": "0123456789"})  # 12 characters of JSON
    assert response.status_code == 422
    assert response.json()["detail"][0]["msg"] == (
        "Value error, value exceeds max_value_storage_bytes (10); raise [state_store] max_value_storage_bytes "
        "or set it to 0 to disable the limit"
    )
    monkeypatch.setenv("AIRFLOW__STATE_STORE__MAX_VALUE_STORAGE_BYTES", "0")
    assert put(api, f"{TASKS}/t/state-store/a", {"value": "x" * 100_000}).status_code == 204


def test_513_character_key_is_a_validation_error(api, scene):
    response = put(api, f"{TASKS}/t/state-store/{'k' * 513}", {"value": 1})
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["path", "key"] and "at most 512 characters" in detail["msg"]
    assert put(api, f"{TASKS}/t/state-store/{'k' * 512}", {"value": 1}).status_code == 204


# Asset state -------------------------------------------------------------------------------------
def test_asset_list_get_and_writer(api, scene):
    asset = scene["asset"]
    body = api.get(f"/api/v2/assets/{asset.pk}/state-store").json()
    assert [e["key"] for e in body["asset_state_store"]] == ["legacy", "watermark"] and body["total_entries"] == 2
    legacy, watermark = body["asset_state_store"]
    assert legacy["last_updated_by"] is None
    assert watermark["last_updated_by"] == {
        "kind": "task",
        "dag_id": "etl",
        "run_id": RUN_ID,
        "task_id": "t",
        "map_index": -1,
        **writer_34(),
    }
    assert api.get(f"/api/v2/assets/{asset.pk}/state-store/watermark").json()["value"] == "2026-11-30"
    missing = api.get(f"/api/v2/assets/{asset.pk}/state-store/nope")
    assert missing.status_code == 404 and missing.json() == {"detail": "Asset state store key 'nope' not found"}


def test_asset_put_records_the_api_writer(api, scene):
    url = f"/api/v2/assets/{scene['asset'].pk}/state-store/watermark"
    assert put(api, url, {"value": {"at": "2026-12-01"}}).status_code == 204
    entry = api.get(url).json()
    assert entry["value"] == {"at": "2026-12-01"}
    assert entry["last_updated_by"] == {
        "kind": "api",
        "dag_id": None,
        "run_id": None,
        "task_id": None,
        "map_index": None,
        **writer_34(),
    }
    assert put(api, url, {"value": 1, "expires_at": None}).json()["detail"][0]["type"] == "extra_forbidden"


def test_asset_delete_and_clear(api, scene):
    base = f"/api/v2/assets/{scene['asset'].pk}/state-store"
    assert api.delete(f"{base}/legacy").status_code == 204
    assert api.delete(f"{base}/legacy").status_code == 204
    assert api.delete(base).status_code == 204
    assert not AssetStateStore.objects.exists()


@pytest.mark.parametrize("method", ["get", "delete", "get_key", "put_key", "delete_key"])
def test_unknown_asset_is_404_everywhere(api, scene, method):
    url = "/api/v2/assets/424242/state-store" + ("/k" if method.endswith("_key") else "")
    response = put(api, url, {"value": 1}) if method == "put_key" else getattr(api, method.split("_")[0])(url)
    assert response.status_code == 404 and response.json() == {"detail": "Asset with id 424242 not found"}


# Authentication and permissions --------------------------------------------------------------------
ENDPOINTS = [
    ("get", f"{TASKS}/t/state-store"),
    ("delete", f"{TASKS}/t/state-store"),
    ("get", f"{TASKS}/t/state-store/a"),
    ("put", f"{TASKS}/t/state-store/a"),
    ("patch", f"{TASKS}/t/state-store/a"),
    ("delete", f"{TASKS}/t/state-store/a"),
    ("get", "/api/v2/assets/{asset}/state-store"),
    ("delete", "/api/v2/assets/{asset}/state-store"),
    ("get", "/api/v2/assets/{asset}/state-store/watermark"),
    ("put", "/api/v2/assets/{asset}/state-store/watermark"),
    ("delete", "/api/v2/assets/{asset}/state-store/watermark"),
]


def call(client, method, url, asset):
    url = url.format(asset=asset.pk)
    if method in ("put", "patch"):
        return getattr(client, method)(url, json.dumps({"value": 1}), content_type="application/json")
    return getattr(client, method)(url)


def state():
    return (
        sorted(TaskStateStore.objects.values_list("task_id", "map_index", "key", "value")),
        sorted(AssetStateStore.objects.values_list("key", "value", "last_updated_by_kind")),
    )


@pytest.mark.parametrize(("method", "url"), ENDPOINTS)
def test_401_without_or_with_a_bad_token(client, scene, method, url, operator):
    before = state()
    response = call(client, method, url, scene["asset"])
    assert response.status_code == 401 and response.json() == {"detail": "Not authenticated"}
    assert response["WWW-Authenticate"] == "Bearer"
    client.defaults["HTTP_AUTHORIZATION"] = "Bearer not-a-token"
    assert call(client, method, url, scene["asset"]).status_code == 401
    record, token = ApiToken.issue(operator)
    record.revoke()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    assert call(client, method, url, scene["asset"]).status_code == 401
    assert state() == before


@pytest.mark.parametrize(("method", "url"), ENDPOINTS)
def test_403_without_permission(client, scene, user_factory, method, url):
    client.defaults.update(bearer(user_factory("nobody")))
    before = state()
    response = call(client, method, url, scene["asset"])
    assert response.status_code == 403 and response.json() == {"detail": "Forbidden"}
    assert state() == before


def test_view_only_may_read_not_write(client, scene, viewer):
    client.defaults.update(bearer(viewer))
    assert client.get(f"{TASKS}/t/state-store").status_code == 200
    assert put(client, f"{TASKS}/t/state-store/a", {"value": 9}).status_code == 403
    assert put(client, f"{TASKS}/t/state-store/new", {"value": 9}).status_code == 403
    assert client.delete(f"{TASKS}/t/state-store/a").status_code == 403
    assert TaskStateStore.objects.get(task_id="t", key="a").value == '{"key": "a"}'


def test_change_may_overwrite_but_not_create(client, scene, user_factory):
    client.defaults.update(bearer(user_factory("changer", perms=["task.view", "task.change"])))
    assert put(client, f"{TASKS}/t/state-store/a", {"value": 9}).status_code == 204
    assert put(client, f"{TASKS}/t/state-store/brand-new", {"value": 9}).status_code == 403
    assert not TaskStateStore.objects.filter(key="brand-new").exists()


def test_task_permissions_do_not_open_asset_state(client, scene, user_factory):
    client.defaults.update(bearer(user_factory("tasks", perms=["task.view"])))
    assert client.get(f"/api/v2/assets/{scene['asset'].pk}/state-store").status_code == 403


def test_session_authentication_needs_csrf(scene, operator):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    assert browser.get(f"{TASKS}/t/state-store").status_code == 200
    assert put(browser, f"{TASKS}/t/state-store/a", {"value": 9}).status_code == 403
    token = browser.get("/").cookies["csrftoken"].value
    response = browser.put(
        f"{TASKS}/t/state-store/a", json.dumps({"value": 9}), content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 204


# Tokens --------------------------------------------------------------------------------------------
def test_create_api_token_prints_only_the_token(operator):
    out = io.StringIO()
    call_command("create_api_token", operator.username, name="cron", stdout=out)
    token = out.getvalue().strip()
    assert "\n" not in token and token.startswith("ssa_") and len(token) > 40
    record = ApiToken.objects.get()
    assert record.name == "cron" and record.digest != token and token.startswith(record.prefix)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/statestore/v1/stats").status_code == 200
    assert ApiToken.objects.get().last_used_at is not None


def test_list_and_revoke_tokens(operator):
    record, token = ApiToken.issue(operator, "ci")
    out = io.StringIO()
    call_command("list_api_tokens", stdout=out)
    assert record.prefix in out.getvalue() and token not in out.getvalue()
    call_command("revoke_api_token", record.prefix, stdout=io.StringIO())
    assert Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/statestore/v1/stats").status_code == 401
    out = io.StringIO()
    call_command("list_api_tokens", stdout=out)
    assert record.prefix not in out.getvalue()
    with pytest.raises(Exception, match="No active token"):
        call_command("revoke_api_token", record.prefix)


def test_create_api_token_for_unknown_user():
    with pytest.raises(Exception, match="No user"):
        call_command("create_api_token", "ghost")


def test_tokens_page(client, operator, user_factory):
    client.force_login(operator)
    created = client.post("/account/tokens/", {"name": "laptop"}, follow=True).content.decode()
    token = created.split('data-testid="new-token">')[1].split("<")[0]
    assert Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/statestore/v1/stats").status_code == 200
    record = ApiToken.objects.get()
    listing = client.get("/account/tokens/").content.decode()
    assert record.prefix in listing and token not in listing
    other, _ = ApiToken.issue(user_factory("someone"))
    assert client.post("/account/tokens/", {"revoke": other.pk}).status_code == 404
    assert client.post("/account/tokens/", {"revoke": record.pk}).status_code == 302
    assert Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/statestore/v1/stats").status_code == 401


# Our own API ---------------------------------------------------------------------------------------
def test_search_with_cursor_pagination(api, scene, task_key_factory):
    for n in range(7):
        task_key_factory(scene["run"], task_id="t", key=f"job/{n}")
    first = api.get("/api/statestore/v1/search/task-keys?key=job/&match=prefix&limit=5").json()
    assert len(first["items"]) == 5 and first["next_cursor"]
    second = api.get(f"/api/statestore/v1/search/task-keys?key=job/&match=prefix&limit=5&cursor={first['next_cursor']}")
    keys = [i["key"] for i in first["items"] + second.json()["items"]]
    assert sorted(keys) == [f"job/{n}" for n in range(7)] and second.json()["next_cursor"] is None
    assets = api.get("/api/statestore/v1/search/asset-keys?key=water").json()["items"]
    assert [(i["asset_name"], i["key"]) for i in assets] == [("orders", "watermark")]
    assert api.get("/api/statestore/v1/search/task-keys?status=bogus").status_code == 422


def test_stats_and_gc_dry_run(api, scene, task_key_factory):
    task_key_factory(scene["run"], task_id="t", key="gone", expires_at=timezone.now() - timedelta(hours=1))
    stats = api.get("/api/statestore/v1/stats").json()
    assert (stats["task_keys"], stats["asset_keys"], stats["expired"]) == (6, 2, 1)
    assert {c["option"] for c in stats["config"]} >= {"[state_store] backend", "[state_store] default_retention_days"}
    dry = api.get("/api/statestore/v1/gc/dry-run").json()
    assert dry["rows"] == 1 and dry["backend_is_metastore"] and dry["sample"][0]["key"] == "gone"
    assert TaskStateStore.objects.filter(key="gone").exists()
    for before in ("2999-01-01T00:00:00Z", "2026-01-01T00:00:00", "yesterday"):
        refused = api.get("/api/statestore/v1/gc/dry-run", {"before": before})
        assert refused.status_code == 422
        [item] = refused.json()["detail"]
        assert (item["type"], item["loc"], item["input"]) == ("value_error", ["query", "before"], before)
        assert item["msg"].startswith("Value error, ")
    empty_dag = api.get("/api/statestore/v1/gc/dry-run?dag_id=").json()["detail"]
    assert [(i["type"], i["loc"]) for i in empty_dag] == [("value_error", ["query", "dag_id"])]


def test_openapi_schema_and_local_docs(api, client, operator):
    schema = api.get("/api/schema/?format=json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    for path in (
        "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/state-store",
        "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/state-store/{key}",
        "/api/v2/assets/{asset_id}/state-store",
        "/api/v2/assets/{asset_id}/state-store/{key}",
        "/api/statestore/v1/search/task-keys",
        "/api/statestore/v1/gc/dry-run",
    ):
        assert path in paths, path
    assert Client().get("/api/schema/").status_code == 401
    client.force_login(operator)
    docs = client.get("/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in docs and "cdn" not in docs.lower()


def test_all_permissions_constant_matches_the_stores():
    assert len(ALL_PERMS) == 8


def test_nul_characters_are_refused_before_the_database(api, client, operator, scene):
    response = api.get("/api/statestore/v1/search/task-keys?key=%00")
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["query", "key"]
    assert api.get(f"{TASKS}/t/state-store/a%00b").status_code == 422
    client.force_login(operator)
    assert client.get("/search/?key=%00").status_code == 400
    assert (
        client.post(
            "/keys/task/delete/",
            {"run": scene["run"].pk, "task_id": "t\x00", "listed": ""},
        ).status_code
        == 400
    )
    assert TaskStateStore.objects.count() == 5


def test_administrators_revoke_tokens_in_the_admin(client, user_factory, operator):
    admin_user = user_factory("root", is_staff=True, is_superuser=True)
    record, token = ApiToken.issue(operator, "laptop")
    client.force_login(admin_user)
    listing = client.get("/admin/tokens/apitoken/").content.decode()
    assert record.prefix in listing and token not in listing
    response = client.post("/admin/tokens/apitoken/", {"action": "revoke", "_selected_action": [record.pk]})
    assert response.status_code == 302
    assert Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/statestore/v1/stats").status_code == 401


@pytest.mark.parametrize(
    ("query", "name", "maximum"),
    [({"map_index": str(2**31)}, "map_index", 2**31 - 1), ({"offset": str(10**19)}, "offset", 2**63 - 1)],
)
def test_integers_beyond_the_databases_range_are_422(api, scene, query, name, maximum):
    url = f"{TASKS}/t/state-store?{'&'.join(f'{k}={v}' for k, v in query.items())}"
    methods = ("get",) if name == "offset" else ("get", "delete")  # only the list takes an offset
    for method in methods:
        response = getattr(api, method)(url)
        assert response.status_code == 422, response.content
        assert response.json()["detail"][0]["loc"] == ["query", name]
        assert response.json()["detail"][0]["ctx"] == {"le": maximum}
    assert api.delete(f"{TASKS}/t/state-store/key?map_index={2**40}").status_code == 422
