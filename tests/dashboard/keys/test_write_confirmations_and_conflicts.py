"""Issue 14's writes through the pages and the API (#5, #6, #14, #15), over real HTTP: confirmations that
act on exactly what they listed whatever the writers' clocks, values stored as Airflow stores them and
shown as people read them, no-op writes, duplicate keys, and the edit conflict that keeps both values."""

import json
import re
from datetime import timedelta
from html import unescape

import pytest
from django.utils import timezone

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.records.models import AuditEvent
from tests.conftest import BOTH_DATABASES
from tests.listing import listed

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
GRUSS = "Grüße مرحبا"
RLO = "\u202e"
TASK_API = "/api/v2/dags/etl/dagRuns/r1/taskInstances/t/state-store"


@pytest.fixture
def world(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="r1")
    task_instance_factory(run, task_id="t")
    for map_index in (0, 1):
        task_instance_factory(run, task_id="m", map_index=map_index)
        task_key_factory(run, task_id="m", map_index=map_index, key="k", value=map_index)
    task_key_factory(run, task_id="t", key="greeting", value=GRUSS, updated_at=timezone.now() - timedelta(hours=1))
    task_key_factory(run, task_id="t", key=f"evil{RLO}txt.exe", value=f"a{RLO}b")
    asset = asset_factory(name="orders")
    for key in ("a", "b", "c"):
        asset_key_factory(asset, key=key, value=key)
    return {"run": run, "asset": asset, "greeting": TaskStateStore.objects.get(key="greeting")}


@pytest.fixture
def web(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def api(client, operator):
    from statestore_admin.tokens.models import ApiToken

    _, token = ApiToken.issue(operator, "writes")
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def toast(response) -> dict:
    assert response.status_code == 204, response.content
    return json.loads(response["HX-Trigger"])["toast"]


def text(response) -> str:
    return response.content.decode()


# 5. Confirmations act on exactly what they listed -------------------------------------------------------
def test_asset_clear_with_skewed_clocks_keeps_and_reports_what_was_not_listed(web, world):
    asset = world["asset"]
    url = f"/assets/{asset.pk}/delete/"
    token = listed(web, url, {"all": "1"}, **HX)
    now = timezone.now()
    AssetStateStore.objects.filter(key="c").update(updated_at=now + timedelta(days=1))  # listed? no: after
    AssetStateStore.objects.create(
        asset=asset, key="older-clock", value="1", updated_at=now - timedelta(hours=1), last_updated_by_kind="task"
    )
    message = toast(web.post(url, {"all": "1", "listed": token}, **HX))["message"]
    assert message == (
        "Cleared the state of asset 'orders': deleted 2 keys; kept 2 keys that changed after the list was shown "
        "(1 added, 1 written since): 'c', 'older-clock'."
    )
    assert set(AssetStateStore.objects.values_list("key", flat=True)) == {"c", "older-clock"}
    # A key whose writer's clock runs ahead is listed like any other and goes when confirmed.
    token = listed(web, url, {"all": "1"}, **HX)
    assert toast(web.post(url, {"all": "1", "listed": token}, **HX))["message"].endswith("deleted 2 keys.")
    assert not AssetStateStore.objects.exists()


@pytest.mark.parametrize(
    "params",
    [{"map_index": "all", "task_id": "m"}, {"map_index": "0", "task_id": "m"}],
    ids=["clear all map indexes", "clear a task instance"],
)
def test_task_clears_keep_a_key_added_with_an_older_time(web, world, params, task_key_factory):
    params = {"run": world["run"].pk, **params}
    token = listed(web, "/keys/task/delete/", params, **HX)
    task_key_factory(world["run"], task_id="m", map_index=0, key="late", updated_at=timezone.now() - timedelta(days=1))
    message = toast(web.post("/keys/task/delete/", {**params, "listed": token}, **HX))["message"]
    assert "kept 1 key that changed after the list was shown (1 added since): 'late'" in message
    assert TaskStateStore.objects.filter(task_id="m", key="late").exists()
    assert not TaskStateStore.objects.filter(task_id="m", key="k", map_index=0).exists()


def test_a_forged_or_missing_listing_changes_nothing(web, world):
    for token in ("", "forged", listed(web, "/keys/task/delete/", {"ids": world["greeting"].pk}, **HX) + "x"):
        response = web.post("/keys/task/delete/", {"ids": world["greeting"].pk, "listed": token}, **HX)
        assert response.status_code == 422 and "open it again" in text(response)
    assert TaskStateStore.objects.filter(pk=world["greeting"].pk).exists()


def test_the_download_covers_every_listed_key_even_one_written_in_the_future(web, world):
    AssetStateStore.objects.filter(key="c").update(updated_at=timezone.now() + timedelta(days=1))
    dialog = text(web.get(f"/assets/{world['asset'].pk}/delete/", {"all": "1"}, **HX))
    link = unescape(re.search(r'href="([^"]+)" download data-testid="download-keys"', dialog).group(1))
    document = json.loads(b"".join(web.get(link).streaming_content))
    assert sorted(k["key"] for k in document["keys"]) == ["a", "b", "c"]


# 6. Values as Airflow stores them, as people read them ----------------------------------------------------
def test_a_value_added_through_the_form_is_stored_as_airflow_stores_it(web, world):
    response = web.post(
        f"/runs/{world['run'].pk}/tasks/t/add/",
        {"key": "gruss", "value": json.dumps(GRUSS, ensure_ascii=False), "map_index": "-1", "expiry": "never"},
        **HX,
    )
    assert response.status_code == 204, response.content
    stored = TaskStateStore.objects.get(key="gruss").value
    assert stored == json.dumps(GRUSS)  # Airflow's API and task SDK: json.dumps, ASCII escapes
    assert stored == world["greeting"].value


def test_non_ascii_is_shown_decoded_everywhere(web, world):
    run, greeting, asset = world["run"], world["greeting"], world["asset"]
    AssetStateStore.objects.filter(key="a").update(value=json.dumps({"grüße": GRUSS}))
    pages = {
        "task instance": web.get(f"/runs/{run.pk}/tasks/t/"),
        "run": web.get(f"/runs/{run.pk}/"),
        "search": web.get("/search/", {"key": "greeting"}),
        "confirmation": web.get("/keys/task/delete/", {"ids": greeting.pk}, **HX),
        "key page": web.get(f"/keys/task/{greeting.pk}/"),
        "asset": web.get(f"/assets/{asset.pk}/"),
        "asset confirmation": web.get(f"/assets/{asset.pk}/delete/", {"all": "1"}, **HX),
        "asset key page": web.get(f"/assets/{asset.pk}/key/", {"key": "a"}),
        "editor": web.get(f"/keys/task/{greeting.pk}/edit/", **HX),
    }
    for name, response in pages.items():
        assert response.status_code == 200, name
        page = re.sub(r'<textarea id="raw-value".*?</textarea>', "", text(response), flags=re.S)  # the copy's text
        assert "\\u00fc" not in page and "Gr\\u" not in page, name
        assert "Grüße" in page, name


def test_bidi_and_control_characters_are_isolated_and_shown(web, world):
    run = world["run"]
    evil = TaskStateStore.objects.get(key__startswith="evil")
    for response in (
        web.get(f"/runs/{run.pk}/tasks/t/"),
        web.get("/search/", {"key": "evil"}),
        web.get("/keys/task/delete/", {"ids": evil.pk}, **HX),
        web.get(f"/keys/task/{evil.pk}/"),
    ):
        page = text(response).replace("<wbr>", "")  # a key in a table may wrap after its separators
        shown = re.sub(r"<[^>]*>", "", page)  # the text, without tags and their attributes
        assert RLO not in shown  # never obeyed: shown as a badge
        badge = '<span class="hidden-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">\\u202e</span>'
        assert f"<bdi>evil{badge}txt.exe</bdi>" in page
    key_page = text(web.get(f"/keys/task/{evil.pk}/"))
    assert '&quot;a<span class="hidden-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">\\u202e</span>b&quot;' in key_page


# 14. No-op writes and duplicate keys ------------------------------------------------------------------------
def test_saving_an_unchanged_value_writes_nothing_on_any_face(web, world, api):
    greeting = world["greeting"]
    form = text(web.get(f"/keys/task/{greeting.pk}/edit/", **HX))
    shown = unescape(re.search(r"<textarea[^>]*>\n?(.*?)</textarea>", form, re.S).group(1))
    seen = re.search(r'name="seen_updated_at" value="([^"]+)"', form).group(1)
    reply = toast(web.post(f"/keys/task/{greeting.pk}/edit/", {"value": shown, "seen_updated_at": seen}, **HX))
    assert reply == {"level": "info", "message": "The value of 'greeting' is unchanged: nothing was written."}
    patch = web.patch(f"{TASK_API}/greeting", json.dumps({"value": GRUSS}), content_type="application/json", **api)
    assert patch.status_code == 200
    assert TaskStateStore.objects.get(pk=greeting.pk).updated_at == greeting.updated_at
    assert not AuditEvent.objects.exists()


def test_django_admin_records_no_change_for_the_same_value_spelled_otherwise(client, world, user_factory):
    from django.contrib.admin.models import LogEntry

    client.force_login(user_factory("root", is_staff=True, is_superuser=True))
    greeting = world["greeting"]
    url = f"/admin/airflow/taskstatestore/{greeting.pk}/change/"
    page = text(client.get(url))
    seen = unescape(re.search(r'name="seen_updated_at" value="([^"]*)"', page).group(1))
    data = {"expiry": "keep", "expires_at_text": "", "seen_updated_at": seen, "_save": "Save"}
    response = client.post(url, {**data, "new_value": json.dumps(GRUSS)})  # escaped: not the text shown
    assert response.status_code == 302
    assert TaskStateStore.objects.get(pk=greeting.pk).updated_at == greeting.updated_at
    assert not AuditEvent.objects.exists() and "value" not in LogEntry.objects.get().get_change_message()


def test_an_object_naming_a_key_twice_is_refused_on_every_face(web, world, api):
    greeting = world["greeting"]
    page = web.post(f"/keys/task/{greeting.pk}/edit/", {"value": '{"a": 1, "a": 2}'}, **HX)
    assert page.status_code == 422 and "names the key &quot;a&quot; twice" in text(page)
    add = web.post(f"/assets/{world['asset'].pk}/add/", {"key": "n", "value": '{"a": 1, "a": 2}'}, **HX)
    assert add.status_code == 422 and "twice" in text(add)
    body = '{"value": {"a": 1, "a": 2}}'
    put = web.put(f"{TASK_API}/dup", body, content_type="application/json", **api)
    assert put.status_code == 422 and 'names the key \\"a\\" twice' in text(put)
    assert TaskStateStore.objects.get(pk=greeting.pk).value == greeting.value
    assert (
        not TaskStateStore.objects.filter(key="dup").exists() and not AssetStateStore.objects.filter(key="n").exists()
    )


# 15. The edit conflict keeps both values -----------------------------------------------------------------
def test_a_conflict_shows_both_values_and_lets_the_user_keep_either(web, world):
    greeting = world["greeting"]
    url = f"/keys/task/{greeting.pk}/edit/"
    seen = greeting.updated_at.isoformat()
    written = timezone.now()
    TaskStateStore.objects.filter(pk=greeting.pk).update(value='"by a task"', updated_at=written)
    conflict = web.post(url, {"value": '"mine"', "seen_updated_at": seen}, **HX)
    page = text(conflict)
    assert conflict.status_code == 422 and 'data-testid="conflict"' in page
    assert "&quot;by a task&quot;" in re.search(r'data-testid="conflict-current">(.*?)</pre>', page, re.S).group(1)
    assert "&quot;mine&quot;</textarea>" in page  # the user's edit is kept in the editor
    new_seen = re.search(r'name="seen_updated_at" value="([^"]+)"', page).group(1)
    assert TaskStateStore.objects.get(pk=greeting.pk).value == '"by a task"'
    kept = toast(web.post(url, {"value": '"mine"', "seen_updated_at": new_seen, "keep": "current"}, **HX))
    assert kept["message"] == "Kept the current value of 'greeting'; nothing was written."
    assert TaskStateStore.objects.get(pk=greeting.pk).value == '"by a task"'
    saved = toast(web.post(url, {"value": '"mine"', "seen_updated_at": new_seen}, **HX))
    assert saved["message"] == "Saved the value of 'greeting'."
    assert TaskStateStore.objects.get(pk=greeting.pk).value == '"mine"'


def test_an_asset_key_deleted_while_its_editor_is_open_closes_the_dialog(web, world):
    asset = world["asset"]
    AssetStateStore.objects.filter(key="a").delete()
    response = web.post(f"/assets/{asset.pk}/key/edit/?key=a", {"key": "a", "value": "1"}, **HX)
    assert response.status_code == 404 and "deleted after you opened it" in text(response)
    assert json.loads(response["HX-Trigger"])["closeModal"] is True
    assert not AssetStateStore.objects.filter(key="a").exists()
