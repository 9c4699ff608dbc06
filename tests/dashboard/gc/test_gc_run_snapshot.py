"""A run from the GC page records a statistics snapshot, as ``state_store_clean`` does after a real run, so
that Insights and the overview follow what it deleted; the preview and the confirmation record none."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.contrib.messages import get_messages
from django.utils import timezone

from statestore_admin.airflow.models import AssetStateStore
from statestore_admin.records.models import GcRun, StatsSnapshot
from tests.conftest import ALL_PERMS, BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
LIMITS = {"cutoff": "now", "batch_size": "2", "max_batches": "10", "time_limit": "10"}


@pytest.fixture
def admin_client(client, user_factory, dag_run_factory, task_key_factory):
    user = user_factory("gc-admin", perms=ALL_PERMS)
    user.groups.add(Group.objects.get(name="Admin"))
    now = timezone.now()
    run = dag_run_factory(dag_id="etl_orders")
    for i in range(3):
        task_key_factory(run, key=f"old-{i}", task_id="extract", expires_at=now - timedelta(days=1, minutes=i))
    task_key_factory(run, key="live", task_id="extract", expires_at=now + timedelta(days=1))
    client.force_login(type(user).objects.get(pk=user.pk))
    return client


def test_a_run_from_the_page_records_a_snapshot_of_what_is_left(admin_client):
    assert admin_client.get("/gc/").status_code == 200
    assert admin_client.get("/gc/run/", LIMITS).status_code == 200  # the confirmation
    assert not StatsSnapshot.objects.exists()
    assert admin_client.post("/gc/run/", LIMITS).status_code == 302
    assert GcRun.objects.get().outcome == GcRun.Outcome.COMPLETED
    snapshot = StatsSnapshot.objects.get()
    assert (snapshot.trigger, snapshot.status, snapshot.task_keys, snapshot.expired) == ("gc", "done", 1, 0)


def test_a_skipped_run_from_the_page_records_a_snapshot_as_the_command_does(admin_client, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__BACKEND", "mycompany.state.RedisBackend")
    admin_client.post("/gc/run/", LIMITS)
    assert GcRun.objects.get().outcome == GcRun.Outcome.SKIPPED
    assert StatsSnapshot.objects.get().task_keys == 4  # nothing deleted


def test_a_failed_snapshot_leaves_the_run_done_and_says_so(admin_client, monkeypatch):
    monkeypatch.setattr(AssetStateStore._meta, "db_table", "no_such_table")
    response = admin_client.post("/gc/run/", LIMITS)
    assert GcRun.objects.get().outcome == GcRun.Outcome.COMPLETED
    assert StatsSnapshot.objects.get().status == StatsSnapshot.Status.FAILED
    # The messages the page shows next (read here: on PostgreSQL the failed read has aborted the test's
    # transaction on the Airflow database, which the next page would need).
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert shown[0].startswith("GC run #") and "Statistics snapshot failed (the GC run itself is done)" in shown[1]
