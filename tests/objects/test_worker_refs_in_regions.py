"""Worker-side objects of keys in Airflow 3.4's dynamic regions: common.io 1.11 with task SDK 1.4 puts a key in
a region under ``<base>/<dag>/<run>/region=<region_id>/<task>/<region_index>/<key>``; the dashboard expects that
path for the row, deletes the object after the row, and the orphans report maps such a path back to its key."""

import pytest

from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.objects import orphans
from statestore_admin.objects import store as objects
from statestore_admin.state import services
from statestore_admin.state.selectors import TaskAddress
from tests.conftest import BOTH_DATABASES
from tests.objects_helpers import file_storage, object_exists, ref_value, write_object

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
SYSTEM = Actor.command()


@pytest.fixture
def store(tmp_path, monkeypatch):
    return file_storage(tmp_path, monkeypatch)


@pytest.fixture
def iterations(store, dag_run_factory, task_instance_factory, task_key_factory, region_factory):
    """Three iterations of a loop, each with its mapped expansion of ``refine.work`` at position 0, each
    iteration's key ``cursor`` held in an object at the region's path."""
    run = dag_run_factory(dag_id="loops", run_id="manual__1")
    loop = region_factory(run, "refine")
    found = []
    for iteration in range(3):
        expansion = region_factory(run, "refine.work", parent=loop, parent_index=iteration)
        task_instance_factory(run, task_id="refine.work", map_index=0, region_id=expansion.pk)
        ref = store.task_ref("loops", "manual__1", "refine.work", 0, "cursor", expansion.pk)
        write_object(store, ref, {"iteration": iteration})
        row = task_key_factory(
            run, task_id="refine.work", map_index=0, region_id=expansion.pk, key="cursor", value=ref_value(ref)
        )
        found.append((expansion, ref, row))
    return run, found


def test_the_path_of_a_key_in_a_region_is_the_providers(iterations, store):
    _, found = iterations
    expansion, ref, row = found[1]
    assert f"/loops/manual__1/region={expansion.pk}/refine.work/0/cursor.gz" in ref
    assert store.task_ref("loops", "manual__1", "refine.work", 0, "cursor") != ref  # outside any region
    reference = objects.reference_of_task_row(row, store)
    assert reference is not None and reference.is_object and reference.expected == (ref,) and reference.risk is None


def test_deleting_one_iterations_key_deletes_its_object_only(iterations, store):
    run, found = iterations
    expansion, ref, _ = found[1]
    selection = services.TaskSelection.of_instance(TaskAddress("loops", "manual__1", "refine.work", 0, expansion.pk))
    outcome = services.delete_task_keys(actor=SYSTEM, selection=selection)
    assert outcome.changed == 1 and outcome.event.region_id == expansion.pk
    assert not object_exists(store, ref)
    assert [object_exists(store, r) for _, r, _ in (found[0], found[2])] == [True, True]
    left = set(TaskStateStore.objects.values_list("region_id", flat=True))
    assert left == {found[0][0].pk, found[2][0].pk}


def test_an_orphan_in_a_region_is_described_by_its_coordinates(iterations, store):
    _, found = iterations
    expansion = found[2][0]
    orphan = write_object(store, store.task_ref("loops", "manual__1", "refine.work", 0, "gone", expansion.pk), 1)
    report = orphans.report(sample=100, actor=SYSTEM)
    assert {o["ref"] for o in report.orphans.sample} == {orphan}  # the three referenced objects are not orphans
    (described,) = report.orphans.sample
    assert described["key"] == "gone"
    assert described["scope"] == {
        "dag_id": "loops",
        "run_id": "manual__1",
        "task_id": "refine.work",
        "map_index": 0,
        "region_id": str(expansion.pk),
    }
