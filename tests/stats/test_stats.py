"""Statistics snapshots (stats.snapshots, `state_store_stats`, and the snapshot at the end of `state_store_clean`):
exact figures on a small known dataset, on SQLite and PostgreSQL."""

import io
import json
from datetime import UTC, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connections
from django.utils import timezone

from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import EVERYTHING, Scope
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.core.errors import Invalid
from statestore_admin.records.models import GcRun, StatsSnapshot, StatsSnapshotDag
from statestore_admin.stats import snapshots as stats
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

DONE, FAILED, RUNNING = StatsSnapshot.Status.DONE, StatsSnapshot.Status.FAILED, StatsSnapshot.Status.RUNNING


def raw(row, text):
    """Store ``text`` as the row's value as it is (the factories store json.dumps of a value)."""
    type(row).objects.filter(pk=row.pk).update(value=text)


@pytest.fixture
def dataset(dag_run_factory, task_key_factory, asset_factory, asset_key_factory):
    """Two DAGs, three runs, four tasks, two assets; sizes in bytes are the stored text's (json.dumps of a
    string of n characters: n + 2 bytes)."""
    now = timezone.now()
    a1, a2 = dag_run_factory(dag_id="alpha"), dag_run_factory(dag_id="alpha")
    b1 = dag_run_factory(dag_id="beta")
    old, recent = now - timedelta(days=3), now - timedelta(hours=1)
    keys = {
        "expired": task_key_factory(
            a1, task_id="extract", key="expired", value="a" * 10, expires_at=now - timedelta(hours=1), updated_at=old
        ),  # 12 B
        "soon": task_key_factory(
            a1, task_id="extract", key="soon", value="b" * 100, expires_at=now + timedelta(hours=2), updated_at=old
        ),  # 102 B
        "never": task_key_factory(a1, task_id="extract", key="never", value="c" * 300, updated_at=old),  # 302 B
        "load": task_key_factory(
            a1, task_id="load", key="later", value="d" * 2000, expires_at=now + timedelta(days=5), updated_at=old
        ),  # 2,002 B
        "a2": task_key_factory(
            a2, task_id="extract", key="later", value="e" * 5000, expires_at=now + timedelta(days=5), updated_at=recent
        ),  # 5,002 B
        "x": task_key_factory(b1, task_id="t1", key="x", value="f" * 20000, updated_at=old),  # 20,002 B
        "y": task_key_factory(
            b1, task_id="t1", key="y", value="g" * 70000, expires_at=now + timedelta(days=10), updated_at=old
        ),  # 70,002 B
    }
    for map_index in (0, 1):
        keys[f"m{map_index}"] = task_key_factory(
            a2, task_id="map", map_index=map_index, key="m", expires_at=now + timedelta(days=3), updated_at=old
        )
        raw(keys[f"m{map_index}"], '"éééé"')  # 6 characters, 10 bytes in UTF-8
    one = asset_factory(name="one", uri="s3://bucket/one")
    two = asset_factory(name="two", uri="s3://bucket/two")
    asset_key_factory(one, key="k", value="h" * 50)  # 52 B
    asset_key_factory(one, key="k2", value="i" * 1000)  # 1,002 B
    asset_key_factory(two, key="k", value="j" * 3)  # 5 B
    return {"now": now, "keys": keys, "assets": (one, two), "recent": recent}


def test_exact_figures(dataset):
    snapshot = stats.take_snapshot(actor=Actor.command())
    snapshot.refresh_from_db()
    assert (snapshot.status, snapshot.trigger, snapshot.error) == (DONE, "command", "")
    assert snapshot.taken_at <= snapshot.finished_at
    assert (snapshot.task_keys, snapshot.task_bytes) == (9, 12 + 102 + 302 + 2002 + 5002 + 20002 + 70002 + 10 + 10)
    assert (snapshot.expired, snapshot.expiring, snapshot.never, snapshot.live, snapshot.dags) == (1, 1, 2, 8, 2)
    assert (snapshot.asset_keys, snapshot.asset_bytes, snapshot.assets) == (3, 52 + 1002 + 5, 2)


def test_per_dag_rows(dataset):
    snapshot = stats.take_snapshot(actor=Actor.command())
    rows = {
        r.dag_id: (r.keys, r.bytes, r.expired, r.expiring, r.never, r.runs)
        for r in StatsSnapshotDag.objects.filter(snapshot=snapshot)
    }
    assert rows == {
        "alpha": (7, 12 + 102 + 302 + 2002 + 5002 + 10 + 10, 1, 1, 1, 2),
        "beta": (2, 90004, 0, 0, 1, 1),
    }
    alpha = StatsSnapshotDag.objects.get(snapshot=snapshot, dag_id="alpha")
    assert abs((alpha.last_updated - dataset["recent"]).total_seconds()) < 0.001


def test_expiry_split_is_as_of_taken_at(dataset):
    """A key expiring between the dataset and the snapshot counts as expired: the split uses taken_at."""
    now = dataset["now"]
    run = dataset["keys"]["soon"].dag_run
    TaskStateStore.objects.filter(pk=dataset["keys"]["soon"].pk).update(expires_at=now - timedelta(microseconds=1))
    TaskStateStore.objects.create(
        dag_run=run,
        dag_id=run.dag_id,
        run_id=run.run_id,
        task_id="edge",
        key="at_24h",
        value='"v"',
        updated_at=now,
        expires_at=now + timedelta(hours=24, minutes=5),
    )  # just past the 24 h window: live, not expiring
    snapshot = stats.take_snapshot(actor=Actor.command())
    assert (snapshot.expired, snapshot.expiring, snapshot.never, snapshot.live) == (2, 0, 2, 8)


def test_expiry_histogram_days(dataset):
    snapshot = stats.take_snapshot(actor=Actor.command())
    days = snapshot.expiry_histogram
    first = snapshot.taken_at.astimezone(UTC).date()
    assert days[0]["day"] == first.isoformat()
    assert [d["day"] for d in days] == [(first + timedelta(days=n)).isoformat() for n in range(len(days))]
    assert len(days) in (30, 31)  # 31 unless taken exactly at midnight
    expected = {}
    for name, size in (("soon", 102), ("load", 2002), ("a2", 5002), ("y", 70002), ("m0", 10), ("m1", 10)):
        day = dataset["keys"][name].expires_at.astimezone(UTC).date().isoformat()
        keys, total = expected.get(day, (0, 0))
        expected[day] = (keys + 1, total + size)
    assert {d["day"]: (d["keys"], d["bytes"]) for d in days if d["keys"]} == expected
    assert sum(d["keys"] for d in days) == 6  # not the expired key, not the never-expiring ones


def test_size_histogram(dataset):
    snapshot = stats.take_snapshot(actor=Actor.command())
    by_store = {}
    for row in snapshot.size_histogram:
        by_store.setdefault(row["store"], []).append((row["up_to"], row["keys"]))
    bounds = [64, 256, 1024, 4096, 16384, 65536, None]
    assert by_store["task"] == list(zip(bounds, [3, 1, 1, 1, 1, 1, 1], strict=True))
    assert by_store["asset"] == list(zip(bounds, [2, 0, 1, 0, 0, 0, 0], strict=True))


def test_largest_values_with_their_scope(dataset):
    snapshot = stats.take_snapshot(actor=Actor.command())
    largest = snapshot.largest
    assert [(r["store"], r["size"]) for r in largest] == [
        ("task", 70002),
        ("task", 20002),
        ("task", 5002),
        ("task", 2002),
        ("asset", 1002),
        ("task", 302),
        ("task", 102),
        ("asset", 52),
        ("task", 12),
        ("task", 10),
        ("task", 10),
        ("asset", 5),
    ]
    y = dataset["keys"]["y"]
    assert largest[0] == {
        "store": "task", "key": "y", "size": 70002, "key_id": y.pk, "dag_id": "beta", "run_id": y.run_id,
        "task_id": "t1", "map_index": -1, "asset_id": None, "asset_name": None, "asset_uri": None,
    }  # fmt: skip
    one = dataset["assets"][0]
    assert largest[4] == {
        "store": "asset", "key": "k2", "size": 1002, "key_id": None, "dag_id": None, "run_id": None,
        "task_id": None, "map_index": None, "asset_id": one.pk, "asset_name": "one", "asset_uri": "s3://bucket/one",
    }  # fmt: skip
    assert {(r["task_id"], r["map_index"]) for r in largest if r["size"] == 10} == {("map", 0), ("map", 1)}


def _brute_force_largest(n):
    rows = [(len(r.value.encode()), r.pk) for r in TaskStateStore.objects.all()]
    return sorted(rows, key=lambda r: (-r[0], r[1]))[:n]


@pytest.mark.parametrize("rescan_max", [stats.RESCAN_MAX_KEYS, 0])
def test_largest_values_with_few_candidate_groups_and_ties(dataset, monkeypatch, task_key_factory, rescan_max):
    """With a top of 3: only the groups with the 3 largest maxima are read again (or the whole table past
    RESCAN_MAX_KEYS); the result is the 3 largest values whatever the ties."""
    run = dataset["keys"]["x"].dag_run
    for n in range(4):  # four more groups whose maximum equals beta/t1's second value
        task_key_factory(run, task_id=f"tie{n}", key="k", value="z" * 20000)
    monkeypatch.setattr(stats, "TOP", 3)
    monkeypatch.setattr(stats, "RESCAN_MAX_KEYS", rescan_max)
    snapshot = stats.take_snapshot(actor=Actor.command())
    sizes = [r["size"] for r in snapshot.largest]
    assert sizes == [size for size, _ in _brute_force_largest(3)] == [70002, 20002, 20002]
    assert len(snapshot.top_tasks) <= 6 and len(snapshot.largest) == 3


def test_top_tasks_and_assets(dataset):
    snapshot = stats.take_snapshot(actor=Actor.command())
    assert snapshot.top_tasks == [
        {"dag_id": "alpha", "task_id": "extract", "keys": 4, "bytes": 12 + 102 + 302 + 5002},
        {"dag_id": "beta", "task_id": "t1", "keys": 2, "bytes": 90004},
        {"dag_id": "alpha", "task_id": "map", "keys": 2, "bytes": 20},
        {"dag_id": "alpha", "task_id": "load", "keys": 1, "bytes": 2002},
    ]
    one, two = dataset["assets"]
    assert snapshot.top_assets == [
        {"asset_id": one.pk, "name": "one", "uri": "s3://bucket/one", "keys": 2, "bytes": 1054},
        {"asset_id": two.pk, "name": "two", "uri": "s3://bucket/two", "keys": 1, "bytes": 5},
    ]


def test_top_lists_hold_the_first_by_keys_and_the_first_by_bytes(dataset, monkeypatch):
    monkeypatch.setattr(stats, "TOP", 1)
    snapshot = stats.take_snapshot(actor=Actor.command())
    assert [(t["dag_id"], t["task_id"]) for t in snapshot.top_tasks] == [("alpha", "extract"), ("beta", "t1")]
    assert [a["name"] for a in snapshot.top_assets] == ["one"]


def test_empty_store():
    snapshot = stats.take_snapshot(actor=Actor.command())
    assert (snapshot.status, snapshot.task_keys, snapshot.asset_keys, snapshot.dags, snapshot.largest) == (
        DONE, 0, 0, 0, [],
    )  # fmt: skip
    assert sum(d["keys"] for d in snapshot.expiry_histogram) == 0
    assert [r["keys"] for r in snapshot.size_histogram] == [0] * 14
    assert (snapshot.top_tasks, snapshot.top_assets) == ([], [])


def test_scoped_totals(dataset):
    snapshot = stats.take_snapshot(actor=Actor.command())
    alpha = stats.scoped_totals(snapshot, Scope(dags=("alp*",), assets=()))
    assert (alpha.keys, alpha.bytes, alpha.expired, alpha.expiring, alpha.never, alpha.live) == (
        7, 7440, 1, 1, 1, 6,
    )  # fmt: skip
    none = stats.scoped_totals(snapshot, Scope(dags=("gamma",), assets=None))
    assert (none.keys, none.bytes, none.never) == (0, 0, 0)
    everything = stats.scoped_totals(snapshot, EVERYTHING)
    assert (everything.keys, everything.bytes, everything.never) == (9, snapshot.task_bytes, 2)


def test_failure_leaves_a_failed_snapshot_without_dag_rows(dataset, monkeypatch):
    """A real database error half-way (a table that does not exist), after the per-DAG rows were written."""
    monkeypatch.setattr(AssetStateStore._meta, "db_table", "no_such_table")
    with pytest.raises(Exception, match="no_such_table"):
        stats.take_snapshot(actor=Actor.command())
    snapshot = StatsSnapshot.objects.get()
    assert snapshot.status == FAILED and "no_such_table" in snapshot.error and snapshot.finished_at
    assert not StatsSnapshotDag.objects.exists()
    assert stats.latest_snapshot() is None


def test_interruption_leaves_a_failed_snapshot(dataset, monkeypatch):
    def interrupted(taken_at):
        raise KeyboardInterrupt

    monkeypatch.setattr(stats, "_expiry_histogram", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stats.take_snapshot(actor=Actor.command())
    assert StatsSnapshot.objects.get().status == FAILED and StatsSnapshot.objects.get().error == "Interrupted."


def test_an_abandoned_running_snapshot_is_marked_failed():
    stale = StatsSnapshot.objects.create(taken_at=timezone.now() - timedelta(days=2))
    fresh = StatsSnapshot.objects.create(taken_at=timezone.now() - timedelta(minutes=5))
    stats.take_snapshot(actor=Actor.command())
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert (stale.status, fresh.status) == (FAILED, RUNNING) and "Abandoned" in stale.error


def test_latest_snapshot_and_series(dataset):
    first = stats.take_snapshot(actor=Actor.command())
    TaskStateStore.objects.filter(pk=dataset["keys"]["x"].pk).delete()
    second = stats.take_snapshot(actor=Actor.command())
    StatsSnapshot.objects.create(taken_at=timezone.now(), status=FAILED)
    StatsSnapshot.objects.create(taken_at=timezone.now())  # running
    assert stats.latest_snapshot() == second
    series = stats.snapshot_series(first.taken_at - timedelta(seconds=1), dag_ids=["beta", "gamma"])
    assert [(p["taken_at"], p["task_keys"], p["asset_keys"]) for p in series.points] == [
        (first.taken_at, 9, 3),
        (second.taken_at, 8, 3),
    ]
    assert series.points[0]["task_bytes"] - series.points[1]["task_bytes"] == 20002
    assert series.dags == {
        "beta": [
            {"taken_at": first.taken_at, "keys": 2, "bytes": 90004},
            {"taken_at": second.taken_at, "keys": 1, "bytes": 70002},
        ],
        "gamma": [],
    }
    assert [p["taken_at"] for p in stats.snapshot_series(second.taken_at).points] == [second.taken_at]


def test_prune_snapshots():
    now = timezone.now()
    old = StatsSnapshot.objects.create(taken_at=now - timedelta(days=91), status=DONE)
    StatsSnapshotDag.objects.create(snapshot=old, dag_id="alpha", keys=1)
    kept = StatsSnapshot.objects.create(taken_at=now - timedelta(days=89), status=DONE)
    StatsSnapshotDag.objects.create(snapshot=kept, dag_id="alpha", keys=1)
    assert stats.prune_snapshots(90, batch_size=1) == 1
    assert list(StatsSnapshot.objects.all()) == [kept]
    assert StatsSnapshotDag.objects.get().snapshot == kept
    for bad in (0, -1, True, 10**12):
        with pytest.raises(Invalid):
            stats.prune_snapshots(bad)


# Commands ---------------------------------------------------------------------------------------------
def run(name, *args, **options):
    out, err = io.StringIO(), io.StringIO()
    call_command(name, *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def test_command_prints_a_summary_and_prunes(dataset):
    old = StatsSnapshot.objects.create(taken_at=timezone.now() - timedelta(days=10), status=DONE)
    out, err = run("state_store_stats")
    assert "9 task keys" in out and "2 DAGs" in out and "1 expired" in out and "3 asset keys" in out
    assert StatsSnapshot.objects.filter(pk=old.pk).exists() and not err
    out, _ = run("state_store_stats", keep_days=5)
    assert "Deleted 1 snapshot(s) older than 5 days." in out
    assert not StatsSnapshot.objects.filter(pk=old.pk).exists()


def test_command_json(dataset):
    out, _ = run("state_store_stats", json=True)
    data = json.loads(out)
    assert (data["status"], data["trigger"], data["task_keys"], data["asset_keys"], data["pruned"]) == (
        "done", "command", 9, 3, 0,
    )  # fmt: skip
    assert data["taken_at"].endswith("Z") and len(data["largest"]) == 12
    assert data["id"] == stats.latest_snapshot().pk


def test_command_usage_and_failure(dataset, monkeypatch):
    with pytest.raises(CommandError, match="keep-days") as excinfo:
        run("state_store_stats", keep_days=0)
    assert excinfo.value.returncode == 2 and not StatsSnapshot.objects.exists()
    monkeypatch.setattr(TaskStateStore._meta, "db_table", "no_such_table")
    with pytest.raises(CommandError, match="Statistics snapshot failed") as excinfo:
        run("state_store_stats")
    assert excinfo.value.returncode == 1 and StatsSnapshot.objects.get().status == FAILED


def test_a_snapshot_records_who_took_it(dataset, user_factory):
    command = Actor.command()
    run("state_store_stats")
    run("state_store_clean")
    assert list(StatsSnapshot.objects.order_by("pk").values_list("trigger", "actor")) == [
        ("command", command.name),
        ("gc", command.name),
    ]
    snapshot = stats.take_snapshot(actor=Actor(via="api", user=user_factory("ops")), trigger="page")
    assert StatsSnapshot.objects.get(pk=snapshot.pk).actor == "ops"


def test_state_store_clean_takes_a_snapshot(dataset):
    out, err = run("state_store_clean")
    snapshot = StatsSnapshot.objects.get()
    assert (snapshot.status, snapshot.trigger, snapshot.task_keys, snapshot.expired) == (DONE, "gc", 8, 0)
    assert out.startswith("Deleted 1 expired") and out.count("\n") == 1 and not err
    out, _ = run("state_store_clean", verbosity=3)
    assert f"Statistics snapshot {stats.latest_snapshot().pk} as of" in out
    out, _ = run("state_store_clean", json=True)
    data = json.loads(out)
    assert data["outcome"] == "completed" and data["stats"]["status"] == "done"
    assert data["stats"]["id"] == stats.latest_snapshot().pk


def test_state_store_clean_without_stats(dataset):
    out, _ = run("state_store_clean", no_stats=True)
    assert "Deleted 1 expired" in out and "Statistics" not in out
    run("state_store_clean", dry_run=True)
    assert not StatsSnapshot.objects.exists()
    assert json.loads(run("state_store_clean", no_stats=True, json=True)[0])["stats"] is None


def test_a_failed_snapshot_does_not_fail_gc(dataset, monkeypatch):
    monkeypatch.setattr(AssetStateStore._meta, "db_table", "no_such_table")
    out, err = run("state_store_clean")
    assert "Deleted 1 expired" in out and "Statistics snapshot failed (the GC run itself is done)" in err
    assert GcRun.objects.get().outcome == GcRun.Outcome.COMPLETED
    assert StatsSnapshot.objects.get().status == FAILED


def test_no_snapshot_after_a_locked_run(dataset, monkeypatch, postgres_only):
    """Another run holds GC's advisory lock: no GC, exit 3, and no snapshot (that run takes one)."""
    from statestore_admin import gc

    other = connections.create_connection("airflow")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [gc.ADVISORY_LOCK_KEY])
        with pytest.raises(SystemExit) as excinfo:
            run("state_store_clean")
        assert excinfo.value.code == 3 and not StatsSnapshot.objects.exists()
    finally:
        other.close()


def test_admin_lists_snapshots_read_only(dataset, client, user_factory):
    snapshot = stats.take_snapshot(actor=Actor.command())
    root = user_factory("root", is_staff=True, is_superuser=True)
    client.force_login(root)
    listing = client.get("/admin/state/statssnapshot/")
    assert listing.status_code == 200 and "done" in listing.content.decode()
    page = client.get(f"/admin/state/statssnapshot/{snapshot.pk}/change/")
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    assert client.get("/admin/state/statssnapshot/add/").status_code == 403
    assert client.post(f"/admin/state/statssnapshot/{snapshot.pk}/delete/").status_code == 403
