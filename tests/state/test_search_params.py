"""Search parameters: one parser (``SearchQuery.from_params``) for the Search page and the search API."""

from datetime import timedelta

import pytest
from django.http import QueryDict
from django.utils import timezone

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.core.errors import Invalid
from statestore_admin.state.search import MATCHES, STATUSES, SearchQuery
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

TASK_API = "/api/statestore/v1/search/task-keys"
ASSET_API = "/api/statestore/v1/search/asset-keys"


@pytest.fixture
def keys(dag_run_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="manual__1")
    task_key_factory(run, task_id="submit", key="job_id", expires_at=None)
    task_key_factory(run, task_id="submit", key="old_job", expires_at=timezone.now() - timedelta(hours=1))
    task_key_factory(run, task_id="train", key="jobs/epoch", expires_at=timezone.now() + timedelta(days=3))
    asset_key_factory(asset_factory(name="orders", uri="s3://warehouse/orders"), key="job_watermark")


@pytest.fixture
def api(client, operator):
    _, token = ApiToken.issue(operator, "tests")
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client


# The domain ----------------------------------------------------------------------------------------
def test_defaults_and_cleaning():
    assert SearchQuery.from_params(QueryDict("")) == SearchQuery()
    query = SearchQuery.from_params(
        QueryDict("key=%20job%20&match=&dag_id=%20etl%20&run_id=r%20&task_id=%20t&status=&asset=%20orders")
    )
    assert query == SearchQuery(key=" job ", match="contains", dag_id="etl", run_id="r", task_id="t", asset="orders")
    assert SearchQuery.from_params({"match": "exact", "status": "never"}).match == "exact"


@pytest.mark.parametrize(("params", "fields"), [({"match": "fuzzy"}, ["match"]), ({"status": "gone"}, ["status"])])
def test_unknown_choices_are_invalid(params, fields):
    with pytest.raises(Invalid) as excinfo:
        SearchQuery.from_params(params)
    assert list(excinfo.value.message_dict) == fields
    [error] = excinfo.value.error_dict[fields[0]]
    assert error.code == "enum" and tuple(error.params["choices"]) == (
        MATCHES if fields == ["match"] else tuple(STATUSES)
    )
    assert repr(params[fields[0]]) in error.messages[0]


def test_both_unknown_and_percent_signs_are_reported_as_typed():
    with pytest.raises(Invalid) as excinfo:
        SearchQuery.from_params({"match": "%s%d", "status": "100%"})
    messages = excinfo.value.message_dict
    assert "'%s%d'" in messages["match"][0] and "'100%'" in messages["status"][0]


# The API -------------------------------------------------------------------------------------------
def test_api_answers_422_in_airflows_shape(api, keys):
    body = api.get(TASK_API, {"match": "fuzzy", "status": "gone"}).json()
    assert body == {
        "detail": [
            {
                "type": "enum",
                "loc": ["query", "match"],
                "msg": "Input should be one of contains, prefix, exact",
                "input": "fuzzy",
            },
            {
                "type": "enum",
                "loc": ["query", "status"],
                "msg": f"Input should be one of {', '.join(STATUSES)}",
                "input": "gone",
            },
        ]
    }
    assert api.get(ASSET_API, {"match": "fuzzy"}).status_code == 422


def test_api_and_page_find_the_same_keys(api, operator, keys):
    api.force_login(operator)  # the page needs a session; the API takes the token
    for params in (
        {"key": "job", "match": "prefix"},
        {"key": "JOB"},
        {"dag_id": " etl ", "task_id": "submit"},
        {"status": "expired"},
        {"key": "job_id", "match": "exact"},
    ):
        found = {item["key"] for item in api.get(TASK_API, params).json()["items"]}
        html = api.get("/search/", {**params, "store": "task"}).content.decode().replace("<wbr>", "")
        shown = {key for key in ("job_id", "old_job", "jobs/epoch") if f">{key}<" in html}
        assert found == shown and found, params


# The page ------------------------------------------------------------------------------------------
def test_page_says_what_is_wrong_instead_of_using_defaults(client, operator, keys):
    client.force_login(operator)
    response = client.get("/search/", {"key": "job", "match": "fuzzy", "store": "task"})
    html = response.content.decode()
    assert response.status_code == 400
    assert "Unknown match &#x27;fuzzy&#x27;: use one of contains, prefix, exact." in html
    assert ">job_id<" not in html and ">old_job<" not in html  # nothing searched with a guessed match
    assert 'name="key" value="job"' in html  # the other filters stay in the form


def test_page_escapes_the_typed_value(client, operator, keys):
    client.force_login(operator)
    html = client.get("/search/", {"status": "<script>alert(1)</script>"}).content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_htmx_refresh_gets_the_message_as_text(client, operator, keys):
    client.force_login(operator)
    response = client.get(
        "/search/", {"key": "job", "status": "gone"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="keys-panel"
    )
    assert response.status_code == 400 and response["Content-Type"].startswith("text/plain")
    assert response.content.decode().startswith("Unknown status 'gone': use one of ")


def test_valid_page_search_still_works(client, operator, keys):
    client.force_login(operator)
    response = client.get("/search/", {"key": "job", "match": "prefix", "status": "never"})
    html = response.content.decode().replace("<wbr>", "")  # keys may wrap after their separators
    assert response.status_code == 200 and ">job_id<" in html and ">old_job<" not in html


# Filters behave the same everywhere (issue 14) -------------------------------------------------------
@pytest.fixture
def stores(dag_run_factory, task_key_factory, asset_factory, asset_key_factory):
    """Task keys of ml_train, ml_eval and etl (values with non-ASCII text and quotes), and asset keys of a
    warehouse asset and another one."""
    runs = {dag: dag_run_factory(dag_id=dag, run_id=f"manual__{dag}") for dag in ("ml_train", "ml_eval", "etl")}
    task_key_factory(runs["ml_train"], key="score", value={"note": "Grüße aus Köln"})  # stored as \\u escapes
    task_key_factory(runs["ml_eval"], key="score", value={"msg": 'say "hi"'})
    task_key_factory(runs["etl"], key="cursor", value=41)
    raw = task_key_factory(runs["etl"], key="greeting", value="")
    TaskStateStore.objects.filter(pk=raw.pk).update(value='"GRÜSSE, grüße"')  # stored as the text itself
    asset_key_factory(asset_factory(name="orders", uri="s3://warehouse/orders"), key="watermark", value="Köln")
    asset_key_factory(asset_factory(name="users", uri="s3://lake/users"), key="watermark", value="x")


def found(client, url, params):
    return sorted((i.get("dag_id") or i.get("asset_name"), i["key"]) for i in client.get(url, params).json()["items"])


def test_an_asset_filter_leaves_task_keys_out_and_a_dag_filter_asset_keys(api, operator, stores):
    assert found(api, TASK_API, {"asset": "warehouse"}) == []
    assert found(api, ASSET_API, {"asset": "warehouse"}) == [("orders", "watermark")]
    assert found(api, ASSET_API, {"dag_id": "ml_"}) == []
    api.force_login(operator)
    html = api.get("/search/", {"asset": "warehouse", "store": "all"}).content.decode()
    assert "Task state has no asset: the asset filter leaves it out." in html
    orders = f'href="/assets/{AssetStateStore.objects.get(key="watermark", value__contains="K").asset_id}/"'
    assert 'name="ids"' not in html and orders in html  # no task key, the asset key
    html = api.get("/search/", {"dag_id": "ml_", "store": "all"}).content.decode()
    assert "Asset state has no DAG, run, task or expiry" in html and orders not in html


def test_a_dag_filter_matches_any_part_of_the_id_as_on_the_dag_list(api, operator, user_factory, stores):
    """Issue 23, item 13: one rule for a DAG filter typed by a person, the DAG list's and the search's: the ids
    containing the text, ignoring case ("orders" finds etl_orders), as asset filters match; "starts with" and
    "exact" on request."""
    assert found(api, TASK_API, {"dag_id": "ml_"}) == [("ml_eval", "score"), ("ml_train", "score")]
    assert found(api, TASK_API, {"dag_id": "ml_train"}) == [("ml_train", "score")]
    assert found(api, TASK_API, {"dag_id": "TRAIN"}) == [("ml_train", "score")]
    assert found(api, TASK_API, {"dag_id": "train", "dag_match": "prefix"}) == []
    assert found(api, TASK_API, {"dag_id": "ml_", "dag_match": "prefix"}) == [
        ("ml_eval", "score"),
        ("ml_train", "score"),
    ]
    assert found(api, TASK_API, {"dag_id": "ml_", "key": "sco"}) == [("ml_eval", "score"), ("ml_train", "score")]
    assert found(api, TASK_API, {"dag_id": "ml%"}) == [] and found(api, TASK_API, {"dag_id": "m_"}) == []
    api.force_login(operator)
    html = api.get("/search/", {"dag_id": "ml_", "store": "task"}).content.decode()
    assert html.count('name="ids"') == 2 and '<option value="contains" selected>contains (as on the DAG list)' in html
    dag_list = api.get("/dags/", {"q": "TRAIN"}).content.decode()
    assert "ml_train" in dag_list and "ml_eval" not in dag_list and ">etl<" not in dag_list
    assert 'id="q" name="q" value="TRAIN"' in dag_list and "DAG id contains" in dag_list
    dag_list = api.get("/dags/", {"prefix": "ml_"}).content.decode()  # a link made before the filter contained
    assert "ml_train" in dag_list and "ml_eval" in dag_list and ">etl<" not in dag_list
    none_found = flat(api.get("/dags/", {"q": "nope"}).content.decode())
    assert "with an id containing <code><bdi>nope</bdi></code>" in none_found


def test_an_exact_dag_filter_for_the_dag_lists_links(api, operator, dag_run_factory, task_key_factory, stores):
    """The DAG list counts one DAG's expired keys: its link asks for exactly that DAG, not its prefix."""
    for dag in ("etl", "etl_v2"):
        run = dag_run_factory(dag_id=dag, run_id=f"old__{dag}")
        task_key_factory(run, key="stale", expires_at=timezone.now() - timedelta(hours=1))
    assert found(api, TASK_API, {"dag_id": "etl", "status": "expired"}) == [("etl", "stale"), ("etl_v2", "stale")]
    assert found(api, TASK_API, {"dag_id": "etl", "dag_match": "exact", "status": "expired"}) == [("etl", "stale")]
    assert api.get(TASK_API, {"dag_match": "fuzzy"}).status_code == 422
    api.force_login(operator)
    dag_list = api.get("/dags/").content.decode()
    link = "/search/?dag_id=etl&amp;dag_match=exact&amp;status=expired&amp;store=task"
    assert f'<a href="{link}">1</a>' in dag_list
    html = api.get(link.replace("&amp;", "&")).content.decode()
    assert html.count('name="ids"') == 1 and '<option value="exact" selected>exact</option>' in html


def test_a_scoped_users_dag_prefix_stays_within_their_dags(client, user_factory, stores):
    from statestore_admin.records.models import AccessScope
    from tests.conftest import ALL_PERMS

    user = user_factory("ml-train", perms=ALL_PERMS, unscoped=False)
    AccessScope.objects.create(user=user, kind="dag", pattern="ml_t*")
    _, token = ApiToken.issue(user, "tests")
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    assert found(client, TASK_API, {"dag_id": "ml_"}) == [("ml_train", "score")]
    assert found(client, TASK_API, {"dag_id": "m", "key": "score"}) == [("ml_train", "score")]
    assert found(client, TASK_API, {"dag_id": "etl"}) == []


@pytest.mark.parametrize(
    ("value", "keys"),
    [
        ("grüße", [("etl", "greeting"), ("ml_train", "score")]),  # as itself and as JSON's \\u escapes
        ('say "hi"', [("ml_eval", "score")]),  # quotes as JSON escapes them
        ("41", [("etl", "cursor")]),
        ("KÖLN", [("ml_train", "score")]),
        ("nowhere", []),
    ],
)
def test_value_search_finds_the_text_as_stored(api, stores, value, keys):
    assert found(api, TASK_API, {"value": value}) == keys


def test_value_search_on_the_page_and_with_other_filters(api, operator, stores):
    assert found(api, TASK_API, {"value": "grüße", "key": "greet"}) == [("etl", "greeting")]
    assert found(api, TASK_API, {"value": "grüße", "dag_id": "ml_"}) == [("ml_train", "score")]
    assert found(api, ASSET_API, {"value": "köln"}) == [("orders", "watermark")]
    api.force_login(operator)
    html = api.get("/search/", {"value": 'say "hi"'}).content.decode()
    assert html.count('name="ids"') == 1 and 'name="value" value="say &quot;hi&quot;"' in html
