"""Issue 12: every value and value preview needs ``view`` on its store, in every face; without ``view`` on a
store, its counts are hidden too. Each test puts distinctive values in, asks as a user who lacks ``view``,
and checks that the value never appears; positive controls (Viewer, Operator, Admin roles) see it, so
that these tests can fail."""

import json

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.identity.roles import ADMIN, OPERATOR, VIEWER
from statestore_admin.records.models import GcRun
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
TASK_SECRET = "SECRET-TASK-VALUE-123"
ASSET_SECRET = "SECRET-ASSET-VALUE-456"
SECRETS = (TASK_SECRET, ASSET_SECRET)
TASK_KEY, ASSET_KEY = "task-only-key", "asset-only-key"


@pytest.fixture
def world(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl")
    task_instance_factory(run, task_id="t")
    key = task_key_factory(run, task_id="t", key=TASK_KEY, value=TASK_SECRET)
    task_key_factory(run, task_id="t", key="other", value=f"{TASK_SECRET}-2")
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key=ASSET_KEY, value=ASSET_SECRET)
    asset_key_factory(asset, key="second", value=f"{ASSET_SECRET}-2")
    now = timezone.now()
    GcRun.objects.create(
        started_at=now, finished_at=now, cutoff=now, batch_size=0, rows_deleted=987654, host="gc-host", pid=1
    )
    return {"run": run, "key": key, "asset": asset}


@pytest.fixture
def as_user(client, user_factory):
    """A client signed in as a new user with ``perms`` and/or the role ``group``."""

    def sign_in(name, perms=(), group=None):
        user = user_factory(name, perms=perms)
        if group:
            user.groups.add(Group.objects.get(name=group))
        client.force_login(user)
        return user

    return sign_in


def text(response) -> str:
    return response.content.decode()


def assert_no_secret(response, *secrets):
    body = text(response)
    for secret in secrets or SECRETS:
        assert secret not in body, (response.status_code, body[:2000])


def bearer_get(client, user, url):
    _, token = ApiToken.issue(user, "tests")
    return client.get(url, HTTP_AUTHORIZATION=f"Bearer {token}")


# Value editors: view + change --------------------------------------------------------------------------
@pytest.mark.parametrize("htmx", [True, False])
def test_task_edit_dialog_needs_view_as_well_as_change(as_user, client, world, htmx):
    as_user("changer", perms=["task.change", "task.add", "task.delete"])
    url = f"/keys/task/{world['key'].pk}/edit/"
    extra = HX if htmx else {}
    response = client.get(url, **extra)
    assert response.status_code == 403
    assert_no_secret(response)
    if htmx:
        assert "view task state as well as to change it" in text(response)
    response = client.post(url, {"value": '"overwritten"'}, **extra)
    assert response.status_code == 403
    assert_no_secret(response)
    assert json.loads(TaskStateStore.objects.get(pk=world["key"].pk).value) == TASK_SECRET


def test_asset_edit_dialog_needs_view_as_well_as_change(as_user, client, world):
    as_user("changer", perms=["asset.change", "asset.add", "asset.delete"])
    url = f"/assets/{world['asset'].pk}/key/edit/"
    response = client.get(url, {"key": ASSET_KEY}, **HX)
    assert response.status_code == 403 and "view asset state as well as to change it" in text(response)
    assert_no_secret(response)
    response = client.post(url, {"key": ASSET_KEY, "value": '"overwritten"'}, **HX)
    assert response.status_code == 403
    assert_no_secret(response)
    assert json.loads(AssetStateStore.objects.get(key=ASSET_KEY).value) == ASSET_SECRET


def test_operator_edits_values_it_sees(as_user, client, world):
    """Positive control: the Operator role sees the values in both editors, and the toast names only the key."""
    as_user("op", group=OPERATOR)
    task_url = f"/keys/task/{world['key'].pk}/edit/"
    response = client.get(task_url, **HX)
    assert response.status_code == 200 and TASK_SECRET in text(response)
    response = client.get(f"/assets/{world['asset'].pk}/key/edit/", {"key": ASSET_KEY}, **HX)
    assert response.status_code == 200 and ASSET_SECRET in text(response)
    response = client.post(task_url, {"value": json.dumps(f"NEW-{TASK_SECRET}")}, **HX)
    assert response.status_code == 204
    assert TASK_SECRET not in response["HX-Trigger"] and TASK_KEY in response["HX-Trigger"]


# Expiry dialog: change only, never the value -------------------------------------------------------------
def test_expiry_dialog_and_toast_show_no_value_to_a_user_without_view(as_user, client, world):
    as_user("changer", perms=["task.change"])
    url = f"/keys/task/{world['key'].pk}/expiry/"
    response = client.get(url, **HX)
    assert response.status_code == 200 and TASK_KEY in text(response)
    assert_no_secret(response)
    response = client.post(url, {"expiry": "never"}, **HX)
    assert response.status_code == 204
    assert TASK_SECRET not in response["HX-Trigger"]
    response = client.post(url, {"expiry": "at", "expires_at": "not a date"}, **HX)
    assert response.status_code == 422
    assert_no_secret(response)


# Confirmations: names without previews --------------------------------------------------------------------
@pytest.mark.parametrize(("action", "perm"), [("expire", "task.change"), ("delete", "task.delete")])
@pytest.mark.parametrize("by", ["ids", "instance"])
def test_task_confirmations_list_keys_without_previews(as_user, client, world, action, perm, by):
    as_user("actor", perms=[perm])
    params = (
        {"ids": [world["key"].pk, TaskStateStore.objects.get(key="other").pk]}
        if by == "ids"
        else {"run": world["run"].pk, "task_id": "t", "map_index": "-1"}
    )
    for extra in (HX, {}):
        response = client.get(f"/keys/task/{action}/", params, **extra)
        assert response.status_code == 200
        assert TASK_KEY in text(response) and 'data-testid="confirm-count">2<' in text(response)
        assert_no_secret(response)
        assert "download-keys" not in text(response)


def test_task_confirmation_toast_shows_no_value(as_user, client, world):
    as_user("actor", perms=["task.delete"])
    confirm = client.get("/keys/task/delete/", {"ids": world["key"].pk}, **HX)
    listed = text(confirm).split('name="listed" value="')[1].split('"')[0]
    response = client.post("/keys/task/delete/", {"ids": world["key"].pk, "listed": listed}, **HX)
    assert response.status_code == 204 and "Deleted 1 key" in response["HX-Trigger"]
    assert TASK_SECRET not in response["HX-Trigger"]


def test_task_confirmations_show_previews_to_viewers(as_user, client, world):
    """Positive control: an Admin (view and delete) sees the previews and the download link."""
    as_user("admin", group=ADMIN)
    params = {"run": world["run"].pk, "task_id": "t", "map_index": "-1"}
    response = client.get("/keys/task/delete/", params, **HX)
    assert response.status_code == 200 and TASK_SECRET in text(response) and "download-keys" in text(response)
    as_user("op", group=OPERATOR)
    response = client.get("/keys/task/expire/", params, **HX)
    assert response.status_code == 200 and TASK_SECRET in text(response)


@pytest.mark.parametrize("selection", [{"all": "1"}, {"keys": [ASSET_KEY, "second"]}])
def test_asset_confirmation_lists_keys_without_previews(as_user, client, world, selection):
    as_user("deleter", perms=["asset.delete"])
    for extra in (HX, {}):
        response = client.get(f"/assets/{world['asset'].pk}/delete/", selection, **extra)
        assert response.status_code == 200 and ASSET_KEY in text(response)
        assert 'data-testid="confirm-count">2<' in text(response)
        assert_no_secret(response)
        assert "download-keys" not in text(response) and "<th>Value</th>" not in text(response)


def test_asset_confirmation_shows_previews_to_viewers(as_user, client, world):
    as_user("admin", group=ADMIN)
    response = client.get(f"/assets/{world['asset'].pk}/delete/", {"all": "1"}, **HX)
    assert response.status_code == 200 and ASSET_SECRET in text(response) and "download-keys" in text(response)


# Overview and largest values --------------------------------------------------------------------------
def cards(response) -> set[str]:
    body = text(response)
    return {name for name in ("task-keys", "asset-keys", "expired-keys", "expiring-keys", "never-keys") if name in body}


def test_overview_shows_only_the_viewable_stores_counts(as_user, client, world):
    as_user("tasks", perms=["task.view"])
    response = client.get("/")
    assert response.status_code == 200
    assert cards(response) == {"task-keys", "expired-keys", "expiring-keys", "never-keys"}
    assert "987,654" in text(response)  # GC runs: task state
    as_user("assets", perms=["asset.view"])
    response = client.get("/")
    assert response.status_code == 200 and cards(response) == {"asset-keys"}
    assert '<div class="figure" data-testid="asset-keys">2</div>' in text(response)
    assert "987,654" not in text(response) and "Garbage collection" not in text(response)
    assert "Largest values" in text(response)
    as_user("changer", perms=["task.change", "asset.change", "task.delete", "asset.delete"])
    response = client.get("/")
    assert response.status_code == 200 and cards(response) == set() and "987,654" not in text(response)
    assert "may not view task state or asset state" in text(response)


def test_overview_of_a_viewer_shows_both_stores(as_user, client, world):
    as_user("viewer", group=VIEWER)
    response = client.get("/")
    assert cards(response) == {"task-keys", "asset-keys", "expired-keys", "expiring-keys", "never-keys"}


@pytest.mark.parametrize(
    ("perms", "shown", "hidden"),
    [(["task.view"], TASK_KEY, ASSET_KEY), (["asset.view"], ASSET_KEY, TASK_KEY)],
)
def test_largest_values_of_the_viewable_store_only(as_user, client, world, perms, shown, hidden):
    as_user("one", perms=perms)
    response = client.get("/overview/largest/", **HX)
    assert response.status_code == 200 and shown in text(response) and hidden not in text(response)
    assert_no_secret(response)


def test_largest_values_needs_a_viewable_store(as_user, client, world):
    as_user("changer", perms=["task.change", "asset.change"])
    response = client.get("/overview/largest/", **HX)
    assert response.status_code == 403
    assert TASK_KEY not in text(response) and ASSET_KEY not in text(response)
    as_user("viewer", group=VIEWER)
    response = client.get("/overview/largest/", **HX)
    assert response.status_code == 200 and TASK_KEY in text(response) and ASSET_KEY in text(response)


# Stats API --------------------------------------------------------------------------------------------
STATS = "/api/statestore/v1/stats"
TASK_FIELDS = ("task_keys", "task_keys_estimated", "expired", "expiring_24h", "never_expire", "gc_runs")
ASSET_FIELDS = ("asset_keys", "asset_keys_estimated")


def test_stats_of_a_task_only_viewer_hide_asset_counts(client, user_factory, world):
    stats = bearer_get(client, user_factory("tasks", perms=["task.view"]), STATS)
    assert stats.status_code == 200
    body = stats.json()
    assert all(body[name] is None for name in ASSET_FIELDS)
    assert body["task_keys"] == 2 and body["gc_runs"][0]["rows_deleted"] == 987654


def test_stats_of_an_asset_only_viewer_hide_task_counts(client, user_factory, world):
    stats = bearer_get(client, user_factory("assets", perms=["asset.view"]), STATS)
    assert stats.status_code == 200
    body = stats.json()
    assert all(body[name] is None for name in TASK_FIELDS)
    assert body["asset_keys"] == 2 and body["config"]


def test_stats_need_a_viewable_store(client, user_factory, world):
    stats = bearer_get(client, user_factory("changer", perms=["task.change", "asset.change"]), STATS)
    assert stats.status_code == 403 and "task_keys" not in text(stats)


def test_stats_of_an_operator_show_both_stores(client, user_factory, world):
    operator = user_factory("op")
    operator.groups.add(Group.objects.get(name=OPERATOR))
    body = bearer_get(client, operator, STATS).json()
    assert (body["task_keys"], body["asset_keys"], body["never_expire"]) == (2, 2, 2)


# Search (page and API): gated per store ---------------------------------------------------------------
def test_search_page_shows_only_viewable_values(as_user, client, world):
    as_user("tasks", perms=["task.view"])
    response = client.get("/search/", {"key": "only-key"})
    assert response.status_code == 200 and TASK_SECRET in text(response)
    assert ASSET_SECRET not in text(response) and ASSET_KEY not in text(response)
    as_user("changer", perms=["task.change", "asset.change", "task.delete", "asset.delete"])
    response = client.get("/search/", {"key": "only-key"})
    assert response.status_code == 200
    assert_no_secret(response)
    assert TASK_KEY not in text(response) and ASSET_KEY not in text(response)


def test_search_api_per_store(client, user_factory, world):
    tasks = user_factory("tasks", perms=["task.view"])
    assert bearer_get(client, tasks, "/api/statestore/v1/search/asset-keys?key=only").status_code == 403
    response = bearer_get(client, tasks, "/api/statestore/v1/search/task-keys?key=only")
    assert response.status_code == 200 and TASK_SECRET in text(response) and ASSET_SECRET not in text(response)
    changer = user_factory("changer", perms=["task.change", "asset.change"])
    for store in ("task", "asset"):
        response = bearer_get(client, changer, f"/api/statestore/v1/search/{store}-keys?key=only")
        assert response.status_code == 403
        assert_no_secret(response)
