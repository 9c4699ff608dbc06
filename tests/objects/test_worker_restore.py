"""Undoing a delete of a key whose value was a worker-side object: the reference comes back, the object does
not (it was deleted after its row, Airflow's order), and the restore says so."""

import json

import fsspec
import pytest

from statestore_admin.access.actors import Actor
from statestore_admin.exports import restore as restores
from statestore_admin.state import services
from statestore_admin.state.selectors import TaskAddress
from tests.conftest import BOTH_DATABASES
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
REF_KEY = "__airflow_state_ref__"


@pytest.fixture
def storage(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_PATH", f"file://{tmp_path}/state/")
    return f"file://{tmp_path}/state"


def write_object(ref: str, value) -> None:
    fs = fsspec.filesystem("file")
    path = fs._strip_protocol(ref)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(path, "wb") as f:
        f.write(json.dumps(value).encode())


def test_undoing_a_delete_restores_the_reference_and_reports_its_missing_object(
    storage, dag_run_factory, task_instance_factory, task_key_factory
):
    run = dag_run_factory(dag_id="etl", run_id="r 1")
    task_instance_factory(run, task_id="t")
    ref = f"{storage}/etl/r%201/t/-1/big"
    write_object(ref, {"rows": list(range(50))})
    task_key_factory(run, key="big", task_id="t", value={REF_KEY: ref})
    task_key_factory(run, key="small", task_id="t", value={REF_KEY: '{"a": 1}'})  # inline: no object
    actor = Actor.command()

    outcome = services.clear_task_instance(actor=actor, address=TaskAddress("etl", "r 1", "t"))
    assert outcome.changed == 2 and outcome.objects.deleted == 1 and outcome.objects.failed_count == 0
    assert not fsspec.filesystem("file").exists(ref)

    restored = restores.restore_event(actor=actor, event_id=outcome.event.pk)
    assert restored.restored == 2
    assert restored.dangling == [ref]
    assert "1 restored reference points at a worker-side object that no longer exists" in restored.describe()
    assert ref in restored.describe()


def test_undoing_a_delete_whose_object_exists_again_reports_nothing(
    storage, dag_run_factory, task_instance_factory, task_key_factory
):
    """The object was written again (same deterministic path) before the undo: the reference is whole."""
    run = dag_run_factory(dag_id="etl", run_id="r2")
    task_instance_factory(run, task_id="t")
    ref = f"{storage}/etl/r2/t/-1/k"
    write_object(ref, [1, 2])
    task_key_factory(run, key="k", task_id="t", value={REF_KEY: ref})
    actor = Actor.command()
    outcome = services.delete_task_keys(
        actor=actor, selection=services.TaskSelection(address=TaskAddress("etl", "r2", "t"), keys=("k",))
    )
    assert outcome.objects.deleted == 1
    write_object(ref, [1, 2])  # written again by a worker in the meantime
    restored = restores.restore_event(actor=actor, event_id=outcome.event.pk)
    assert restored.restored == 1 and restored.dangling == []
    assert "no longer exists" not in restored.describe()


def test_the_event_page_names_objects_that_could_not_be_deleted(
    storage, client, operator, dag_run_factory, task_instance_factory, task_key_factory
):
    """A reference outside the configured base path is never deleted: the rows go, the event says which
    object is left behind and why (escaped: references are user data)."""
    run = dag_run_factory(dag_id="etl", run_id="r3")
    task_instance_factory(run, task_id="t")
    inside = f"{storage}/etl/r3/t/-1/a"
    write_object(inside, 1)
    outside = "s3://other-bucket/<b>x</b>"
    task_key_factory(run, key="a", task_id="t", value={REF_KEY: inside})
    task_key_factory(run, key="b", task_id="t", value={REF_KEY: outside})
    outcome = services.clear_task_instance(actor=Actor.command(), address=TaskAddress("etl", "r3", "t"))
    assert (outcome.changed, outcome.objects.deleted, outcome.objects.failed_count) == (2, 1, 1)
    assert outcome.event.details["objects"]["failures"][0]["ref"] == outside
    assert "1 worker-side object could not be deleted and is now orphaned" in outcome.describe("deleted")

    client.force_login(operator)
    page = flat(client.get(f"/audit/{outcome.event.pk}/").content.decode())
    assert "1 deleted after the rows" in page
    assert "1 could not be deleted and is orphaned" in page
    assert "s3://other-bucket/&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    assert "outside the configured state_store_objectstorage_path" in page


def test_a_clear_of_more_rows_than_a_chunk_deletes_every_object(
    object_storage, dag_run_factory, task_instance_factory, task_key_factory
):
    """The objects are found again from the change's audit keys, a chunk at a time; a reference stored with
    compact JSON (another writer's spacing) is one too, and an inline one has no object."""
    from statestore_admin.airflow.models import TaskStateStore
    from statestore_admin.audit import events as audit

    run = dag_run_factory(dag_id="etl", run_id="big")
    task_instance_factory(run, task_id="t")
    refs = []
    for n in range(audit.CHUNK + 7):
        ref = object_storage.task_ref("etl", "big", "t", -1, f"k{n}")
        write_object_at(object_storage, ref, n)
        refs.append(ref)
        task_key_factory(run, key=f"k{n}", task_id="t", value=None)
        stored = {REF_KEY: ref}
        text = json.dumps(stored, separators=(",", ":")) if n % 2 else json.dumps(stored)
        TaskStateStore.objects.filter(dag_run=run, key=f"k{n}").update(value=text)
    task_key_factory(run, key="inline", task_id="t", value={REF_KEY: "[1, 2]"})

    outcome = services.clear_task_instance(actor=Actor.command(), address=TaskAddress("etl", "big", "t"))
    assert outcome.changed == audit.CHUNK + 8
    assert (outcome.objects.deleted, outcome.objects.missing, outcome.objects.failed_count) == (len(refs), 0, 0)
    fs = object_storage.filesystem()
    assert not any(fs.exists(object_storage.path(r)) for r in refs)
    assert outcome.event.details["objects"]["deleted"] == len(refs)


def write_object_at(store, ref, value):
    fs, path = store.filesystem(), store.path(ref)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(path, "wb", compression="gzip") as f:
        f.write(json.dumps(value).encode())
