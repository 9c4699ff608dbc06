"""No input answers 500 (issue 11): each input found by hand, and the class it stands for, answers its 4xx
in the face's format (pages: a page or a form with its message; API: JSON in Airflow's shape)."""

import base64
import json

import pytest
from django.contrib.auth.decorators import login_not_required
from django.test import Client, override_settings
from django.urls import include, path
from django.utils import timezone

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.core.values import MAX_DEPTH
from statestore_admin.exports import restore as restores
from statestore_admin.records.models import AuditEvent
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
RUN_ID = "manual__2026-11-30T00:00:00+00:00"
TASK_API = f"/api/v2/dags/etl/dagRuns/{RUN_ID.replace('+', '%2B')}/taskInstances/t/state-store"
HX = {"HTTP_HX_REQUEST": "true"}


def nested(depth: int, leaf=1):
    """``depth`` arrays around ``leaf``, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def nested_text(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


@pytest.fixture
def scene(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl", run_id=RUN_ID)
    task_instance_factory(run, task_id="t")
    key = task_key_factory(run, task_id="t", key="k", value={"a": 1})
    asset = asset_factory(name="orders")
    asset_key = asset_key_factory(asset, key="k", value=[1])
    return {"run": run, "key": key, "asset": asset, "asset_key": asset_key}


@pytest.fixture
def api(client, operator):
    _, token = ApiToken.issue(operator, "tests")
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client


@pytest.fixture
def pages(client, operator):
    client.force_login(operator)
    return client


def send(client, method: str, url: str, body: str):
    return getattr(client, method)(url, body, content_type="application/json")


def is_airflow_422(response, loc_prefix: list) -> dict:
    assert response.status_code == 422, response.content
    detail = response.json()["detail"]
    assert any(item["loc"][: len(loc_prefix)] == loc_prefix for item in detail), detail
    return detail


# 1. Nesting depth at write time ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["put", "patch"])
def test_api_value_nested_10000_levels_is_422(api, scene, method):
    body = '{"value": ' + nested_text(10_000) + "}"
    response = send(api, method, f"{TASK_API}/k", body)
    detail = is_airflow_422(response, ["body"])
    assert f"{MAX_DEPTH} levels" in detail[0]["msg"]
    assert json.loads(TaskStateStore.objects.get(key="k").value) == {"a": 1}


def test_api_asset_and_restore_bodies_nested_10000_levels_are_422(api, scene):
    asset = scene["asset"]
    is_airflow_422(
        send(api, "put", f"/api/v2/assets/{asset.pk}/state-store/k", '{"value": ' + nested_text(10_000) + "}"), ["body"]
    )
    document = '{"format": "statestore-admin/keys", "version": 1, "keys": [' + nested_text(10_000) + "]}"
    is_airflow_422(send(api, "post", "/api/statestore/v1/restore", document), ["body"])


@pytest.mark.parametrize("method", ["put", "patch"])
def test_api_value_just_over_the_depth_limit_is_refused_by_the_domain(api, scene, method):
    response = send(api, method, f"{TASK_API}/k", json.dumps({"value": nested(MAX_DEPTH + 1)}))
    detail = is_airflow_422(response, ["body", "value"])
    assert detail[0]["msg"].startswith("Value error, ") and f"at most {MAX_DEPTH}" in detail[0]["msg"]
    assert send(api, method, f"{TASK_API}/k", json.dumps({"value": nested(MAX_DEPTH)})).status_code in (200, 204)
    assert json.loads(TaskStateStore.objects.get(key="k").value) == nested(MAX_DEPTH)


def test_api_asset_value_over_the_depth_limit_is_422(api, scene):
    url = f"/api/v2/assets/{scene['asset'].pk}/state-store/k"
    is_airflow_422(send(api, "put", url, json.dumps({"value": {"a": nested(MAX_DEPTH)}})), ["body", "value"])
    assert json.loads(AssetStateStore.objects.get(key="k").value) == [1]


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 10_000])
def test_forms_refuse_values_nested_too_deep(pages, scene, depth):
    run, key, asset = scene["run"], scene["key"], scene["asset"]
    text = nested_text(depth)
    add = pages.post(
        f"/runs/{run.pk}/tasks/t/add/", {"key": "new", "value": text, "map_index": -1, "expiry": "never"}, **HX
    )
    assert add.status_code == 422 and f"at most {MAX_DEPTH}" in add.content.decode()
    edit = pages.post(f"/keys/task/{key.pk}/edit/", {"value": text}, **HX)
    assert edit.status_code == 422 and f"at most {MAX_DEPTH}" in edit.content.decode()
    asset_add = pages.post(f"/assets/{asset.pk}/add/", {"key": "new", "value": text}, **HX)
    assert asset_add.status_code == 422
    asset_edit = pages.post(f"/assets/{asset.pk}/key/edit/?key=k", {"value": text}, **HX)
    assert asset_edit.status_code == 422
    assert not TaskStateStore.objects.filter(key="new").exists() and not AssetStateStore.objects.filter(key="new")


# 2. A value nested deeper than the limit, written by Airflow ----------------------------------------------
@pytest.fixture
def deep(scene, task_key_factory, asset_key_factory):
    run, asset = scene["run"], scene["asset"]
    return {
        "task": task_key_factory(run, task_id="t", key="deep", value=nested(200)),
        "asset": asset_key_factory(asset, key="deep", value={"x": nested(200)}),
    }


def test_a_stored_value_nested_200_levels_renders_as_raw_text(pages, scene, deep):
    task_page = pages.get(f"/keys/task/{deep['task'].pk}/")
    assert task_page.status_code == 200
    html = task_page.content.decode()
    assert f"nest more than {MAX_DEPTH} levels deep: shown as raw text" in html and "[[[[[[[[1]]]]]]]]" in html
    asset_page = pages.get(f"/assets/{scene['asset'].pk}/key/?key=deep")
    assert asset_page.status_code == 200 and "shown as raw text" in asset_page.content.decode()
    for url in (
        f"/runs/{scene['run'].pk}/",
        f"/runs/{scene['run'].pk}/tasks/t/",
        f"/assets/{scene['asset'].pk}/",
        "/search/?key=deep",
        f"/keys/task/{deep['task'].pk}/edit/",
        f"/assets/{scene['asset'].pk}/key/edit/?key=deep",
        "/",
    ):
        assert pages.get(url).status_code == 200, url


def test_a_deep_stored_value_in_the_audit_trail_and_the_api(api, pages, scene, deep):
    assert api.get(f"{TASK_API}/deep").json()["value"] == json.dumps(nested(200))  # raw text, not a 500
    assert api.get(f"/api/v2/assets/{scene['asset'].pk}/state-store").status_code == 200
    assert send(api, "patch", f"{TASK_API}/deep", '{"value": 1}').status_code == 200  # audited: before = deep
    event = AuditEvent.objects.latest("pk")
    assert pages.get(f"/audit/{event.pk}/").status_code == 200
    assert pages.get("/audit/").status_code == 200
    assert api.get(f"/api/statestore/v1/audit-events/{event.pk}").status_code == 200
    assert api.get("/api/statestore/v1/audit-events").status_code == 200


# 3. Tampered keyset cursors --------------------------------------------------------------------------------
def cursor(values) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


BAD_VALUES = [
    "abc",
    [1, 2],
    None,
    {},
    {"a": 1},
    {"dt": "not a date"},
    {"dt": "2026-13-01T00:00:00+00:00"},
    {"dt": "2026-01-01T00:00:00"},
    {"dt": "2026-01-01T00:00:00+00:00"},
    10**30,
    2**63,
    -(2**63) - 1,
    True,
    1.5,
    "a\x00b",
]
BAD_CURSORS = (
    [cursor([bad] * n) for bad in BAD_VALUES for n in (1, 2, 3, 4)]
    + [cursor(["t", "not an int", "k", 1]), cursor(["k", 1]), cursor([1, 1]), cursor({"a": 1}), cursor("abc")]
    + ["!!!", "abc", "x" * 1001, "e30", "W10"]
)


CURSOR_CHUNK = 10  # cursors per test: the suite's workers share the 70 cursors × 13 lists


@pytest.mark.parametrize(
    "bad_cursors",
    [BAD_CURSORS[at : at + CURSOR_CHUNK] for at in range(0, len(BAD_CURSORS), CURSOR_CHUNK)],
    ids=[
        f"cursors {at}-{min(at + CURSOR_CHUNK, len(BAD_CURSORS)) - 1}"
        for at in range(0, len(BAD_CURSORS), CURSOR_CHUNK)
    ],
)
def test_tampered_cursors_are_the_first_page_on_every_list(api, pages, scene, deep, bad_cursors):
    run, asset = scene["run"], scene["asset"]
    event_id = AuditEvent.objects.latest("pk").pk if AuditEvent.objects.exists() else None
    assert send(api, "patch", f"{TASK_API}/k", '{"value": 2}').status_code == 200
    event_id = AuditEvent.objects.latest("pk").pk
    page_urls = [
        "/dags/?cursor={}",
        "/dags/etl/?cursor={}",
        f"/runs/{run.pk}/?cursor={{}}",
        f"/runs/{run.pk}/tasks/t/?cursor={{}}",
        "/assets/?cursor={}",
        f"/assets/{asset.pk}/?cursor={{}}",
        "/search/?key=k&task_cursor={}&asset_cursor={}",
        "/audit/?cursor={}",
        f"/audit/{event_id}/?cursor={{}}",
    ]
    api_urls = [
        "/api/statestore/v1/search/task-keys?key=k&cursor={}",
        "/api/statestore/v1/search/asset-keys?key=k&cursor={}",
        "/api/statestore/v1/audit-events?cursor={}",
        f"/api/statestore/v1/audit-events/{event_id}?keys_cursor={{}}",
    ]
    first = {url: pages.get(url.format("", "")).content for url in page_urls}
    for bad in bad_cursors:
        for url in page_urls:
            response = pages.get(url.format(bad, bad))
            assert response.status_code == 200, (url, bad)
        for url in api_urls:
            response = api.get(url.format(bad))
            assert response.status_code == 200, (url, bad, response.content)
    assert all(first[url] for url in page_urls)


def test_a_tampered_cursor_shows_the_first_page(api, scene):
    url = "/api/statestore/v1/search/task-keys?key=k&cursor="
    assert api.get(url + cursor(["abc"])).json() == api.get(url).json()


# 4. Integers beyond the database's range -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["offset", "limit", "map_index"])
@pytest.mark.parametrize("number", [10**19, -(10**19), 2**63])
def test_huge_integer_query_parameters_are_422(api, scene, name, number):
    is_airflow_422(api.get(f"{TASK_API}?{name}={number}"), ["query", name])
    if name != "map_index":
        is_airflow_422(api.get(f"/api/v2/assets/{scene['asset'].pk}/state-store?{name}={number}"), ["query", name])


@pytest.mark.parametrize(
    "url",
    [
        "/api/statestore/v1/search/task-keys?limit={}",
        "/api/statestore/v1/search/asset-keys?limit={}",
        "/api/statestore/v1/gc/dry-run?top={}",
        "/api/statestore/v1/audit-events?limit={}",
    ],
)
def test_huge_integers_on_our_endpoints_are_422(api, scene, url):
    for number in (10**19, -(10**19), "abc"):
        response = api.get(url.format(number))
        assert response.status_code == 422, (url, number, response.content)
        assert isinstance(response.json()["detail"], list)


def test_an_asset_id_filter_beyond_an_integer_is_422(api, scene):
    for raw in (str(10**19), "0", "abc"):
        is_airflow_422(api.get(f"/api/statestore/v1/audit-events?asset_id={raw}"), ["query", "asset_id"])


def test_huge_path_integers_are_404(api, pages, scene):
    huge = 10**19
    for url in (
        f"/api/v2/assets/{huge}/state-store",
        f"/api/v2/assets/{huge}/state-store/k",
        f"/api/v2/assets/-{huge}/state-store",
        f"/api/statestore/v1/audit-events/{huge}",
    ):
        response = api.get(url)
        assert response.status_code == 404 and "detail" in response.json(), url
    assert api.post(f"/api/statestore/v1/audit-events/{huge}/restore").status_code == 404
    for url in (
        f"/runs/{huge}/",
        f"/runs/{huge}/tasks/t/",
        f"/keys/task/{huge}/",
        f"/assets/{huge}/",
        f"/audit/{huge}/",
    ):
        assert pages.get(url).status_code == 404, url
    run = scene["run"]
    assert pages.get(f"/runs/{run.pk}/tasks/t/?map_index={huge}").status_code == 200
    assert pages.get(f"/keys/task/delete/?ids={huge}", **HX).status_code in (200, 422)
    assert pages.get(f"/keys/task/delete/?run={huge}&task_id=t", **HX).status_code == 404
    assert pages.get(f"/keys/task/delete/?run={run.pk}&task_id=t&map_index={huge}", **HX).status_code in (200, 422)
    add = pages.post(f"/runs/{run.pk}/tasks/t/add/", {"key": "n", "value": "1", "map_index": huge, "expiry": "never"})
    assert add.status_code == 422


# 5. Impossible dates ---------------------------------------------------------------------------------------
IMPOSSIBLE = [
    "2026-13-01T00:00:00+00:00",
    "2026-02-30T00:00:00+00:00",
    "2026-01-01T25:00:00+00:00",
    "2026-01-01T00:00:00+25:00",
    "0001-01-01T00:00:00+01:00",
]


@pytest.mark.parametrize("when", IMPOSSIBLE)
def test_gc_dry_run_with_an_impossible_cutoff_is_422(api, when):
    response = api.get("/api/statestore/v1/gc/dry-run", {"before": when})
    is_airflow_422(response, ["query", "before"])


@pytest.mark.parametrize("when", IMPOSSIBLE)
def test_impossible_dates_in_the_forms_are_422(api, pages, scene, when):
    run, key, asset = scene["run"], scene["key"], scene["asset"]
    add = pages.post(
        f"/runs/{run.pk}/tasks/t/add/", {"key": "n", "value": "1", "map_index": -1, "expiry": "at", "expires_at": when}
    )
    assert add.status_code == 422 and not TaskStateStore.objects.filter(key="n").exists()
    expiry = pages.post(f"/keys/task/{key.pk}/expiry/", {"expiry": "at", "expires_at": when}, **HX)
    assert expiry.status_code == 422
    seen = pages.post(f"/keys/task/{key.pk}/edit/", {"value": "2", "seen_updated_at": when}, **HX)
    assert seen.status_code == 422
    for url, data in (
        ("/keys/task/delete/", {"ids": key.pk}),
        ("/keys/task/expire/", {"ids": key.pk}),
        ("/keys/task/delete/", {"run": run.pk, "task_id": "t"}),
        (f"/assets/{asset.pk}/delete/", {"keys": "k"}),
        (f"/assets/{asset.pk}/delete/", {"all": "1"}),
    ):
        response = pages.post(url, {**data, "confirmed_at": when}, **HX)
        assert response.status_code == 422, (url, response.content)
    put = send(api, "put", f"{TASK_API}/k", json.dumps({"value": 1, "expires_at": when}))
    is_airflow_422(put, ["body", "expires_at"])
    assert json.loads(TaskStateStore.objects.get(key="k").value) == {"a": 1}


# 6. Task ids that cannot be in a URL -----------------------------------------------------------------------
@pytest.mark.parametrize("task_id", ["", "a/b", "/", "t/../x"])
def test_task_instance_lookup_of_an_impossible_task_id_is_404(pages, scene, task_id):
    response = pages.get("/task-instance/", {"dag_id": "etl", "run_id": RUN_ID, "task_id": task_id})
    assert response.status_code == 404


def test_task_instance_lookup_still_redirects(pages, scene):
    response = pages.get("/task-instance/", {"dag_id": "etl", "run_id": RUN_ID, "task_id": "t", "map_index": "x"})
    assert response.status_code == 302 and response["Location"].endswith("/tasks/t/?map_index=-1")


# 7. Every API error is JSON ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url", ["/api/", "/api/v2/nothing", "/api/v2/dags/etl/dagRuns", "/api/statestore/v1/nope", "/api/v2/assets/1/x"]
)
def test_unrouted_api_paths_are_json_404(api, client, url):
    for who in (api, Client()):
        response = who.get(url)
        assert response.status_code == 404 and response["Content-Type"] == "application/json", url
        assert "detail" in response.json()
    assert Client().get("/api/v2/nothing").json() == {"detail": "Not Found"}


def test_an_unrouted_page_is_still_html(pages):
    response = pages.get("/no-such-page/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


def test_method_not_allowed_is_json(api):
    response = api.post("/api/docs/")
    assert response.status_code == 405 and response.json() == {"detail": "Method Not Allowed"}
    assert "GET" in response["Allow"]
    assert api.put(TASK_API).json() == {"detail": "Method Not Allowed"}


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_an_oversized_body_is_json_413(api, pages):
    response = api.post("/api/statestore/v1/restore", {"file": "x" * 2000})  # a form body, read by Django
    assert response.status_code == 413 and response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Request body too large: at most 1000 bytes"}
    page = pages.post("/audit/restore-file/", {"x": "y" * 2000})
    assert page.status_code == 413 and page["Content-Type"].startswith("text/html")


def test_a_bad_host_is_json_400_under_the_api():
    response = Client().get("/api/v2/nothing", HTTP_HOST="evil.example")
    assert response.status_code == 400 and response.json() == {"detail": "Bad Request"}


def test_nul_in_an_api_path_is_json_422(api):
    assert api.get(f"{TASK_API}/a%00b").status_code == 422


@login_not_required
def _raises(request):
    raise RuntimeError("a bug")


urlpatterns = [path("api/test/raises", _raises), path("", include("statestore_admin.urls"))]


@pytest.mark.parametrize("debug", [False, True])
def test_an_unexpected_exception_is_json_500(debug):
    with override_settings(ROOT_URLCONF=__name__, DEBUG=debug):
        response = Client(raise_request_exception=False).get("/api/test/raises")
    assert response.status_code == 500 and response.json() == {"detail": "Internal Server Error"}


@pytest.mark.parametrize(
    "key", ["a\nb", "line\n", "\n", "tab\there", "cr\rlf", "slash/and\nnewline", "\x7f", "é\u2028"]
)
def test_keys_with_control_characters_route_like_any_other(api, scene, key):
    from urllib.parse import quote

    url = f"{TASK_API}/{quote(key, safe='')}"
    assert send(api, "put", url, '{"value": 1}').status_code == 204
    assert api.get(url).json()["key"] == key
    asset_url = f"/api/v2/assets/{scene['asset'].pk}/state-store/{quote(key, safe='')}"
    assert send(api, "put", asset_url, '{"value": 2}').status_code == 204
    assert api.get(asset_url).json()["value"] == 2
    assert api.delete(url).status_code == 204 and api.get(url).status_code == 404


# 8. A path integer that is not one: Airflow's 422 ----------------------------------------------------------
AIRFLOW_ASSET_ID_422 = {
    "detail": [
        {
            "type": "int_parsing",
            "loc": ["path", "asset_id"],
            "msg": "Input should be a valid integer, unable to parse string as an integer",
            "input": "abc",
        }
    ]
}


def test_a_non_integer_asset_id_is_airflows_422(api, scene):
    assert api.get("/api/v2/assets/abc/state-store").json() == AIRFLOW_ASSET_ID_422
    for method, url in (
        ("get", "/api/v2/assets/abc/state-store"),
        ("delete", "/api/v2/assets/abc/state-store"),
        ("get", "/api/v2/assets/abc/state-store/k"),
        ("put", "/api/v2/assets/abc/state-store/k"),
        ("delete", "/api/v2/assets/abc/state-store/k"),
    ):
        response = send(api, method, url, '{"value": 1}') if method == "put" else getattr(api, method)(url)
        assert response.status_code == 422 and response.json() == AIRFLOW_ASSET_ID_422, (method, url)
    assert api.get("/api/v2/assets/1.5/state-store").json()["detail"][0]["input"] == "1.5"
    assert Client().get("/api/v2/assets/abc/state-store").status_code == 401  # authentication first, as in Airflow


DEEP = "[" * 5000 + "]" * 5000  # deeper than Python's JSON parser goes


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_values_deeper_than_the_parser_goes_never_fail(dag_run_factory, task_instance_factory):
    """A stored value nested past Python's recursion limit (Airflow writes without a depth limit)."""
    from statestore_admin.airflow.models import TaskStateStore, worker_ref_of
    from statestore_admin.core import pagination, values
    from statestore_admin.exports import documents as exports

    run = dag_run_factory(dag_id="deep")
    row = TaskStateStore.objects.create(
        dag_run=run, dag_id="deep", run_id=run.run_id, task_id="t", key="k", value=DEEP, updated_at=timezone.now()
    )
    assert worker_ref_of(DEEP) is None and row.worker_ref is None
    assert exports.task_entry(row)["value_json"] == DEEP
    assert values.decoded(DEEP) == DEEP  # the one decoder, which the GC dry run uses too
    cursor = base64.urlsafe_b64encode(DEEP.encode()).decode()
    assert pagination.decode_cursor(cursor, 1) is None


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_restore_documents_deeper_than_the_parser_goes_are_refused(operator):
    from statestore_admin.access.actors import Actor
    from statestore_admin.core.errors import Invalid
    from statestore_admin.exports.documents import FORMAT

    entry = {"store": "task", "dag_id": "d", "run_id": "r", "task_id": "t", "key": "k", "value_json": DEEP}
    with pytest.raises(Invalid, match="nest"):
        restores.restore_document(
            actor=Actor(via="ui", user=operator), document={"format": FORMAT, "version": 1, "keys": [entry]}
        )


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_audit_asset_id_beyond_an_integer_is_invalid():
    from statestore_admin.core.errors import Invalid
    from statestore_admin.state import selectors

    with pytest.raises(Invalid):
        selectors.AuditQuery.from_params({"asset_id": str(10**19)})
