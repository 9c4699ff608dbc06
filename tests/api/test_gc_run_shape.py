"""A recorded GC run has one shape (``gc.run_as_dict``) wherever the API shows it: the overview's latest runs
(``/stats``) and the GC history (``/insights/gc``)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from statestore_admin.records.models import GcRun

from ..conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
KEYS = {
    "started_at", "finished_at", "duration_seconds", "outcome", "rows_deleted", "batches", "batch_size",
    "cutoff", "dag_ids", "message", "host",
}  # fmt: skip


def test_the_overview_and_the_history_show_a_run_alike(client, operator):
    started = timezone.now() - timedelta(hours=1)
    GcRun.objects.create(
        started_at=started,
        finished_at=started + timedelta(seconds=12),
        cutoff=started,
        dag_ids=["etl"],
        batch_size=500,
        rows_deleted=4321,
        batches=9,
        outcome=GcRun.Outcome.PARTIAL,
        message="Stopped after --max-batches 9; expired rows may remain.",
        host="gc-host",
        pid=4242,
    )
    client.force_login(operator)
    (latest,) = client.get("/api/statestore/v1/stats").json()["gc_runs"]
    (history,) = client.get("/api/statestore/v1/insights/gc?days=30").json()["runs"]
    assert latest == history and set(latest) == KEYS
    assert (latest["rows_deleted"], latest["duration_seconds"], latest["dag_ids"]) == (4321, 12, ["etl"])
    assert latest["started_at"].endswith("Z") and latest["cutoff"] == latest["started_at"]
