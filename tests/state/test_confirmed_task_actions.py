"""The pages' confirmed actions on task keys: one call lists the keys (``preview_task_keys``), one acts on
exactly those (``apply_task_keys``), each checking the permission, the scope and the selection itself."""

from datetime import timedelta

import pytest
from django.utils import timezone

from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.core.errors import Forbidden, Invalid, NotFound
from statestore_admin.state import services

from ..conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


@pytest.fixture
def run(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="r1")
    task_instance_factory(run, task_id="t")
    for map_index in (0, 1):
        task_instance_factory(run, task_id="mapped", map_index=map_index)
        task_key_factory(run, task_id="mapped", map_index=map_index, key="a", value=map_index)
    task_key_factory(run, task_id="t", key="job", value={"id": 1})
    task_key_factory(run, task_id="t", key="b", value=2)
    return run


def test_preview_lists_a_task_instance_in_order_and_apply_deletes_exactly_those(run, ui):
    preview = services.preview_task_keys(actor=ui, action="delete", run_pk=run.pk, task_id="t", sample=10)
    assert preview.run == run and [r.key for r in preview.listing.sample] == ["b", "job"]
    outcome = services.apply_task_keys(
        actor=ui, action="delete", token=preview.listing.token, run_pk=run.pk, task_id="t"
    )
    assert outcome.changed == 2 and outcome.event.action == "clear"
    assert sorted(TaskStateStore.objects.values_list("task_id", flat=True)) == ["mapped", "mapped"]


def test_every_map_index_and_a_key_written_since_is_kept(run, ui):
    preview = services.preview_task_keys(actor=ui, action="expire", run_pk=run.pk, task_id="mapped", map_index=None)
    assert preview.listing.count == 2 and preview.selection.all_map_indices
    TaskStateStore.objects.filter(map_index=1).update(updated_at=timezone.now() + timedelta(hours=1))
    outcome = services.apply_task_keys(
        actor=ui, action="expire", token=preview.listing.token, run_pk=run.pk, task_id="mapped", map_index=None
    )
    assert (outcome.changed, outcome.rewritten) == (1, 1)


def test_key_ids_and_the_refusals(run, ui, viewer):
    ids = tuple(TaskStateStore.objects.filter(task_id="t").values_list("pk", flat=True))
    assert services.preview_task_keys(actor=ui, action="expire", ids=ids).listing.count == 2
    with pytest.raises(Invalid):  # no key selected
        services.preview_task_keys(actor=ui, action="expire", ids=())
    with pytest.raises(Invalid):  # no such task instance: the confirmation's error, not a missing page
        services.preview_task_keys(actor=ui, action="delete", run_pk=run.pk, task_id="nope")
    with pytest.raises(NotFound):  # no such run
        services.preview_task_keys(actor=ui, action="delete", run_pk=run.pk + 1000, task_id="t")
    with pytest.raises(Invalid):  # a damaged confirmation changes nothing
        services.apply_task_keys(actor=ui, action="delete", token="x", run_pk=run.pk, task_id="t")
    with pytest.raises(Forbidden):
        services.preview_task_keys(actor=Actor(via="ui", user=viewer), action="delete", ids=ids)
    assert TaskStateStore.objects.count() == 4
