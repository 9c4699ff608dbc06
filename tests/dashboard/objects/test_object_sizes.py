"""The sizes of values behind a reference (issue 42 item 3): a worker-side key's page shows both sizes,
labelled (its object in the worker-side storage, its reference's bytes in Airflow's database); the object's size
is recorded in the dashboard's database when the dashboard reads or writes the object, forgotten when it deletes
it, and unknown (never 0) until then; the overview's largest values rank by the row plus the object.

A real ``file://`` storage (``tests/objects_helpers.file_storage``), uncompressed so that a 37 KB value is a
37 KB object; objects written as a worker writes them (``write_object``: nothing recorded) or by the dashboard
(``objects.write_object``, as the demo's data).
"""

import json
import re

import pytest

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.core import formatting
from statestore_admin.objects import sizes
from statestore_admin.objects import store as objects
from statestore_admin.records.models import ObjectSize
from tests.conftest import BOTH_DATABASES
from tests.dashboard.objects.test_worker_refs_pages import listed_in
from tests.html import flat
from tests.objects_helpers import file_storage, ref_value, write_object

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
RUN_ID = "scheduled__2026-12-01"
BIG = "x" * 37_000  # json.dumps: 37,002 bytes


@pytest.fixture
def store(tmp_path, monkeypatch):
    return file_storage(tmp_path, monkeypatch, compression=None)


@pytest.fixture
def op(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def world(store, dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    """A task key whose 37 KB value is a worker-side object (its row: the reference), and an asset key whose
    290-byte value is in its row."""
    run = dag_run_factory(dag_id="s3_ingest", run_id=RUN_ID)
    task_instance_factory(run, task_id="download")
    ref = write_object(store, store.task_ref("s3_ingest", RUN_ID, "download", -1, "manifest"), BIG)
    row = task_key_factory(run, task_id="download", key="manifest", value=ref_value(ref))
    asset = asset_factory(name="orders", uri="s3://warehouse/orders")
    small = asset_key_factory(asset, key="watermark", value="y" * 288)  # "…": 290 bytes of JSON
    assert len(small.value.encode()) == 290
    return {"ref": ref, "row": row, "asset": asset}


def size_facts(html: str) -> str:
    return flat(html.split('data-testid="size">')[1].split("</dd>")[0])


def test_a_worker_side_key_page_shows_both_sizes_after_reading_the_object(op, world, read_objects):
    row = world["row"]
    facts = size_facts(op.get(f"/keys/task/{row.pk}/").content.decode())
    assert f"object {formatting.size(37_002)} in the worker-side storage" in facts  # 36.1 KiB
    db = len(row.value.encode())
    assert f"reference {formatting.size(db)} in the database ({db} bytes of JSON)" in facts
    recorded = ObjectSize.objects.get()
    assert (recorded.ref, recorded.size, recorded.store) == (world["ref"], 37_002, "task")
    assert (recorded.dag_id, recorded.run_id, recorded.task_id, recorded.map_index, recorded.key) == (
        "s3_ingest",
        RUN_ID,
        "download",
        -1,
        "manifest",
    )


def test_an_object_never_read_has_an_unknown_size_not_zero(op, world, settings):
    settings.WORKER_BACKEND_READ = False
    facts = size_facts(op.get(f"/keys/task/{world['row'].pk}/").content.decode())
    assert "size unknown (the dashboard has not read it yet)" in facts
    assert "0 B" not in facts and "reference" in facts and "in the database" in facts
    assert not ObjectSize.objects.exists()


def test_an_object_the_dashboard_wrote_has_its_size_without_reading_it(op, store, world, settings):
    settings.WORKER_BACKEND_READ = False
    row = world["row"]
    place = sizes.Place.of_task_row(row)
    objects.write_object(store, world["ref"], json.dumps("z" * 5000).encode(), place)  # as the demo's data does
    assert ObjectSize.objects.get().size == 5002
    facts = size_facts(op.get(f"/keys/task/{row.pk}/").content.decode())
    assert f"object {formatting.size(5002)} in the worker-side storage" in facts


def test_an_asset_key_page_shows_both_sizes_after_reading_the_object(op, store, world, read_objects, asset_key_factory):
    asset = world["asset"]
    ref = write_object(store, store.asset_ref(asset.name, "snapshot"), BIG)
    asset_key_factory(asset, key="snapshot", value=ref_value(ref))
    facts = size_facts(op.get(f"/assets/{asset.pk}/key/?key=snapshot").content.decode())
    assert f"object {formatting.size(37_002)} in the worker-side storage" in facts and "in the database" in facts
    recorded = ObjectSize.objects.get()
    assert (recorded.store, recorded.asset_id, recorded.key, recorded.size) == ("asset", asset.pk, "snapshot", 37_002)


def test_a_plain_value_shows_one_size(op, world):
    html = op.get(f"/assets/{world['asset'].pk}/key/?key=watermark").content.decode()
    assert size_facts(html) == "290 B (290 bytes of JSON)"


def test_deleting_the_object_forgets_its_size(op, world, read_objects):
    row = world["row"]
    op.get(f"/keys/task/{row.pk}/")
    assert ObjectSize.objects.count() == 1
    confirm = op.get("/keys/task/delete/", {"ids": row.pk}, **HX)
    op.post("/keys/task/delete/", {"ids": row.pk, "listed": listed_in(confirm)}, **HX)
    assert not TaskStateStore.objects.filter(pk=row.pk).exists()
    assert not ObjectSize.objects.exists()


def test_a_missing_object_forgets_its_size(op, store, world, read_objects):
    row = world["row"]
    op.get(f"/keys/task/{row.pk}/")
    store.filesystem().rm_file(store.path(world["ref"]))
    html = op.get(f"/keys/task/{row.pk}/").content.decode()
    assert "dangling reference" in html and "size unknown" in size_facts(html)
    assert not ObjectSize.objects.exists()


# The overview's largest values ------------------------------------------------------------------------------
def largest(client) -> list[tuple[str, str]]:
    """(key, stored size cell) of each row, in order."""
    html = client.get("/overview/largest/", **HX).content.decode()
    rows = re.findall(r"<code><bdi>([^<]*)</bdi></code>.*?data-testid=\"largest-size\">(.*?)</td>", html, re.S)
    return [(key, flat(cell).strip()) for key, cell in rows]


def test_largest_values_rank_a_worker_side_key_by_its_object_once_read(op, world, read_objects):
    before = largest(op)
    assert [key for key, _ in before][:2] == ["watermark", "manifest"]  # the object's size is not known yet
    assert "object size unknown" in dict(before)["manifest"]
    op.get(f"/keys/task/{world['row'].pk}/")  # reads the object: 37 KB
    after = largest(op)
    assert [key for key, _ in after][:2] == ["manifest", "watermark"]
    db = len(world["row"].value.encode())
    cell = dict(after)["manifest"]
    assert cell.startswith(formatting.size(37_002 + db))
    assert f"(object {formatting.size(37_002)} + reference {formatting.size(db)} in the database)" in cell
    assert dict(after)["watermark"] == "290 B"
    html = flat(op.get("/overview/largest/", **HX).content.decode())
    assert "By stored size: the database row plus its worker-side object where the dashboard knows" in html


def test_largest_values_skip_an_object_whose_row_moved_on(op, world, read_objects):
    """A recorded object whose key now holds another value (or nothing) is not the key's size any more."""
    row = world["row"]
    op.get(f"/keys/task/{row.pk}/")
    TaskStateStore.objects.filter(pk=row.pk).update(value='"now inline"')
    assert [key for key, _ in largest(op)][:2] == ["watermark", "manifest"]
    assert dict(largest(op))["manifest"] == formatting.size(len('"now inline"'))


def test_largest_values_keep_to_the_users_scope(client, user_factory, world, read_objects, operator):
    client.force_login(operator)
    client.get(f"/keys/task/{world['row'].pk}/")
    client.force_login(user_factory("assets-only", perms=["asset.view"]))
    assert [key for key, _ in largest(client)] == ["watermark"]


# Lists ---------------------------------------------------------------------------------------------------
def list_size(html: str, key: str) -> str:
    row = html.split(f"<bdi>{key}</bdi>")[1].split("</tr>")[0]
    return flat(re.sub(r"<[^>]+>", "", row.split('<td class="num">')[1].split("</td>")[0])).strip()


def test_lists_show_a_worker_side_keys_recorded_object_size_without_reading(
    op, store, world, read_objects, asset_key_factory
):
    row = world["row"]
    asset = world["asset"]
    ref = write_object(store, store.asset_ref(asset.name, "snapshot"), BIG)
    asset_key_factory(asset, key="snapshot", value=ref_value(ref))
    db = len(row.value.encode())
    urls = {f"/runs/{row.dag_run_id}/tasks/download/": "manifest", f"/assets/{asset.pk}/": "snapshot"}
    for url, key in urls.items():
        assert list_size(op.get(url).content.decode(), key).endswith("in the database; object size unknown)"), url
    op.get(f"/keys/task/{row.pk}/")  # reads the task key's object
    cell = list_size(op.get(f"/runs/{row.dag_run_id}/tasks/download/").content.decode(), "manifest")
    parts = f"(object {formatting.size(37_002)} + reference {formatting.size(db)} in the database)"
    assert cell == f"{formatting.size(37_002 + db)} {parts}"
    assert list_size(op.get(f"/assets/{asset.pk}/").content.decode(), "watermark") == "290 B"
    story = flat(op.get(f"/keys/task/{row.pk}/story/").content.decode())
    assert parts in story  # the key's story, run by run
    assert ObjectSize.objects.count() == 1  # lists read no object
