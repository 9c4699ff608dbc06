"""Downloads of every list (a run's keys, a task instance's, an asset's, search results, the audit trail) as
JSON and CSV: streamed in keyset chunks, the JSON a document the restore accepts, CSV safe in spreadsheets,
and each with the permissions and scope of its list."""

import csv
import io
import json
from datetime import timedelta

import pytest
from django.db import connections
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.exports import documents as exports
from statestore_admin.exports import restore as restores
from statestore_admin.records.models import AccessScope, AuditEvent
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
SNOWMAN = "Grüße ☃"


@pytest.fixture
def run(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl_orders", run_id="manual__2026-01-01T00:00:00+00:00")
    for task_id, map_index in (("load", -1), ("train", 0), ("train", 1)):
        task_instance_factory(run, task_id=task_id, map_index=map_index)
    later = timezone.now() + timedelta(days=3)
    task_key_factory(run, task_id="load", key="offset", value=41, expires_at=later)
    task_key_factory(run, task_id="load", key='=HYPERLINK("http://evil")', value=-5)
    task_key_factory(run, task_id="train", map_index=1, key="fold", value={"note": SNOWMAN})
    task_key_factory(run, task_id="train", map_index=0, key="fold", value=[1, 2])
    task_key_factory(run, task_id="train", map_index=0, key="@sum", value="+cmd")
    return run


@pytest.fixture
def other_run(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="ml_fit", run_id="scheduled__1")
    task_instance_factory(run, task_id="fit")
    task_key_factory(run, task_id="fit", key="offset", value=7)
    return run


def client_for(user):
    client = Client()
    client.force_login(user)
    return client


def download(client, url, **params):
    response = client.get(url, params)
    assert response.status_code == 200, response.content
    assert response.streaming
    return response, b"".join(response.streaming_content).decode()


def json_keys(body: str) -> list[dict]:
    document = json.loads(body)
    assert document["format"] == "statestore-admin/keys" and document["version"] == 1
    return document["keys"]


def csv_rows(body: str) -> list[dict]:
    assert body.startswith("\ufeff")
    return list(csv.DictReader(io.StringIO(body[1:])))


# A run's keys ------------------------------------------------------------------------------------------------
def test_run_keys_download_as_a_document_the_restore_accepts(run, operator):
    url = reverse("run-keys-export", args=[run.pk])
    response, body = download(client_for(operator), url)
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"].startswith(f'attachment; filename="statestore-run-{run.pk}-keys-')
    keys = json_keys(body)
    # the run page's order: by task, map index and key
    assert [(k["task_id"], k["map_index"], k["key"]) for k in keys] == [
        ("load", -1, '=HYPERLINK("http://evil")'),
        ("load", -1, "offset"),
        ("train", 0, "@sum"),
        ("train", 0, "fold"),
        ("train", 1, "fold"),
    ]
    assert keys[4]["value"] == {"note": SNOWMAN} and keys[1]["expires_at"] is not None
    assert len(exports.parse_document(json.loads(body))) == 5

    # deleted, then restored from the download: the same rows again
    before = {(r.task_id, r.map_index, r.key): (r.value, r.expires_at) for r in TaskStateStore.objects.all()}
    TaskStateStore.objects.filter(dag_run=run).delete()
    restores.restore_document(actor=Actor.command(), document=json.loads(body), overwrite=False)
    after = {(r.task_id, r.map_index, r.key): (r.value, r.expires_at) for r in TaskStateStore.objects.all()}
    assert after == before


def test_csv_is_utf8_with_a_header_and_no_cell_a_spreadsheet_runs(run, operator):
    response, body = download(client_for(operator), reverse("run-keys-export", args=[run.pk]), format="csv")
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].endswith('.csv"')
    rows = csv_rows(body)
    assert list(rows[0]) == list(exports.KEY_COLUMNS)
    by_key = {(row["task_id"], row["map_index"], row["key"]): row for row in rows}
    assert len(by_key) == 5
    assert by_key[("load", "-1", '\'=HYPERLINK("http://evil")')]["value"] == "'-5"  # key and value both quoted
    assert by_key[("train", "0", "'@sum")]["value"] == '"+cmd"'  # JSON text of a string starts with a quote
    assert json.loads(by_key[("train", "1", "fold")]["value"]) == {"note": SNOWMAN}  # the stored JSON text
    assert by_key[("train", "1", "fold")]["store"] == "task"
    for row in rows:  # every text cell; map_index is a number (-1), which a spreadsheet reads as one
        for name, cell in row.items():
            assert name == "map_index" or not cell.startswith(("=", "+", "-", "@", "\t", "\r")), row


def test_safe_cell_prefixes_only_text_that_a_spreadsheet_takes_for_a_formula():
    cases = {"=1+1": "'=1+1", "+1": "'+1", "-1": "'-1", "@A1": "'@A1", "\tx": "'\tx", "\rx": "'\rx", "a=b": "a=b"}
    for given, expected in cases.items():
        assert exports.safe_cell(given) == expected
    assert exports.safe_cell(-1) == -1 and exports.safe_cell("") == ""


# What a spreadsheet skips before it reads a formula: white space and control characters.
LEADING = ("\n", "\r", "\t", " ", "\r\n", " \t", "\x0b", "\x1f", "\n\n ")
FORMULA_MARKS = ("=", "+", "-", "@", "|", "%")


def test_csv_neutralises_formulas_behind_leading_white_space_and_control_characters(
    dag_run_factory, task_instance_factory, task_key_factory, operator
):
    run = dag_run_factory(dag_id="etl_sheets", run_id="manual__1")
    task_instance_factory(run, task_id="load")
    keys = [f"{lead}{mark}cmd|' /C calc'!A0" for lead in LEADING for mark in FORMULA_MARKS]
    keys += [f"{mark}plain" for mark in FORMULA_MARKS]
    for key in keys:
        task_key_factory(run, task_id="load", key=key, value=1)
    task_key_factory(run, task_id="load", key=" plain text", value=1)
    _, body = download(client_for(operator), reverse("run-keys-export", args=[run.pk]), format="csv")
    cells = {row["key"] for row in csv_rows(body)}
    assert cells == {"'" + key for key in keys} | {" plain text"}  # text that starts as text is left alone
    AuditEvent.objects.create(actor="\n=bob", via="ui", action="delete", store="task", dag_id="a", key_count=1)
    _, body = download(client_for(operator), reverse("audit-export"), format="csv")
    assert [r["actor"] for r in csv_rows(body)] == ["'\n=bob"]


def test_a_download_reads_in_keyset_chunks_each_row_once(run, operator, monkeypatch):
    monkeypatch.setattr(exports, "STREAM_CHUNK", 2)
    client = client_for(operator)
    with CaptureQueriesContext(connections["airflow"]) as queries:
        _, body = download(client, reverse("run-keys-export", args=[run.pk]))
    keys = json_keys(body)
    assert len(keys) == 5 and len({(k["task_id"], k["map_index"], k["key"]) for k in keys}) == 5
    reads = [q["sql"] for q in queries.captured_queries if 'FROM "task_state_store"' in q["sql"]]
    assert len(reads) == 3  # 2 + 2 + 1 rows, each a LIMIT query after the last row read
    assert all("LIMIT 2" in sql for sql in reads)
    _, csv_body = download(client, reverse("run-keys-export", args=[run.pk]), format="csv")
    assert len(csv_rows(csv_body)) == 5


def test_keyset_chunks_in_every_order(run, other_run):
    everything = TaskStateStore.objects.all()
    for ordering in (exports.IN_RUN, exports.BY_ID, exports.NEWEST_FIRST):
        rows = TaskStateStore.objects.filter(dag_run=run) if ordering == exports.IN_RUN else everything
        expected = [r.pk for r in rows.order_by(*ordering)]
        for size in (1, 2, 3, 100):
            got = [r.pk for chunk in exports.keyset_chunks(rows, ordering, size) for r in chunk]
            assert got == expected, (ordering, size)


def test_an_empty_list_downloads_an_empty_document(dag_run_factory, operator):
    run = dag_run_factory(dag_id="empty")
    _, body = download(client_for(operator), reverse("run-keys-export", args=[run.pk]))
    assert json_keys(body) == []
    _, body = download(client_for(operator), reverse("run-keys-export", args=[run.pk]), format="csv")
    assert csv_rows(body) == []


# A task instance, an asset ---------------------------------------------------------------------------------
def test_task_instance_keys_by_map_index_or_all(run, operator):
    client = client_for(operator)
    url = reverse("task-instance-keys-export", args=[run.pk, "train"])
    _, body = download(client, url, map_index="1")
    assert [(k["map_index"], k["key"]) for k in json_keys(body)] == [(1, "fold")]
    _, body = download(client, url, map_index="all")
    assert [(k["map_index"], k["key"]) for k in json_keys(body)] == [(0, "@sum"), (0, "fold"), (1, "fold")]
    _, body = download(client, reverse("task-instance-keys-export", args=[run.pk, "load"]))
    assert {k["key"] for k in json_keys(body)} == {"offset", '=HYPERLINK("http://evil")'}  # no map index: -1
    for bad in ("x", "-2", str(2**31), "1.5"):
        response = client.get(url, {"map_index": bad})
        assert response.status_code == 400 and b"map_index" in response.content, bad


def test_asset_keys_download(asset_factory, asset_key_factory, operator):
    asset = asset_factory(name="warehouse", uri="s3://b/warehouse")
    other = asset_factory(name="other")
    asset_key_factory(asset, key="b", value={"n": 2})
    asset_key_factory(asset, key="a", value="=1+1")
    asset_key_factory(other, key="a", value=1)
    client = client_for(operator)
    _, body = download(client, reverse("asset-keys-list-export", args=[asset.pk]))
    keys = json_keys(body)
    assert [(k["asset_id"], k["key"], k["value"]) for k in keys] == [(asset.pk, "a", "=1+1"), (asset.pk, "b", {"n": 2})]
    assert keys[0]["asset_name"] == "warehouse" and keys[0]["asset_uri"] == "s3://b/warehouse"
    assert len(exports.parse_document(json.loads(body))) == 2
    _, body = download(client, reverse("asset-keys-list-export", args=[asset.pk]), format="csv")
    rows = csv_rows(body)
    assert [(r["store"], r["asset_id"], r["asset_name"], r["key"], r["value"]) for r in rows] == [
        ("asset", str(asset.pk), "warehouse", "a", '"=1+1"'),
        ("asset", str(asset.pk), "warehouse", "b", '{"n": 2}'),
    ]


# Search results --------------------------------------------------------------------------------------------
def test_search_download_holds_every_match_with_the_search_filters(
    run, other_run, asset_factory, asset_key_factory, operator
):
    asset = asset_factory(name="warehouse")
    asset_key_factory(asset, key="offset", value=1)
    client = client_for(operator)
    _, body = download(client, reverse("search-export"), key="offset")
    keys = json_keys(body)
    assert [(k["store"], k.get("dag_id"), k["key"]) for k in keys] == [
        ("task", "ml_fit", "offset"),  # task keys newest first, as the results show them
        ("task", "etl_orders", "offset"),
        ("asset", None, "offset"),
    ]
    _, body = download(client, reverse("search-export"), key="offset", store="task", dag_id="etl_orders")
    assert [(k["dag_id"], k["key"]) for k in json_keys(body)] == [("etl_orders", "offset")]
    _, body = download(client, reverse("search-export"), key="offset", store="asset", format="csv")
    assert [(r["store"], r["asset_name"]) for r in csv_rows(body)] == [("asset", "warehouse")]
    response = client.get(reverse("search-export"), {"status": "nonsense"})
    assert response.status_code == 400


def test_search_download_keeps_to_the_stores_and_scope_the_user_sees(
    run, other_run, asset_factory, asset_key_factory, user_factory
):
    asset_key_factory(asset_factory(name="warehouse"), key="offset", value=1)
    task_only = user_factory("task_only", perms=["task.view"], unscoped=False)
    AccessScope.objects.create(user=task_only, kind="dag", pattern="etl_*")
    _, body = download(client_for(task_only), reverse("search-export"), key="offset")
    assert [(k["store"], k["dag_id"]) for k in json_keys(body)] == [("task", "etl_orders")]
    asset_only = user_factory("asset_only", perms=["asset.view"])
    _, body = download(client_for(asset_only), reverse("search-export"), key="offset", store="all")
    assert [k["store"] for k in json_keys(body)] == ["asset"]


# The audit trail -------------------------------------------------------------------------------------------
def test_audit_download_lists_the_events_with_the_page_filters(run, other_run, operator):
    AuditEvent.objects.create(actor="alice", via="api", action="set", store="task", dag_id="etl_orders", key_count=1)
    AuditEvent.objects.create(actor="=bob", via="ui", action="delete", store="task", dag_id="ml_fit", key_count=2)
    AuditEvent.objects.create(actor="carol", via="api", action="set", store="asset", asset_id=1, key_count=1)
    client = client_for(operator)
    _, body = download(client, reverse("audit-export"))
    document = json.loads(body)
    assert document["format"] == "statestore-admin/audit"
    actors = [e["actor"] for e in document["events"]]
    assert actors[:3] == ["carol", "=bob", "alice"]  # newest first
    _, body = download(client, reverse("audit-export"), actor="alice", format="csv")
    rows = csv_rows(body)
    assert [(r["actor"], r["action"], r["dag_id"], r["key_count"]) for r in rows] == [
        ("alice", "set", "etl_orders", "1")
    ]
    assert list(rows[0]) == list(exports.EVENT_COLUMNS)
    _, body = download(client, reverse("audit-export"), actor="=bob", format="csv")
    assert [r["actor"] for r in csv_rows(body)] == ["'=bob"]
    assert client.get(reverse("audit-export"), {"since": "yesterday"}).status_code == 400


def test_audit_download_keeps_to_the_scope_and_stores(run, user_factory):
    AuditEvent.objects.create(actor="a", via="api", action="set", store="task", dag_id="etl_orders", key_count=1)
    AuditEvent.objects.create(actor="b", via="api", action="set", store="task", dag_id="ml_fit", key_count=1)
    AuditEvent.objects.create(actor="c", via="api", action="set", store="asset", asset_id=1, key_count=1)
    scoped = user_factory("scoped", perms=["task.view"], unscoped=False)
    AccessScope.objects.create(user=scoped, kind="dag", pattern="etl_*")
    _, body = download(client_for(scoped), reverse("audit-export"))
    assert [e["actor"] for e in json.loads(body)["events"]] == ["a"]


# Who may download what ---------------------------------------------------------------------------------
def test_each_download_needs_its_list_permission_and_scope(run, other_run, asset_factory, user_factory, nobody):
    asset = asset_factory(name="warehouse")
    urls = {
        "run": reverse("run-keys-export", args=[run.pk]),
        "task": reverse("task-instance-keys-export", args=[run.pk, "load"]),
        "asset": reverse("asset-keys-list-export", args=[asset.pk]),
        "search": reverse("search-export") + "?key=offset",
        "audit": reverse("audit-export"),
    }
    for url in urls.values():
        assert Client().get(url).status_code == 302  # signed out: the sign-in page
        assert client_for(nobody).get(url).status_code == 403
    asset_only = client_for(user_factory("asset_only", perms=["asset.view"]))
    assert asset_only.get(urls["run"]).status_code == 403 and asset_only.get(urls["task"]).status_code == 403
    task_only = client_for(user_factory("task_only", perms=["task.view"]))
    assert task_only.get(urls["asset"]).status_code == 403
    scoped = user_factory("scoped", perms=["task.view", "asset.view"], unscoped=False)
    AccessScope.objects.create(user=scoped, kind="dag", pattern="ml_*")
    scoped_client = client_for(scoped)
    assert scoped_client.get(urls["run"]).status_code == 404  # a run out of scope does not exist for them
    assert scoped_client.get(urls["task"]).status_code == 404
    assert scoped_client.get(urls["asset"]).status_code == 404  # DAG patterns only: no asset
    assert scoped_client.get(reverse("run-keys-export", args=[other_run.pk])).status_code == 200


def test_an_unknown_format_is_a_bad_request(run, operator):
    response = client_for(operator).get(reverse("run-keys-export", args=[run.pk]), {"format": "xlsx"})
    assert response.status_code == 400 and b"format" in response.content


def test_the_file_name_holds_only_safe_characters(dag_run_factory, task_instance_factory, task_key_factory, operator):
    run = dag_run_factory(dag_id="d")
    task_instance_factory(run, task_id='t"; x=\r\n')
    task_key_factory(run, task_id='t"; x=\r\n', key="k")
    url = reverse("task-instance-keys-export", args=[run.pk, 't"; x=\r\n'])
    response, body = download(client_for(operator), url)
    disposition = response["Content-Disposition"]
    assert disposition.count('"') == 2 and "\r" not in disposition and "\n" not in disposition
    assert [k["task_id"] for k in json_keys(body)] == ['t"; x=\r\n']


# The links on the pages ------------------------------------------------------------------------------------
def test_pages_link_to_their_downloads_with_their_filters(run, asset_factory, operator):
    client = client_for(operator)
    page = client.get(reverse("run-detail", args=[run.pk]), {"cursor": "abc"}).content.decode()
    base = reverse("run-keys-export", args=[run.pk])
    assert f'href="{base}?format=json"' in page and f'href="{base}?format=csv"' in page
    page = client.get(reverse("task-instance", args=[run.pk, "train"]), {"map_index": "1"}).content.decode()
    base = reverse("task-instance-keys-export", args=[run.pk, "train"])
    assert f'href="{base}?map_index=1&amp;format=csv"' in page
    asset = asset_factory(name="warehouse")
    page = client.get(reverse("asset-detail", args=[asset.pk])).content.decode()
    assert f'href="{reverse("asset-keys-list-export", args=[asset.pk])}?format=json"' in page
    page = client.get(reverse("search"), {"key": "off set", "task_cursor": "x"}).content.decode()
    assert f'href="{reverse("search-export")}?key=off+set&amp;format=csv"' in page
    assert 'data-testid="export-links"' not in client.get(reverse("search")).content.decode()  # nothing searched
    page = client.get(reverse("audit"), {"actor": "alice"}).content.decode()
    assert f'href="{reverse("audit-export")}?actor=alice&amp;format=json"' in page
