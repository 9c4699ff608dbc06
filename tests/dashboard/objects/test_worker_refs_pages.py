"""Worker-side references on the pages (issue 15): the key pages show the reference, its kind and the value
behind it (or why not), lists never read objects, delete confirmations and toasts say what happens to the
objects, and the overview explains the worker-side and custom backends.

A real ``file://`` object storage in ``tmp_path``, configured through Airflow's environment variables as a
worker reads them; objects written as common.io's backend writes them (``json.dumps``, gzip through fsspec).
"""

import json
import shutil
import subprocess
import uuid
from html import unescape
from pathlib import Path
from urllib.parse import quote

import fsspec
import pytest

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.objects import store as objects
from statestore_admin.records.models import AuditEvent
from tests.conftest import BOTH_DATABASES
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

HX = {"HTTP_HX_REQUEST": "true"}
REF_KEY = "__airflow_state_ref__"
XSS = "<script>alert(1)</script>"
RUN_ID = "manual__2026-12-01T00:00:00+00:00"
BACKEND_ENV = "AIRFLOW__WORKERS__STATE_STORE_BACKEND"


def set_common_io(monkeypatch, key: str, value: str | None) -> None:
    """A ``[common.io]`` option in the environment as Airflow names it, or removed (``None``)."""
    name = f"AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_{key.upper()}"
    if value is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, value)


# A file:// storage, objects as the provider writes them -----------------------------------------------
@pytest.fixture
def storage(tmp_path, monkeypatch):
    root = tmp_path / "state"
    root.mkdir()
    monkeypatch.setenv(BACKEND_ENV, objects.PROVIDER_BACKEND)
    set_common_io(monkeypatch, "path", f"file://{root}/")
    set_common_io(monkeypatch, "compression", "gzip")
    store = objects.storage()
    assert store is not None and store.base == f"file://{root}" and store.suffix == ".gz"
    return store


@pytest.fixture
def reading(settings):
    settings.WORKER_BACKEND_READ = True


def write_object(path: str | Path, value) -> None:
    """``json.dumps(value)``, gzip-compressed through fsspec, as common.io's backend writes an object."""
    fs = fsspec.filesystem("file")
    fs.makedirs(str(Path(path).parent), exist_ok=True)
    with fs.open(str(path), "wb", compression="gzip") as f:
        f.write(json.dumps(value).encode("utf-8"))


def write_ref(store, ref: str, value) -> str:
    write_object(store.path(ref), value)
    return ref


def ref_value(ref: str) -> dict:
    return {REF_KEY: ref}


@pytest.fixture
def run(dag_run_factory, task_instance_factory):
    run = dag_run_factory(dag_id="etl", run_id=RUN_ID)
    task_instance_factory(run, task_id="load", map_index=2)
    task_instance_factory(run, task_id="plain")
    return run


@pytest.fixture
def op(client, operator):
    client.force_login(operator)
    return client


def task_ref_key(store, run, task_key_factory, key="cursor", value=None, map_index=2, task_id="load"):
    """A task key holding the deterministic reference of (run, task, map index, key), with its object."""
    ref = store.task_ref(run.dag_id, run.run_id, task_id, map_index, key)
    if value is not None:
        write_ref(store, ref, value)
    return task_key_factory(run, task_id=task_id, map_index=map_index, key=key, value=ref_value(ref))


def page(client, url) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


# Key pages --------------------------------------------------------------------------------------------
def test_task_key_page_shows_the_value_read_from_the_object_escaped(op, storage, reading, run, task_key_factory):
    key = task_ref_key(storage, run, task_key_factory, value={"offset": 1200, "note": XSS})
    html = page(op, f"/keys/task/{key.pk}/")
    assert "Value read from the object" in html
    assert "1200" in html and "offset" in html
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert quote(RUN_ID, safe="") in html  # the reference itself, with its quoted segments
    assert 'data-testid="reference-kind">object<' in html
    assert objects.Reference("x", objects.OBJECT).explanation in html
    assert 'data-testid="resolve-notice"' not in html and 'data-testid="orphan-risk"' not in html
    assert "Stored in the row" in html and 'id="resolved-value"' in html and 'id="raw-value"' in html


def test_asset_key_page_shows_the_value_read_from_the_object(op, storage, reading, asset_factory, asset_key_factory):
    asset = asset_factory(name="orders <b>", uri="s3://warehouse/orders")
    by_name = write_ref(storage, storage.asset_ref(asset.name, "watermark"), {"date": "2026-11-30", "x": XSS})
    asset_key_factory(asset, key="watermark", value=ref_value(by_name), kind="task")
    html = page(op, f"/assets/{asset.pk}/key/?key=watermark")
    assert "Value read from the object" in html and "2026-11-30" in html
    assert XSS not in html and "&lt;script&gt;" in html
    assert 'data-testid="orphan-risk"' not in html
    # A task that accessed the asset by URI writes under its URI: deterministic too.
    by_uri = write_ref(storage, storage.asset_ref(asset.uri, "by-uri"), [1, 2, 3])
    asset_key_factory(asset, key="by-uri", value=ref_value(by_uri), kind="task")
    html = page(op, f"/assets/{asset.pk}/key/?key=by-uri")
    assert "Value read from the object" in html and 'data-testid="orphan-risk"' not in html
    assert quote("s3://warehouse/orders", safe="") in html


def test_an_inline_reference_shows_its_value_without_reading(op, storage, run, task_key_factory):
    key = task_key_factory(run, task_id="load", map_index=2, key="small", value=ref_value('{"a": 1}'))
    html = page(op, f"/keys/task/{key.pk}/")  # WORKER_BACKEND_READ is off: inline needs no read
    assert "Value held inline in the reference" in html
    assert 'data-testid="reference-kind">inline<' in html and 'data-testid="resolve-notice"' not in html


def test_reading_is_off_by_default(op, storage, run, task_key_factory, settings):
    assert settings.WORKER_BACKEND_READ is False
    key = task_ref_key(storage, run, task_key_factory, value={"secret-ish": "only-with-reading-on"})
    html = page(op, f"/keys/task/{key.pk}/")
    assert "only-with-reading-on" not in html and "Value read from the object" not in html
    assert 'data-testid="resolve-notice"' in html and "Reading worker-side objects is off" in html
    assert storage.path(key.worker_ref) in html or quote(RUN_ID, safe="") in html  # the reference is shown


def test_a_missing_object_is_a_dangling_reference(op, storage, reading, run, task_key_factory):
    key = task_ref_key(storage, run, task_key_factory)  # no object written
    html = page(op, f"/keys/task/{key.pk}/")
    assert "dangling reference" in html and "Value read from the object" not in html


def test_an_object_larger_than_the_limit_is_not_shown(op, storage, reading, run, task_key_factory, settings):
    settings.WORKER_BACKEND_READ_MAX_BYTES = 50
    key = task_ref_key(storage, run, task_key_factory, value={"rows": list(range(100))})
    html = page(op, f"/keys/task/{key.pk}/")
    assert "too large to show" in html and "Value read from the object" not in html
    settings.WORKER_BACKEND_READ_MAX_BYTES = 10_000
    assert "Value read from the object" in page(op, f"/keys/task/{key.pk}/")


@pytest.mark.parametrize("configured", [True, False])
def test_a_reference_outside_the_base_is_never_opened(
    op, reading, run, task_key_factory, tmp_path, monkeypatch, request, configured
):
    if configured:
        request.getfixturevalue("storage")
    else:
        set_common_io(monkeypatch, "path", None)
        assert objects.storage() is None
    key = task_key_factory(run, task_id="load", map_index=2, key="passwd", value=ref_value("file:///etc/passwd"))
    html = flat(page(op, f"/keys/task/{key.pk}/"))
    assert "root:" not in html and "Value read from the object" not in html
    kind = "outside the base" if configured else "no storage configured"
    assert f'data-testid="reference-kind">{kind}<' in html and 'data-testid="resolve-notice"' in html
    assert "file:///etc/passwd" in html


def test_dot_dot_in_a_reference_does_not_leave_the_base(op, storage, reading, run, task_key_factory, tmp_path):
    write_object(tmp_path / "secret.json.gz", {"secret": "outside-the-base"})
    sneaky = f"{storage.base}/../secret.json.gz"
    key = task_key_factory(run, task_id="load", map_index=2, key="sneaky", value=ref_value(sneaky))
    html = flat(page(op, f"/keys/task/{key.pk}/"))
    assert "outside-the-base" not in html and 'data-testid="reference-kind">outside the base<' in html


def test_a_non_deterministic_reference_is_an_orphan_risk(op, storage, reading, run, task_key_factory):
    deterministic = storage.task_ref(run.dag_id, run.run_id, "load", 2, "cursor")
    random = deterministic.replace("/cursor.gz", f"/cursor-{uuid.uuid4().hex}.gz")
    write_ref(storage, random, {"offset": 7})
    key = task_key_factory(run, task_id="load", map_index=2, key="cursor", value=ref_value(random))
    html = page(op, f"/keys/task/{key.pk}/")
    assert 'data-testid="orphan-risk"' in html and "Orphan risk" in html
    assert "does not follow the deterministic layout" in html and "cursor.gz" in html
    assert "Value read from the object" in html  # still readable: it is under the base


def test_a_plain_value_has_no_reference_section(op, storage, reading, run, task_key_factory):
    key = task_key_factory(run, task_id="plain", key="job", value={"id": 1})
    html = page(op, f"/keys/task/{key.pk}/")
    assert "worker-side ref" not in html and "Stored in the row" not in html and "Reference" not in html


def test_without_view_permission_the_key_pages_stay_closed(
    client, user_factory, storage, reading, run, task_key_factory, asset_factory, asset_key_factory
):
    key = task_ref_key(storage, run, task_key_factory, value={"offset": "zq-secret-value"})
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="w", value=ref_value(write_ref(storage, storage.asset_ref("orders", "w"), 1)))
    client.force_login(user_factory("deleter", perms=["task.delete", "asset.delete"]))
    for url in (f"/keys/task/{key.pk}/", f"/assets/{asset.pk}/key/?key=w"):
        response = client.get(url)
        assert response.status_code == 403 and b"zq-secret-value" not in response.content


# Lists never read objects -----------------------------------------------------------------------------
def test_lists_show_the_reference_and_read_no_object(
    op, storage, reading, run, task_key_factory, asset_factory, asset_key_factory, monkeypatch
):
    present = task_ref_key(storage, run, task_key_factory, key="present", value={"zq": "only-in-the-object"})
    task_ref_key(storage, run, task_key_factory, key="missing")  # a dangling reference does not matter here
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="gone", value=ref_value(storage.asset_ref("orders", "gone")))
    reads = []
    real_read, real_resolve = objects.read_object, objects.resolve
    monkeypatch.setattr(objects, "read_object", lambda *a, **k: reads.append(a) or real_read(*a, **k))
    monkeypatch.setattr(objects, "resolve", lambda *a, **k: reads.append(a) or real_resolve(*a, **k))
    for url in (
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/tasks/load/?map_index=2",
        f"/assets/{asset.pk}/",
        "/search/?key=e",
    ):
        html = page(op, url)
        assert "worker ref" in html, url
        assert "only-in-the-object" not in html, url
    html = page(op, f"/runs/{run.pk}/tasks/load/?map_index=2")
    assert REF_KEY in html and storage.base[:50] in html  # the list's preview shows the reference (cut)
    assert reads == []
    page(op, f"/keys/task/{present.pk}/")  # the key page does read
    assert reads


# Delete confirmations and toasts --------------------------------------------------------------------
def listed_in(response) -> str:
    return response.content.decode().split('name="listed" value="')[1].split('"')[0]


def test_confirmations_say_the_object_is_deleted_after_the_row(
    op, storage, run, task_key_factory, asset_factory, asset_key_factory
):
    key = task_ref_key(storage, run, task_key_factory, value=1)
    html = flat(op.get("/keys/task/delete/", {"ids": key.pk}, **HX).content.decode())
    assert "<strong>1</strong> of these keys is a worker-side reference" in html
    assert "the row is deleted first, then its object" in html and "left behind" not in html
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="w", value=ref_value(storage.asset_ref("orders", "w")))
    html = flat(op.get(f"/assets/{asset.pk}/delete/", {"keys": "w"}, **HX).content.decode())
    assert "is a worker-side reference" in html and "then its object" in html


def test_confirmations_say_the_object_stays_without_storage(
    op, run, task_key_factory, asset_factory, asset_key_factory, monkeypatch
):
    set_common_io(monkeypatch, "path", None)
    key = task_key_factory(run, task_id="load", map_index=2, key="r", value=ref_value("s3://bucket/r"))
    html = op.get("/keys/task/delete/", {"ids": key.pk}, **HX).content.decode()
    assert "no object storage configured" in html and "will be left behind" in html
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="w", value=ref_value("s3://bucket/w"))
    html = op.get(f"/assets/{asset.pk}/delete/", {"keys": "w"}, **HX).content.decode()
    assert "will be left behind" in html


def test_a_page_delete_removes_the_object_after_the_row(op, storage, run, task_key_factory):
    key = task_ref_key(storage, run, task_key_factory, value={"a": 1})
    path = Path(storage.path(key.worker_ref))
    assert path.exists()
    confirm = op.get("/keys/task/delete/", {"ids": key.pk}, **HX)
    response = op.post("/keys/task/delete/", {"ids": key.pk, "listed": listed_in(confirm)}, **HX)
    toast = json.loads(response["HX-Trigger"])["toast"]
    assert toast["level"] == "success" and "Deleted 1 key" in toast["message"]
    assert not path.exists() and not TaskStateStore.objects.filter(pk=key.pk).exists()


@pytest.fixture
def immutable():
    """``chattr +i`` on directories (root ignores mode bits): their entries cannot be deleted. Undone after."""
    done = []

    def make(directory: Path) -> Path:
        chattr = shutil.which("chattr")
        if chattr is None or subprocess.run([chattr, "+i", str(directory)], capture_output=True).returncode:
            pytest.skip("chattr +i is not available here")
        done.append(directory)
        return directory

    yield make
    for directory in done:
        subprocess.run([shutil.which("chattr"), "-i", str(directory)], check=True)


def test_a_failed_object_delete_is_a_warning_toast_and_the_row_stays_deleted(
    op, storage, run, task_key_factory, asset_factory, asset_key_factory, immutable
):
    key = task_ref_key(storage, run, task_key_factory, value={"a": 1})
    path = Path(storage.path(key.worker_ref))
    immutable(path.parent)
    confirm = op.get("/keys/task/delete/", {"ids": key.pk}, **HX)
    response = op.post("/keys/task/delete/", {"ids": key.pk, "listed": listed_in(confirm)}, **HX)
    toast = json.loads(response["HX-Trigger"])["toast"]
    assert toast["level"] == "warning"
    assert "could not be deleted" in toast["message"] and "orphaned" in toast["message"]
    assert key.worker_ref in toast["message"]
    assert not TaskStateStore.objects.filter(pk=key.pk).exists() and path.exists()
    event = AuditEvent.objects.order_by("-pk").first()
    assert event.details["objects"]["failed"] == 1

    asset = asset_factory(name="orders")
    ref = write_ref(storage, storage.asset_ref("orders", "w"), 1)
    asset_key_factory(asset, key="w", value=ref_value(ref))
    immutable(Path(storage.path(ref)).parent)
    confirm = op.get(f"/assets/{asset.pk}/delete/", {"keys": "w"}, **HX)
    response = op.post(f"/assets/{asset.pk}/delete/", {"keys": "w", "listed": listed_in(confirm)}, **HX)
    assert json.loads(response["HX-Trigger"])["toast"]["level"] == "warning"
    assert not AssetStateStore.objects.filter(asset=asset).exists()


# Overview ---------------------------------------------------------------------------------------------
def modes(client) -> str:
    html = page(client, "/")
    return unescape(html.split('<ul class="modes">')[1].split("</ul>")[0])


def test_overview_worker_mode_with_storage_and_reading(op, storage, settings):
    text = modes(op)
    assert "worker-side backend stores the values elsewhere" in text
    assert f"Objects are under {storage.base}, gzip-compressed" in text
    assert "deletes a deleted row's object after the row" in text and "reading them is off" in text
    assert "docs/worker-backends.md" in text
    settings.WORKER_BACKEND_READ = True
    assert "key pages show the value read from the object" in modes(op)


def test_overview_worker_mode_without_storage(op, monkeypatch):
    monkeypatch.setenv(BACKEND_ENV, objects.PROVIDER_BACKEND)
    set_common_io(monkeypatch, "path", None)
    text = modes(op)
    assert "names no [common.io] state_store_objectstorage_path" in text and "neither read nor delete" in text
    monkeypatch.setenv(BACKEND_ENV, "company.S3Backend")
    assert "company.S3Backend is not Airflow's object-storage backend" in modes(op)


@pytest.fixture
def backend_module(tmp_path, monkeypatch):
    """A module on sys.path with a backend class (like tests/compat/custom_backend.py, without Airflow)."""
    name = f"custom_backend_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        "import abc\n"
        "INSTANCES = []\n"
        "class Base(abc.ABC):\n"
        "    @abc.abstractmethod\n"
        "    def aget(self, scope, key): ...\n"
        "class KvBackend(Base):\n"
        "    def __init__(self):\n"
        "        INSTANCES.append(self)\n"
        "    def get(self, scope, key): return None\n"
        "    def set(self, scope, key, value): return None\n"
        "    def delete(self, scope, key): return None\n"
        "    def clear(self, scope): return None\n"
        "class Broken:\n"
        "    pass\n"
    )
    (tmp_path / f"{name}_raises.py").write_text("raise RuntimeError('no redis here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_overview_custom_backend_importable_lists_its_methods(op, backend_module, monkeypatch):
    import importlib

    monkeypatch.setenv("AIRFLOW__STATE_STORE__BACKEND", f"{backend_module}.KvBackend")
    text = modes(op)
    assert "custom [state_store] backend keeps state elsewhere" in text and "not in Airflow's metastore" in text
    assert "Garbage collection and every page and API here see only the metastore tables" in text
    assert f"{backend_module}.KvBackend is importable here; it defines get, set, delete, clear." in text
    assert "so these methods are not called" in text and "docs/worker-backends.md" in text
    assert importlib.import_module(backend_module).INSTANCES == []  # imported, never instantiated
    stats = op.get("/api/statestore/v1/stats").json()["backend_modes"][0]
    assert stats["mode"] == "custom" and stats["details"]["methods"] == ["get", "set", "delete", "clear"]
    assert stats["details"]["importable"] is True and stats["details"]["methods_called"] == []


@pytest.mark.parametrize(
    "path, error",
    [
        ("{m}_raises.Backend", "RuntimeError: no redis here"),
        ("no_such_package_here.Backend", "ModuleNotFoundError"),
        ("{m}.INSTANCES", "not a class"),
    ],
)
def test_overview_custom_backend_that_cannot_be_imported(op, backend_module, monkeypatch, path, error):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__BACKEND", path.format(m=backend_module))
    text = modes(op)
    assert "custom [state_store] backend keeps state elsewhere" in text
    assert "cannot be imported in the dashboard" in text and error in text
