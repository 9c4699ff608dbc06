"""statestore_admin/objects/store.py on a real ``file://`` object storage (and fsspec's ``memory://``): the
references common.io's backend builds, what is under the base path, classifying, reading for display and
deleting. The expected references are written out by hand from the provider's rule: the base without its
trailing slash, then each segment ``urllib.parse.quote(segment, safe="")``, then the compression's suffix."""

import gzip
import json
import subprocess
from pathlib import Path

import pytest

from statestore_admin.objects import store as objects
from statestore_admin.objects.store import INLINE, OBJECT, OUTSIDE, UNCONFIGURED, Storage, StorageError

from ..conftest import BOTH_DATABASES
from ..objects_helpers import (
    ENV_COMPRESSION,
    ENV_PATH,
    file_storage,
    object_exists,
    read_only,
    ref_value,
    set_option,
    write_bytes,
    write_object,
)

ROOT = Path(__file__).resolve().parents[2]
db = pytest.mark.django_db(databases=BOTH_DATABASES)


@pytest.fixture
def store(tmp_path, monkeypatch):
    return file_storage(tmp_path, monkeypatch)


@pytest.fixture
def base(tmp_path):
    return f"file://{tmp_path}/state"


# Deterministic references ------------------------------------------------------------------------------
TASK_REFS = [
    # (dag_id, run_id, task_id, map_index, key) → the path after the base, without the suffix
    (("etl", "manual__1", "extract", -1, "cursor"), "etl/manual__1/extract/-1/cursor"),
    (("etl", "r", "t", 0, "k"), "etl/r/t/0/k"),
    (("etl", "r", "t", 12, "k"), "etl/r/t/12/k"),
    (("a/b c", "r", "t", -1, "k"), "a%2Fb%20c/r/t/-1/k"),
    (
        ("etl", "scheduled__2026-12-01T00:00:00+00:00", "t", -1, "k"),
        "etl/scheduled__2026-12-01T00%3A00%3A00%2B00%3A00/t/-1/k",
    ),
    (("etl", "r", "group.task one", -1, "k"), "etl/r/group.task%20one/-1/k"),
    (("etl", "r", "t", -1, "100% done/now"), "etl/r/t/-1/100%25%20done%2Fnow"),
    (("données", "rün", "tâche", -1, "clé"), "donn%C3%A9es/r%C3%BCn/t%C3%A2che/-1/cl%C3%A9"),
    (("日本", "r", "t", -1, "ключ"), "%E6%97%A5%E6%9C%AC/r/t/-1/%D0%BA%D0%BB%D1%8E%D1%87"),
    (("etl", "r", "t", -1, "..."), "etl/r/t/-1/..."),  # only "." and ".." are refused
    (("etl", "r", "t", -1, "a..b"), "etl/r/t/-1/a..b"),
    (("etl", "r", "t", -1, "back\\slash"), "etl/r/t/-1/back%5Cslash"),
    (("etl", "r", "t", -1, "%2F"), "etl/r/t/-1/%252F"),  # an already quoted key is quoted again
    (("etl", "r", "t", -1, "?x=1#y"), "etl/r/t/-1/%3Fx%3D1%23y"),
]


@pytest.mark.parametrize(("scope", "tail"), TASK_REFS, ids=[repr(s) for s, _ in TASK_REFS])
def test_task_refs_are_what_the_provider_builds(store, base, scope, tail):
    assert store.task_ref(*scope) == f"{base}/{tail}.gz"
    assert store.contains(store.task_ref(*scope))


@pytest.mark.parametrize("where", range(5))
@pytest.mark.parametrize("bad", ["", ".", ".."])
def test_segments_the_provider_refuses_have_no_ref(store, where, bad):
    scope = ["etl", "r", "t", -1, "k"]
    if where == 3:  # the map index is a number: not refused
        assert store.task_ref(*scope) is not None
        return
    scope[where] = bad
    assert store.task_ref(*scope) is None
    assert store.asset_ref(bad, "k") is None and store.asset_ref("orders", bad) is None


def test_asset_refs_by_name_and_by_uri(store, base):
    assert store.asset_ref("orders", "watermark") == f"{base}/assets/orders/watermark.gz"
    by_uri = store.asset_ref("s3://bucket/orders", "watermark")
    assert by_uri == f"{base}/assets/s3%3A%2F%2Fbucket%2Forders/watermark.gz"
    assert store.asset_ref("my asset/é", "a b") == f"{base}/assets/my%20asset%2F%C3%A9/a%20b.gz"


@pytest.mark.parametrize(
    ("compression", "suffix"), [("gzip", ".gz"), ("bz2", ".bz2"), ("xz", ".xz"), ("lzma", ".lzma"), (None, "")]
)
def test_compression_suffix(tmp_path, monkeypatch, base, compression, suffix):
    store = file_storage(tmp_path, monkeypatch, compression=compression)
    assert store.suffix == suffix
    assert store.task_ref("d", "r", "t", -1, "k") == f"{base}/d/r/t/-1/k{suffix}"
    assert store.asset_ref("a", "k") == f"{base}/assets/a/k{suffix}"


def test_an_unsupported_compression_is_a_storage_error(tmp_path, monkeypatch):
    store = file_storage(tmp_path, monkeypatch, compression="rar")
    with pytest.raises(StorageError, match="'rar' is not supported"):
        store.task_ref("d", "r", "t", -1, "k")
    with pytest.raises(StorageError):
        store.asset_ref("a", "k")


def test_the_base_as_references_print_it(tmp_path, monkeypatch):
    """Airflow prints the base without its trailing slash(es); a plain path is a local one."""
    file_storage(tmp_path, monkeypatch)
    set_option(monkeypatch, ENV_PATH, " s3://aws_default@bucket/task-state// ")
    s3 = objects.storage()
    assert (s3.base, s3.scheme, s3.conn_id) == ("s3://aws_default@bucket/task-state", "s3", "aws_default")
    assert s3.task_ref("d", "r", "t", -1, "k") == "s3://aws_default@bucket/task-state/d/r/t/-1/k.gz"
    set_option(monkeypatch, ENV_PATH, "gs://bucket/prefix")
    assert (objects.storage().scheme, objects.storage().conn_id) == ("gs", None)
    set_option(monkeypatch, ENV_PATH, str(tmp_path / "plain"))
    assert objects.storage().base == f"file://{tmp_path}/plain"
    set_option(monkeypatch, ENV_PATH, None)
    assert objects.storage() is None
    assert objects.backend_is_object_storage()


def test_the_dashboard_reads_airflows_environment_variable_for_common_io(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_PATH", f"file://{tmp_path}/state/")
    monkeypatch.setenv("AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_COMPRESSION", "gzip")
    store = objects.storage()
    assert store is not None and (store.base, store.suffix) == (f"file://{tmp_path}/state", ".gz")


# What is under the base --------------------------------------------------------------------------------
BASE = "file:///tmp/state"


@pytest.mark.parametrize(
    ("ref", "inside"),
    [
        ("file:///tmp/state/etl/r/t/-1/k.gz", True),
        ("file:///tmp/state/assets/orders/k", True),
        ("file:///tmp/state/a%2F..%2F..%2Fetc/k", True),  # quoted: a literal name, no way out
        ("file:///tmp/state", False),  # the base itself
        ("file:///tmp/state/", False),
        ("file:///tmp/state2/x", False),  # a sibling sharing the prefix
        ("file:///tmp/statex", False),
        ("file:///tmp/stat", False),
        ("file:///tmp/state/../state2/x", False),
        ("file:///tmp/state/a/../../etc/passwd", False),
        ("file:///tmp/state/./a", False),
        ("file:///tmp/state/a/.", False),
        ("file:///tmp/state//a", False),
        ("file:///tmp/state/a//b", False),
        ("file:///tmp/state/a/", False),
        ("file:///tmp/state/a\\..\\..\\etc", False),
        ("file:///tmp/state/a\\b", False),
        ("file:///etc/hostname", False),
        ("s3:///tmp/state/a", False),
        ("FILE:///tmp/state/a", False),
        ("file://host/tmp/state/a", False),
        ("/tmp/state/a", False),
        ("", False),
    ],
)
def test_contains(ref, inside):
    assert Storage(BASE).contains(ref) is inside


def test_conn_id_and_paths():
    s3 = Storage("s3://conn@bucket/prefix")
    assert (s3.scheme, s3.conn_id) == ("s3", "conn")
    assert s3.contains("s3://conn@bucket/prefix/d/k") and not s3.contains("s3://bucket/prefix/d/k")
    assert not s3.contains("s3://other@bucket/prefix/d/k")
    assert Storage("s3://bucket/prefix").conn_id is None


def test_a_missing_fsspec_package_is_a_storage_error(settings):
    settings.WORKER_BACKEND_STORAGE_OPTIONS = {}
    with pytest.raises(StorageError, match="Install the matching fsspec package"):
        Storage("nosuchprotocol://bucket/prefix").filesystem()


def test_path_and_ref_of_round_trip(store, base, tmp_path):
    refs = [
        write_object(store, store.task_ref("a/b c", "r:1", "t", 12, "k é"), 1),
        write_object(store, store.asset_ref("s3://bucket/x", "%"), 2),
    ]
    paths = [store.path(ref) for ref in refs]
    assert paths == [
        f"{tmp_path}/state/a%2Fb%20c/r%3A1/t/12/k%20%C3%A9.gz",
        f"{tmp_path}/state/assets/s3%3A%2F%2Fbucket%2Fx/%25.gz",
    ]
    assert all(Path(p).is_file() for p in paths)  # the names on disk are the quoted segments, literally
    assert [store.ref_of(p) for p in paths] == refs
    listed = store.filesystem().find(f"{tmp_path}/state")
    assert sorted(store.ref_of(p) for p in listed) == sorted(refs)


@db  # a deleted or missing object's recorded size is forgotten (objects.sizes)
def test_path_and_ref_of_with_a_conn_id_on_memory(settings):
    settings.WORKER_BACKEND_STORAGE_OPTIONS = {}
    store = Storage("memory://conn@statebucket/prefix", compression="gzip")
    ref = store.task_ref("d", "r", "t", -1, "k")
    assert ref == "memory://conn@statebucket/prefix/d/r/t/-1/k.gz"
    path = store.path(ref)
    assert "conn" not in path and path.endswith("statebucket/prefix/d/r/t/-1/k.gz")
    assert store.ref_of(path) == ref
    write_object(store, ref, {"on": "memory"})
    try:
        assert objects.read_object(store, ref, 100) == b'{"on": "memory"}'
        assert objects.delete_objects([objects.classify(ref, store)], store).deleted == 1
    finally:
        store.filesystem().rm(store.path(store.base + "/x")[: -len("/x")], recursive=True)


# Storage options -----------------------------------------------------------------------------------------
def test_storage_options_by_conn_id_then_protocol_then_star(settings):
    with_conn, without = Storage("memory://conn@b/p"), Storage("memory://b/p")
    other_conn = Storage("memory://other@b/p")
    settings.WORKER_BACKEND_STORAGE_OPTIONS = {
        "conn": {"marker": "conn"},
        "memory": {"marker": "protocol"},
        "*": {"marker": "star"},
    }
    assert with_conn.filesystem().storage_options == {"marker": "conn"}
    assert without.filesystem().storage_options == {"marker": "protocol"}
    assert other_conn.filesystem().storage_options == {"marker": "protocol"}
    settings.WORKER_BACKEND_STORAGE_OPTIONS = {"*": {"marker": "star"}}
    assert with_conn.filesystem().storage_options == {"marker": "star"}
    settings.WORKER_BACKEND_STORAGE_OPTIONS = {}
    assert with_conn.filesystem().storage_options == {}


def test_storage_options_reach_the_filesystem(store, settings, tmp_path):
    """``auto_mkdir`` is a real LocalFileSystem option: with it, an object opens in a directory not yet made."""
    settings.WORKER_BACKEND_STORAGE_OPTIONS = {"file": {"auto_mkdir": True}}
    fs = store.filesystem()
    assert fs.auto_mkdir is True
    with fs.open(store.path(store.task_ref("new", "r", "t", -1, "k")), "wb") as f:
        f.write(b"1")
    assert (tmp_path / "state/new/r/t/-1/k.gz").is_file()
    settings.WORKER_BACKEND_STORAGE_OPTIONS = {"file": {"auto_mkdir": False}}
    assert store.filesystem().auto_mkdir is False


# Classifying ----------------------------------------------------------------------------------------------
def test_classify(store, base):
    ref = store.task_ref("d", "r", "t", -1, "k")
    assert objects.classify('{"a": 1}', store).kind == INLINE
    assert objects.classify("[1, 2]", store).kind == INLINE
    assert objects.classify('"text"', store).kind == INLINE
    assert objects.classify("12", None).kind == INLINE
    assert objects.classify(ref, store).kind == OBJECT
    assert objects.classify(ref, store).is_object
    assert objects.classify("file:///etc/hostname", store).kind == OUTSIDE
    assert objects.classify(f"{base}/../secret", store).kind == OUTSIDE
    assert objects.classify("s3://bucket/x", store).kind == OUTSIDE
    assert objects.classify(ref, None).kind == UNCONFIGURED
    for kind in (INLINE, OBJECT, OUTSIDE, UNCONFIGURED):
        assert objects.Reference("x", kind).explanation


@db
def test_risk_for_a_reference_off_the_deterministic_layout(store, base, dag_run_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="r 1")
    expected = f"{base}/etl/r%201/t/3/k.gz"
    for off_layout in (
        f"{base}/etl/r%201/t/3/2026-12-01T02:00:00/k.gz",  # a timestamp in the path
        f"{base}/9b2f4c1e-6a3d-4f0e-9d8c-1f2e3a4b5c6d.gz",  # a random UUID
        f"{base}/etl/r%201/t/-1/k.gz",  # another map index's object
    ):
        row = task_key_factory(run, task_id="t", map_index=3, key="k", value=ref_value(off_layout))
        reference = objects.reference_of_task_row(row, store)
        assert reference.kind == OBJECT and reference.expected == (expected,)
        assert expected in reference.risk and "orphaned" in reference.risk
        row.delete()
    row = task_key_factory(run, task_id="t", map_index=3, key="k", value=ref_value(expected))
    assert objects.reference_of_task_row(row, store).risk is None
    row.delete()
    # Inline and outside references carry no orphan risk (there is no object of ours to orphan).
    row = task_key_factory(run, task_id="t", map_index=3, key="k", value=ref_value('{"a": 1}'))
    assert objects.reference_of_task_row(row, store).risk is None
    row.delete()
    row = task_key_factory(run, task_id="t", map_index=3, key="k", value=ref_value("file:///elsewhere/k"))
    assert objects.reference_of_task_row(row, store).risk is None
    row.delete()
    # A plain value is no reference at all.
    row = task_key_factory(run, task_id="t", map_index=3, key="k", value={"__airflow_state_ref__": "x", "b": 1})
    assert objects.reference_of_task_row(row, store) is None


@db
def test_asset_references_by_name_or_uri_carry_no_risk(store, base, asset_factory, asset_key_factory):
    asset = asset_factory(name="orders", uri="s3://bucket/orders")
    by_name, by_uri = f"{base}/assets/orders/k.gz", f"{base}/assets/s3%3A%2F%2Fbucket%2Forders/k.gz"
    for ref in (by_name, by_uri):
        row = asset_key_factory(asset, key="k", value=ref_value(ref))
        reference = objects.reference_of_asset_row(row, store, name=asset.name, uri=asset.uri)
        assert reference.expected == (by_name, by_uri) and reference.risk is None
        row.delete()
    row = asset_key_factory(asset, key="k", value=ref_value(f"{base}/assets/renamed/k.gz"))
    risk = objects.reference_of_asset_row(row, store, name=asset.name, uri=asset.uri).risk
    assert by_name in risk and by_uri in risk


# Reading ---------------------------------------------------------------------------------------------
def _resolve(ref, store):
    return objects.resolve(objects.classify(ref, store), store)


@pytest.mark.parametrize("compression", ["gzip", "bz2", None])
def test_resolve_objects(tmp_path, monkeypatch, read_objects, compression):
    store = file_storage(tmp_path, monkeypatch, compression=compression)
    value = {"rows": [1, 2, 3], "name": "é 日本 <script>"}
    ref = write_object(store, store.task_ref("a/b c", "r", "t", 0, "k"), value)
    resolved = _resolve(ref, store)
    assert (resolved.text, resolved.error) == (json.dumps(value), None)
    assert json.loads(resolved.text) == value


def test_what_the_provider_writes_is_compressed_on_disk(store, tmp_path):
    ref = write_object(store, store.task_ref("d", "r", "t", -1, "k"), [1])
    assert gzip.decompress((tmp_path / "state/d/r/t/-1/k.gz").read_bytes()) == b"[1]"
    assert object_exists(store, ref)


def test_resolve_inline(store, settings):
    settings.WORKER_BACKEND_READ = False  # inline values need no reading
    assert _resolve('{"a": 1}', store).text == '{"a": 1}'
    assert _resolve('{"a": 1}', None).text == '{"a": 1}'
    assert "not JSON" in _resolve("{not json", store).error


def test_resolve_with_reading_off(store, settings):
    settings.WORKER_BACKEND_READ = False
    ref = write_object(store, store.task_ref("d", "r", "t", -1, "k"), 1)
    resolved = _resolve(ref, store)
    assert resolved.text is None and "WORKER_BACKEND_READ=1" in resolved.error


@db  # a deleted or missing object's recorded size is forgotten (objects.sizes)
def test_resolve_missing_is_dangling(store, read_objects):
    resolved = _resolve(store.task_ref("d", "r", "t", -1, "k"), store)
    assert resolved.text is None and "dangling" in resolved.error


def test_resolve_size_limit(store, read_objects):
    ref = write_object(store, store.task_ref("d", "r", "t", -1, "k"), "x" * 98)  # 100 bytes of JSON
    read_objects.WORKER_BACKEND_READ_MAX_BYTES = 100
    assert _resolve(ref, store).text == json.dumps("x" * 98)
    read_objects.WORKER_BACKEND_READ_MAX_BYTES = 99
    resolved = _resolve(ref, store)
    assert resolved.text is None and "larger than 99 bytes" in resolved.error


def test_resolve_limit_counts_decompressed_bytes(store, read_objects):
    ref = write_object(store, store.task_ref("d", "r", "t", -1, "k"), "0" * 10_000)
    assert Path(store.path(ref)).stat().st_size < 200
    read_objects.WORKER_BACKEND_READ_MAX_BYTES = 1_000
    assert "too large" in _resolve(ref, store).error


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"\xff\xfe not utf-8", "UTF-8 JSON"),
        (b"{not json", "UTF-8 JSON"),
        (b"", "UTF-8 JSON"),
    ],
)
def test_resolve_objects_that_are_not_json(tmp_path, monkeypatch, read_objects, data, error):
    store = file_storage(tmp_path, monkeypatch, compression=None)
    ref = write_bytes(store, store.task_ref("d", "r", "t", -1, "k"), data)
    resolved = _resolve(ref, store)
    assert resolved.text is None and error in resolved.error


def test_resolve_a_corrupt_compressed_object(store, read_objects):
    ref = write_bytes(store, store.task_ref("d", "r", "t", -1, "k"), b'{"not": "gzip"}')
    resolved = _resolve(ref, store)
    assert resolved.text is None and resolved.error.startswith("The object could not be read")


def test_resolve_a_directory(store, read_objects):
    write_object(store, store.task_ref("d", "r", "t", -1, "k"), 1)
    resolved = _resolve(f"{store.base}/d/r", store)
    assert resolved.text is None and resolved.error


def test_never_opens_outside_the_base(store, base, read_objects, tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text('{"secret": true}')
    for ref in (
        "file:///etc/hostname",
        f"file://{secret}",
        f"{base}/../secret.json",
        f"{base}/./../secret.json",
        f"{base}2/x",
    ):
        reference = objects.classify(ref, store)
        assert reference.kind == OUTSIDE
        resolved = objects.resolve(reference, store)
        assert resolved.text is None and "never opens" in resolved.error
        with pytest.raises(StorageError, match="outside"):
            objects.read_object(store, ref, 100)
    # Even a Reference claimed to be an object is not read when it is outside (read_object checks again).
    resolved = objects.resolve(objects.Reference(f"file://{secret}", OBJECT), store)
    assert resolved.text is None and "outside" in resolved.error


def test_resolve_unconfigured(read_objects):
    resolved = objects.resolve(objects.classify("file:///tmp/state/k", None), None)
    assert resolved.text is None and "state_store_objectstorage_path" in resolved.error


@db
def test_resolve_task_and_asset_rows(
    store, read_objects, dag_run_factory, task_key_factory, asset_factory, asset_key_factory
):
    run = dag_run_factory(dag_id="etl", run_id="r")
    ref = write_object(store, store.task_ref("etl", "r", "t", 2, "k"), {"v": 1})
    row = task_key_factory(run, task_id="t", map_index=2, key="k", value=ref_value(ref))
    assert objects.resolve_task_row(row).text == '{"v": 1}'
    plain = task_key_factory(run, task_id="t", key="plain", value={"v": 2})
    assert objects.resolve_task_row(plain) is None
    asset = asset_factory(name="orders", uri="s3://bucket/orders")
    ref = write_object(store, store.asset_ref(asset.uri, "w"), "2026-12-01")
    arow = asset_key_factory(asset, key="w", value=ref_value(ref))
    resolved = objects.resolve_asset_row(arow, asset)
    assert resolved.text == '"2026-12-01"' and resolved.reference.risk is None


@db
def test_resolve_with_an_unsupported_compression_answers_an_error(
    tmp_path, monkeypatch, read_objects, dag_run_factory, task_key_factory
):
    store = file_storage(tmp_path, monkeypatch, compression=None)
    ref = write_object(store, store.task_ref("etl", "r", "t", -1, "k"), 1)
    set_option(monkeypatch, ENV_COMPRESSION, "rar")
    run = dag_run_factory(dag_id="etl", run_id="r")
    row = task_key_factory(run, task_id="t", key="k", value=ref_value(ref))
    resolved = objects.resolve_task_row(row)
    assert resolved.text == "1" or resolved.error


@db
def test_key_page_of_an_inline_reference_with_an_unsupported_compression(
    tmp_path, monkeypatch, settings, client, operator, dag_run_factory, task_key_factory
):
    settings.WORKER_BACKEND_READ = False
    file_storage(tmp_path, monkeypatch, compression="rar")
    run = dag_run_factory(dag_id="etl", run_id="r")
    row = task_key_factory(run, task_id="t", key="k", value=ref_value('{"a": 1}'))
    client.force_login(operator)
    assert client.get(f"/keys/task/{row.pk}/").status_code == 200


# Deleting -------------------------------------------------------------------------------------------
def test_refs_to_delete(store, base):
    ref = store.task_ref("d", "r", "t", -1, "k")
    values = [
        json.dumps(ref_value(ref)),
        json.dumps(ref_value('{"inline": 1}')),
        json.dumps(ref_value("file:///elsewhere/k")),
        json.dumps({"plain": 1}),
        json.dumps(ref_value(5)),  # not a string: not a reference the backend writes
        "not json",
        None,
    ]
    found = objects.refs_to_delete(values, store)
    assert [(r.ref, r.kind) for r in found] == [(ref, OBJECT), ("file:///elsewhere/k", OUTSIDE)]
    assert [r.kind for r in objects.refs_to_delete(values[:2], None)] == [UNCONFIGURED]


@db  # a deleted or missing object's recorded size is forgotten (objects.sizes)
def test_delete_objects_deleted_missing_failed(store, base, tmp_path):
    gone = write_object(store, store.task_ref("d", "r", "t", -1, "gone"), 1)
    locked = write_object(store, store.task_ref("d", "r", "locked", -1, "k"), 2)
    missing = store.task_ref("d", "r", "t", -1, "never-written")
    outside = "file:///etc/hostname"
    references = [objects.classify(r, store) for r in (gone, locked, missing, outside)]
    with read_only(tmp_path / "state/d/r/locked/-1"):
        result = objects.delete_objects(references, store)
    assert (result.deleted, result.missing, result.failed_count, result.attempted) == (1, 1, 2, 4)
    assert not object_exists(store, gone) and object_exists(store, locked)
    (locked_ref, locked_error), (outside_ref, outside_error) = result.failed
    assert locked_ref == locked and locked_error.startswith(("PermissionError", "OSError"))
    assert outside_ref == outside and "never opens or deletes" in outside_error
    details = result.details()
    assert details == {
        "deleted": 1,
        "missing": 1,
        "failed": 2,
        "failures": [{"ref": locked, "error": locked_error}, {"ref": outside, "error": outside_error}],
    }
    json.dumps(details)  # stored in the audit event as it is
    text = result.describe()
    assert "2 worker-side objects could not be deleted and are now orphaned" in text
    assert locked in text and "and 1 more" in text and "Orphans page" in text


def test_delete_objects_never_removes_a_directory(store, tmp_path):
    kept = write_object(store, store.task_ref("d", "r", "t", -1, "k"), 1)
    result = objects.delete_objects([objects.classify(f"{store.base}/d/r", store)], store)
    assert result.deleted == 0 and result.failed_count == 1
    assert object_exists(store, kept)


def test_delete_objects_unconfigured_fails_without_storage():
    result = objects.delete_objects([objects.classify("file:///tmp/state/k", None)], None)
    assert (result.failed_count, result.failed[0][0]) == (1, "file:///tmp/state/k")
    assert "state_store_objectstorage_path" in result.failed[0][1]


def test_failures_named_are_capped_and_all_counted(store):
    references = [objects.classify(f"file:///elsewhere/{i}", store) for i in range(objects.FAILED_NAMED + 5)]
    result = objects.delete_objects(references, store)
    assert result.failed_count == objects.FAILED_NAMED + 5
    assert len(result.failed) == objects.FAILED_NAMED == len(result.details()["failures"])
    assert result.details()["failed"] == objects.FAILED_NAMED + 5
    assert f"and {objects.FAILED_NAMED + 4:,} more" in result.describe()
    assert f"{objects.FAILED_NAMED + 5:,} worker-side objects" in result.describe()


def test_describe_one_failure_and_none():
    one = objects.ObjectDeletes()
    assert one.describe() == ""
    one.fail("file:///x/k", "PermissionError: no")
    assert one.describe() == (
        " 1 worker-side object could not be deleted and is now orphaned (file:///x/k: PermissionError: no); "
        "the rows stay deleted. See the Orphans page."
    )


@db  # a deleted or missing object's recorded size is forgotten (objects.sizes)
def test_delete_objects_accumulates_into_a_result(store):
    into = objects.ObjectDeletes(deleted=3)
    ref = write_object(store, store.task_ref("d", "r", "t", -1, "k"), 1)
    assert objects.delete_objects([objects.classify(ref, store)], store, into=into) is into
    assert into.deleted == 4


def test_read_only_helper_blocks_creating_and_deleting(store, tmp_path):
    ref = write_object(store, store.task_ref("d", "r", "t", -1, "k"), 1)
    directory = tmp_path / "state/d/r/t/-1"
    with read_only(directory):
        with pytest.raises(OSError):
            (directory / "new").touch()
        with pytest.raises(OSError):
            Path(store.path(ref)).unlink()
        assert Path(store.path(ref)).read_bytes()  # still readable
    Path(store.path(ref)).unlink()  # undone


# The provider itself ------------------------------------------------------------------------------------
PROVIDER_SCRIPT = """
import json, sys
from airflow.providers.common.io.state_store import backend
from airflow.sdk._shared.state import AssetScope, TaskAddress
out = []
for kind, args in json.loads(sys.argv[1]):
    if kind == "task":
        *scope, key = args
        out.append(str(backend._build_task_path(TaskAddress(*scope), key)))
    else:
        name, uri, key = args
        out.append(str(backend._build_asset_path(AssetScope(name=name, uri=uri), key)))
print(json.dumps(out))
"""


@pytest.mark.compat
def test_refs_equal_the_installed_providers(tmp_path, monkeypatch):
    """Against common.io's own path builders in the Airflow 3.3.2 virtualenv (scripts/airflow_venv.sh). Not in
    `make test-compat` (tests/compat only): `pytest -m compat tests/objects/test_objects.py`."""
    store = file_storage(tmp_path, monkeypatch)
    venv = subprocess.run(
        ["bash", str(ROOT / "scripts" / "airflow_venv.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()
    cases = [("task", list(scope)) for scope, _ in TASK_REFS] + [
        ("asset", ["orders", None, "k"]),
        ("asset", [None, "s3://bucket/orders", "a b"]),
    ]
    env = {
        "AIRFLOW_HOME": str(tmp_path / "home"),
        ENV_PATH: f"file://{tmp_path}/state/",  # Airflow's own spelling
        ENV_COMPRESSION: "gzip",
    }
    done = subprocess.run(
        [f"{venv}/bin/python", "-c", PROVIDER_SCRIPT, json.dumps(cases)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    ours = [
        store.task_ref(*args) if kind == "task" else store.asset_ref(args[0] or args[1], args[2])
        for kind, args in cases
    ]
    assert ours == theirs
