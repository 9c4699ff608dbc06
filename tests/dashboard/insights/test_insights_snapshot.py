"""Insights on a fresh store (issue 23, item 5): "Take a snapshot now" (the Admin role, no scope, POST with
CSRF) records the pass of ``state_store_stats``; the demo's seeded history; the charts' time labels; and the
plural of the GC runs recorded before the first snapshot."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from statestore_admin import grants
from statestore_admin.access.actors import Actor
from statestore_admin.core.errors import Conflict
from statestore_admin.dashboard.charts import _axis, compact, size, time_labels, value_range
from statestore_admin.records.models import GcRun, StatsSnapshot, StatsSnapshotDag
from statestore_admin.stats import history
from tests.conftest import ALL_PERMS, BOTH_DATABASES
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


@pytest.fixture
def store(dag_run_factory, task_key_factory):
    now = timezone.now()
    for dag_id in ("etl_orders", "ml_training"):
        run = dag_run_factory(dag_id=dag_id)
        task_key_factory(run, task_id="extract", key="cursor", expires_at=now + timedelta(days=2))
        task_key_factory(run, task_id="extract", key="old", expires_at=now - timedelta(days=2))
    return now


@pytest.fixture
def admin(user_factory):
    user = user_factory("insights-admin", perms=ALL_PERMS)
    user.groups.add(Group.objects.get(name="Admin"))
    return type(user).objects.get(pk=user.pk)


def test_an_admin_takes_a_snapshot_from_the_page_and_the_charts_follow(client, admin, store):
    client.force_login(admin)
    page = client.get("/insights/").content.decode()
    assert 'data-testid="insights-empty"' in page and 'data-testid="take-snapshot"' in page
    response = client.post("/insights/snapshot/")
    assert response.status_code == 302 and response["Location"] == "/insights/"
    snapshot = StatsSnapshot.objects.get()
    assert (snapshot.trigger, snapshot.status, snapshot.task_keys, snapshot.expired) == ("page", "done", 4, 2)
    assert snapshot.actor == "insights-admin"  # who took it
    page = client.get("/insights/").content.decode()
    assert 'data-testid="insights-empty"' not in page and f"Statistics snapshot #{snapshot.pk} taken in" in page


def test_taking_a_snapshot_needs_the_permission_no_scope_post_and_csrf(client, viewer, operator, admin, store):
    for user in (viewer, operator):
        client.force_login(user)
        assert 'data-testid="take-snapshot"' not in client.get("/insights/").content.decode()
        assert client.post("/insights/snapshot/").status_code == 403
    grants.grant(admin, dags=["etl_*"], actor=Actor.command())
    client.force_login(admin)
    assert client.post("/insights/snapshot/").status_code == 403
    grants.revoke(admin, everything=True, actor=Actor.command())
    assert client.get("/insights/snapshot/").status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin)
    assert strict.post("/insights/snapshot/").status_code == 403
    assert not StatsSnapshot.objects.exists()


def test_a_second_snapshot_is_refused_while_one_is_being_taken(admin, store):
    StatsSnapshot.objects.create(status=StatsSnapshot.Status.RUNNING)
    with pytest.raises(Conflict):
        history.take_snapshot_for(actor=Actor(via="ui", user=admin))
    assert StatsSnapshot.objects.filter(status="done").count() == 0


def test_the_demo_history_is_days_of_done_snapshots_once(store):
    assert history.seed_history(days=5, actor=Actor.command()) == 6
    done = list(StatsSnapshot.objects.filter(status="done").order_by("taken_at"))
    assert len(done) == 6 and {s.trigger for s in done} == {"demo"}
    assert {s.actor for s in done} == {Actor.command().name}  # demo_setup's: who seeded them
    assert done[-1].task_keys == 4 and done[0].task_keys < done[-1].task_keys
    assert len({s.taken_at.date() for s in done}) == 6
    assert StatsSnapshotDag.objects.filter(snapshot=done[0]).count() == 2
    assert history.seed_history(days=5, actor=Actor.command()) == 0  # a demo with history keeps it
    assert StatsSnapshot.objects.count() == 6


def test_time_labels_tell_the_ticks_apart_for_the_span():
    start = datetime(2026, 12, 1, 22, 14, 5, tzinfo=UTC)
    days = [start + timedelta(days=i) for i in range(5)]
    assert time_labels(days) == ["1 Dec", "2 Dec", "3 Dec", "4 Dec", "5 Dec"]
    hours = [start + timedelta(hours=i) for i in range(5)]
    assert time_labels(hours) == [f"{t.day} Dec {t:%H:%M}" for t in hours]
    seconds = [start + timedelta(seconds=10 * i) for i in range(5)]
    assert time_labels(seconds) == ["22:14:05", "22:14:15", "22:14:25", "22:14:35", "22:14:45"]


def test_gc_runs_before_the_first_snapshot_are_counted_with_the_right_verb(client, viewer, store):
    client.force_login(viewer)
    GcRun.objects.create(
        started_at=store, cutoff=store, batch_size=1000, outcome=GcRun.Outcome.COMPLETED, host="h", pid=1
    )
    page = flat(client.get("/insights/").content.decode())
    assert "1 GC run is recorded in the last 30 days" in page
    GcRun.objects.create(
        started_at=store, cutoff=store, batch_size=1000, outcome=GcRun.Outcome.COMPLETED, host="h", pid=2
    )
    assert "2 GC runs are recorded in the last 30 days" in flat(client.get("/insights/").content.decode())


def test_a_size_axis_has_one_unit_and_a_count_axis_whole_quarters():
    assert _axis(1900, size) == (2048, ["0 B", "0.5 KiB", "1.0 KiB", "1.5 KiB", "2.0 KiB"])
    top, labels = _axis(1, compact)
    assert (top, labels) == (4, ["0", "1", "2", "3", "4"])


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([0.9, 0.9], (0, 1)),  # a flat auc: 0 to 1, not -0.1 to 1.9
        ([0.85, 0.92], (0, 1)),  # a metric that cannot be negative gets no negative tick
        ([0.003], (0, 0.004)),
        ([5, 5], (0, 6)),
        ([1234, 80], (0, 2000)),
        ([-1, 2], (-1.3, 2.3)),  # negatives: the values and a tenth of their span
        ([-3, -3], (-3.3, -2.7)),  # flat and negative: a tenth of its size
    ],
)
def test_a_story_charts_range_follows_its_values(values, expected):
    assert value_range(values) == pytest.approx(expected)


def test_over_airflows_rest_api_the_page_says_no_snapshot_can_be_taken(client, admin, store, settings):
    """Managed Airflow: the snapshots taken before are drawn, but the pass reads Airflow's tables, so the page
    offers no button nor the command, and a POST is refused with the reason, taking nothing."""
    settings.AIRFLOW_API_MODE = True
    client.force_login(admin)
    page = client.get("/insights/").content.decode()
    assert 'data-testid="insights-empty"' in page and 'data-testid="source"' in page
    assert 'data-testid="take-snapshot"' not in page and "state_store_stats</code>, then schedule" not in page
    refused = client.post("/insights/snapshot/", follow=True)
    assert refused.redirect_chain == [("/insights/", 302)]
    assert "statistics need Airflow&#x27;s database" in refused.content.decode()
    assert not StatsSnapshot.objects.exists()
    with pytest.raises(Conflict):
        history.take_snapshot_for(actor=Actor(via="ui", user=admin))
