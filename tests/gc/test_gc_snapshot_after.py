"""``gc.snapshot_after``: the statistics snapshot after a real run, for every face: after the outcomes in
``gc.SNAPSHOT_AFTER`` only."""

import pytest
from django.utils import timezone

from statestore_admin import gc
from statestore_admin.access.actors import Actor
from statestore_admin.records.models import GcRun, StatsSnapshot

from ..conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


def result(outcome: str) -> gc.GcResult:
    return gc.GcResult(plan=gc.GcPlan(cutoff=timezone.now()), backend=gc.backend_status(), outcome=outcome)


@pytest.mark.parametrize("outcome", GcRun.Outcome.values)
def test_a_snapshot_follows_the_outcomes_that_did_their_work_only(outcome):
    taken = gc.snapshot_after(result(outcome), actor=Actor.command(via="gc"))
    if outcome in gc.SNAPSHOT_AFTER:
        assert taken.snapshot == StatsSnapshot.objects.get() and taken.snapshot.trigger == "gc"
        assert taken.as_dict() == {
            "id": taken.snapshot.pk,
            "status": "done",
            "duration_seconds": taken.snapshot.duration_seconds,
        }
    else:
        assert taken is None and not StatsSnapshot.objects.exists()


def test_the_outcome_sets():
    assert set(gc.SNAPSHOT_AFTER) == {"completed", "partial", "skipped"}
    assert set(gc.SUCCESSFUL) == {"completed", "partial"}
    assert set(gc.STOPPED) == {"locked", "interrupted"}
    assert set(gc.WITHOUT_DELETING) == {"skipped", "locked"}
