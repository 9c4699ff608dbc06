"""The overview, the stats API, the DAG list and the largest values on large tables (issue 13): exact counts on
small tables; above ``counting.ESTIMATE_ABOVE`` rows (lowered here) PostgreSQL's estimates or counts stopped at
``COUNT_CAP``, the latest statistics snapshot's exact figures with their age, a scoped user's sums of their DAGs
in the snapshot, and an honest message (with the command to run) where there is no snapshot. No page scans a
large table: the number of queries does not grow with the rows."""

import os
import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from statestore_admin.access.scopes import Scope
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.core import counting
from statestore_admin.records.models import AccessScope, StatsSnapshot, StatsSnapshotDag
from statestore_admin.state import selectors
from statestore_admin.stats import figures as overview_figures
from tests.conftest import ALL_PERMS, BOTH_DATABASES
from tests.html import flat
from tests.objects_helpers import ref_value, write_object

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
STATS = "/api/statestore/v1/stats"


def postgres() -> bool:
    return connections["airflow"].vendor == "postgresql"


@pytest.fixture
def world(dag_run_factory, task_key_factory, asset_factory, asset_key_factory):
    """DAGs etl_a (4 keys: expired, expiring, never, live), etl_b (2 never) and ml_x (3 expired); two assets."""
    now = timezone.now()
    a, b, ml = (dag_run_factory(dag_id=d) for d in ("etl_a", "etl_b", "ml_x"))
    for key, expires in (
        ("k_expired", now - timedelta(hours=1)),
        ("k_expiring", now + timedelta(hours=2)),
        ("k_never", None),
        ("k_live", now + timedelta(days=9)),
    ):
        task_key_factory(a, key=key, expires_at=expires)
    task_key_factory(b, key="k1", expires_at=None)
    task_key_factory(b, key="k2", expires_at=None)
    for n in range(3):
        task_key_factory(ml, key=f"ml{n}", value="x" * 50, expires_at=now - timedelta(days=1))
    etl = asset_factory(name="etl.orders", uri="s3://etl/orders")
    other = asset_factory(name="ml.features", uri="s3://ml/features")
    asset_key_factory(etl, key="watermark", value="2026-11-30")
    asset_key_factory(other, key="cursor", value="42")
    asset_key_factory(other, key="offset", value="7")
    return {"etl_a": a, "etl_b": b, "ml_x": ml, "etl_asset": etl, "ml_asset": other}


@pytest.fixture
def large(monkeypatch):
    """The state tables count as large: PostgreSQL then answers with its estimates (after an ANALYZE, as
    autovacuum would run), SQLite with counts stopped at the cap."""
    monkeypatch.setattr(counting, "ESTIMATE_ABOVE", 2)
    monkeypatch.setattr(counting, "COUNT_CAP", 1)
    monkeypatch.setattr(overview_figures, "COUNT_CAP", 1)

    def analyze():
        if postgres():
            with connections["airflow"].cursor() as cursor:
                cursor.execute("ANALYZE task_state_store")
                cursor.execute("ANALYZE asset_state_store")

    return analyze


@pytest.fixture
def scoped(client, user_factory):
    user = user_factory("etl-op", perms=ALL_PERMS, unscoped=False)
    AccessScope.objects.create(user=user, kind="dag", pattern="etl_*")
    AccessScope.objects.create(user=user, kind="asset", pattern="etl.*")
    client.force_login(user)
    return client


def snapshot(minutes_ago=12, **fields):
    """A finished snapshot with DAG rows etl_a (10 keys), etl_b (5) and ml_x (100), and a largest list."""
    taken_at = timezone.now() - timedelta(minutes=minutes_ago)
    figures = dict(task_keys=115, expired=40, expiring=3, never=12, live=75, dags=3, asset_keys=7, assets=3)
    shot = StatsSnapshot.objects.create(
        taken_at=taken_at, finished_at=taken_at + timedelta(seconds=5), status="done", **{**figures, **fields}
    )
    for dag_id, keys, expired, expiring, never in (
        ("etl_a", 10, 2, 1, 3),
        ("etl_b", 5, 1, 0, 2),
        ("ml_x", 100, 37, 2, 7),
    ):
        StatsSnapshotDag.objects.create(
            snapshot=shot,
            dag_id=dag_id,
            keys=keys,
            bytes=keys * 10,
            expired=expired,
            expiring=expiring,
            never=never,
            runs=1,
            last_updated=taken_at,
        )
    task = dict(dag_id=None, run_id=None, task_id=None, map_index=None, asset_id=None, asset_name=None, asset_uri=None)
    shot.largest = [
        {**task, "store": "task", "key": "big_ml", "size": 9000, "key_id": 1, "dag_id": "ml_x", "task_id": "t"},
        {**task, "store": "task", "key": "big_etl", "size": 8000, "key_id": 2, "dag_id": "etl_a", "task_id": "t"},
        {**task, "store": "asset", "key": "big_asset_ml", "size": 7000, "asset_id": 5, "asset_name": "ml.features"},
        {**task, "store": "asset", "key": "big_asset_etl", "size": 6000, "asset_id": 4, "asset_name": "etl.orders"},
    ]
    shot.save()
    return shot


def figures(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-testid="([a-z-]+)">([^<]*)<', html))


# Small tables: exact, live ----------------------------------------------------------------------------------
def test_small_tables_are_counted_exactly_without_a_snapshot(client, operator, world):
    client.force_login(operator)
    html = client.get("/").content.decode()
    assert figures(html) == {
        "task-keys": "9",
        "asset-keys": "3",
        "expired-keys": "4",
        "expiring-keys": "1",
        "never-keys": "3",
    }
    assert "≈" not in html and "data-snapshot" not in html and "state_store_stats" not in html
    body = client.get(STATS).json()
    assert (body["task_keys"], body["expired"], body["expiring_24h"], body["never_expire"]) == (9, 4, 1, 3)
    assert not any(body[f"{n}_estimated"] for n in ("task_keys", "asset_keys", "expired", "expiring_24h"))
    assert set(body["how"].values()) == {"exact"} and body["snapshot"] is None
    dags = client.get("/dags/").content.decode()
    assert "etl_a" in dags and "snapshot" not in dags
    largest = client.get("/overview/largest/", **HX).content.decode()
    assert "ml0" in largest and "snapshot" not in largest  # live: the tables are small


def test_small_tables_show_the_snapshot_beside_the_live_figures(client, operator, world):
    snapshot(minutes_ago=12)
    client.force_login(operator)
    html = client.get("/").content.decode()
    assert figures(html)["task-keys"] == "9"  # live and exact
    # The snapshot's line says what changed since: 9 keys now, 115 then
    assert re.search(r'data-snapshot="task-keys">\u2212106 since the snapshot <time[^>]*>12\xa0minutes ago', html)
    body = client.get(STATS).json()
    assert body["snapshot"]["figures"] == {
        "task_keys": 115,
        "asset_keys": 7,
        "expired": 40,
        "expiring_24h": 3,
        "never_expire": 12,
    }
    assert 12 * 60 - 5 <= body["snapshot"]["age_seconds"] <= 12 * 60 + 60


LIVE = dict(task_keys=9, expired=4, expiring=1, never=3, asset_keys=3)  # the world's figures, counted live


def snapshot_lines(html: str) -> dict[str, str]:
    return {
        name: flat(re.sub(r"<[^>]+>", "", text)).strip()
        for name, text in re.findall(r'data-snapshot="([a-z-]+)">(.*?)</div>', html, re.S)
    }


def test_a_fresh_snapshot_equal_to_the_live_figures_adds_no_line(client, operator, world):
    snapshot(minutes_ago=12, **LIVE)
    client.force_login(operator)
    html = client.get("/").content.decode()
    assert figures(html)["task-keys"] == "9" and snapshot_lines(html) == {}


def test_a_fresh_snapshot_shows_only_the_figures_that_changed(client, operator, world):
    snapshot(minutes_ago=12, **{**LIVE, "task_keys": 9 - 120, "never": 5})
    client.force_login(operator)
    assert snapshot_lines(client.get("/").content.decode()) == {
        "task-keys": "+120 since the snapshot 12\xa0minutes ago",
        "never-keys": "\u22122 since the snapshot 12\xa0minutes ago",
    }


def test_an_old_snapshot_is_shown_even_when_nothing_changed(client, operator, world):
    assert overview_figures.SNAPSHOT_OLD_AFTER == timedelta(hours=1)  # the hourly schedule of state_store_stats
    snapshot(minutes_ago=180, **{**LIVE, "expired": 1})
    client.force_login(operator)
    lines = snapshot_lines(client.get("/").content.decode())
    assert lines["task-keys"] == "unchanged since the snapshot 3\xa0hours ago"
    assert lines["expired-keys"] == "+3 since the snapshot 3\xa0hours ago"
    assert set(lines) == {"task-keys", "asset-keys", "expired-keys", "expiring-keys", "never-keys"}


# Large tables ----------------------------------------------------------------------------------------------
def test_large_tables_are_estimated_and_flagged(client, operator, world, large, monkeypatch):
    monkeypatch.setattr(counting, "COUNT_CAP", 0)
    monkeypatch.setattr(overview_figures, "COUNT_CAP", 0)  # no capped count to make an estimate exact
    large()
    client.force_login(operator)
    body = client.get(STATS).json()
    for name in ("task_keys", "asset_keys", "expired", "expiring_24h", "never_expire"):
        assert body[f"{name}_estimated"] is True, name
    if postgres():  # the planner's estimates (pg_class.reltuples after the ANALYZE, EXPLAIN's row estimates)
        assert body["how"]["task_keys"] == "estimated" and body["task_keys"] == 9
        assert set(body["how"].values()) == {"estimated"}
    else:  # SQLite has no planner statistics: counts stopped at the cap
        assert body["how"]["task_keys"] == "capped" and body["task_keys"] == 2
        assert set(body["how"].values()) == {"capped"}
    html = client.get("/").content.decode()
    shown = figures(html)
    assert shown["task-keys"] == ("≈ 9" if postgres() else "more than 2")
    assert all(value.startswith(("≈ ", "more than ")) for value in shown.values()), shown
    assert "No statistics snapshot has been taken yet" in html and "python manage.py state_store_stats" in html


def test_large_tables_show_the_snapshots_exact_figures_with_their_age(client, operator, world, large):
    large()
    snapshot(minutes_ago=12)
    client.force_login(operator)
    html = client.get("/").content.decode()
    assert re.search(r'data-snapshot="task-keys">exact 115 as of <time[^>]*>12\xa0minutes ago', html)
    assert re.search(r'data-snapshot="expired-keys">exact 40 as of', html)
    assert "No statistics snapshot" not in html and "taken <time" in html
    body = client.get(STATS).json()
    assert body["task_keys_estimated"] is True and body["snapshot"]["figures"]["task_keys"] == 115


def test_a_scoped_user_gets_the_sums_of_their_dags_in_the_snapshot(scoped, world, large):
    large()
    snapshot(minutes_ago=30)
    body = scoped.get(STATS).json()
    assert (body["task_keys"], body["expired"], body["expiring_24h"], body["never_expire"]) == (15, 3, 1, 5)
    assert body["how"]["task_keys"] == "snapshot" and body["task_keys_estimated"] is False
    assert body["snapshot"]["figures"]["task_keys"] == 15
    assert body["snapshot"]["figures"]["asset_keys"] is None  # a snapshot does not split asset keys by asset
    assert body["gc_runs"] is None
    assert body["asset_keys"] == 1 and body["how"]["asset_keys"] == "exact"  # etl.orders: under the cap
    html = scoped.get("/").content.decode()
    assert figures(html)["task-keys"] == "15"
    assert re.search(r'data-snapshot="task-keys">exact as of <time[^>]*>30\xa0minutes ago', html)
    # nothing of the whole deployment's 115 keys (a page's timestamps may hold those digits: read the text)
    assert not re.search(r">[^<]*\b115\b", html) and "ml_x" not in html


def test_a_scoped_user_without_a_snapshot_gets_capped_counts(scoped, world, large):
    large()
    body = scoped.get(STATS).json()
    assert body["snapshot"] is None
    assert (body["task_keys"], body["how"]["task_keys"]) == (1, "capped")  # 6 keys in etl_*: more than 1
    assert (body["expiring_24h"], body["how"]["expiring_24h"]) == (1, "exact")
    html = scoped.get("/").content.decode()
    assert figures(html)["task-keys"] == "more than 1" and "python manage.py state_store_stats" in html


def test_a_scoped_users_asset_count_on_a_large_table_is_kept_per_set_of_patterns(
    scoped, client, user_factory, world, large, asset_factory, asset_key_factory
):
    """The scope's asset keys on a large asset table: counted (up to the cap), then reused for
    ``DAG_IDS_CACHE_SECONDS`` by every user with the same asset patterns; another scope counts its own."""
    large()
    exact = (1, "exact")  # etl.orders: watermark
    shown = lambda body: (body["asset_keys"], body["how"]["asset_keys"])  # noqa: E731
    assert shown(scoped.get(STATS).json()) == exact
    asset_key_factory(world["etl_asset"], key="second", value="2")
    assert shown(scoped.get(STATS).json()) == exact  # the kept figure, not yet "more than 1"
    twin = user_factory("etl-twin", perms=ALL_PERMS, unscoped=False)
    AccessScope.objects.create(user=twin, kind="asset", pattern="etl.*")
    client.force_login(twin)
    assert shown(client.get(STATS).json()) == exact  # same patterns, same figure
    ml = user_factory("ml-op", perms=ALL_PERMS, unscoped=False)
    AccessScope.objects.create(user=ml, kind="asset", pattern="ml.*")
    client.force_login(ml)
    assert shown(client.get(STATS).json()) == (1, "capped")  # ml.features: 2 keys, more than the cap of 1
    cache.clear()  # the figure's time is up
    assert shown(scoped.get(STATS).json()) == (1, "capped")  # now 2 keys: more than 1


# Largest values ---------------------------------------------------------------------------------------------
def test_largest_values_of_large_tables_need_a_snapshot(client, operator, world, large):
    large()
    client.force_login(operator)
    with CaptureQueriesContext(connections["airflow"]) as queries:
        html = flat(client.get("/overview/largest/", **HX).content.decode())
    assert "no statistics snapshot has been taken yet" in html and "python manage.py state_store_stats" in html
    assert "ml0" not in html
    assert not any("LENGTH" in q["sql"].upper() for q in queries.captured_queries)  # no scan for sizes


def test_largest_values_of_large_tables_come_from_the_snapshot(client, user_factory, scoped, world, large):
    large()
    snapshot(minutes_ago=5)
    html = scoped.get("/overview/largest/", **HX).content.decode()
    assert "big_etl" in html and "big_asset_etl" in html and "5\xa0minutes ago" in html
    assert "big_ml" not in html and "big_asset_ml" not in html  # out of the scope
    client.force_login(user_factory("tasks", perms=["task.view"]))
    html = client.get("/overview/largest/", **HX).content.decode()
    assert "big_ml" in html and "big_etl" in html and "big_asset" not in html  # no view on asset state
    assert html.index("big_ml") < html.index("big_etl")


def test_largest_values_of_large_tables_rank_a_read_object_among_the_snapshots(
    client, operator, world, large, object_storage, read_objects, task_key_factory
):
    """The snapshot's largest rows hold no worker-side object's size: the objects the dashboard read join them,
    ranked by the row plus the object."""
    store = object_storage
    run = world["etl_a"]
    ref = write_object(store, store.task_ref(run.dag_id, run.run_id, "t", -1, "offloaded"), os.urandom(8000).hex())
    row = task_key_factory(run, task_id="t", key="offloaded", value=ref_value(ref))
    large()
    snapshot(minutes_ago=5)
    client.force_login(operator)
    html = client.get("/overview/largest/", **HX).content.decode()
    assert html.index("big_ml") < html.index("big_etl") and "offloaded" not in html  # never read: unknown
    client.get(f"/keys/task/{row.pk}/")  # reads it: about 16 KB, gzip-compressed as stored
    html = client.get("/overview/largest/", **HX).content.decode()
    assert html.index("offloaded") < html.index("big_ml") < html.index("big_etl")
    assert "By stored size" in html


# The DAG list -----------------------------------------------------------------------------------------------
def test_dag_list_of_a_large_table_shows_the_snapshots_figures(
    client, operator, world, large, dag_run_factory, task_key_factory
):
    large()
    task_key_factory(dag_run_factory(dag_id="new_dag"), key="k")
    client.force_login(operator)
    html = client.get("/dags/").content.decode()
    assert "no statistics snapshot has been taken yet" in html and "python manage.py state_store_stats" in html
    assert "etl_a" in html and "new_dag" in html
    snapshot(minutes_ago=3)
    html = client.get("/dags/").content.decode()
    assert "Figures from the statistics snapshot taken" in html and "3\xa0minutes ago" in html
    row = html.split('href="/dags/ml_x/">ml_x</a></td>')[1].split("</tr>")[0]
    assert '<td class="num">100</td>' in row and ">37<" in row  # the snapshot's, not today's 3
    row = html.split('href="/dags/new_dag/">new_dag</a></td>')[1].split("</tr>")[0]
    assert "not in the last snapshot" in row


def test_a_scoped_dag_list_scans_under_the_patterns_prefixes(monkeypatch, dag_run_factory, task_key_factory):
    for dag_id in ("a_x", "etl_1", "etl_2", "etl_3", "etl_4", "etl_5", "etlx", "ml_1", "z_etl_9"):
        task_key_factory(dag_run_factory(dag_id=dag_id), key="k")
    monkeypatch.setattr(selectors.dags, "_SCAN_CHUNK", 2)
    now = timezone.now()
    scope = Scope(dags=("etl_*", "ml_1"))
    first = selectors.dags_with_state(now, size=3, scope=scope).page
    assert [d.dag_id for d in first.items] == ["etl_1", "etl_2", "etl_3"] and first.next_cursor
    second = selectors.dags_with_state(now, first.next_cursor, size=3, scope=scope).page
    assert [d.dag_id for d in second.items] == ["etl_4", "etl_5", "ml_1"] and second.next_cursor is None
    by_prefix = selectors.dags_with_state(now, prefix="etl_4", scope=scope).page
    assert [d.dag_id for d in by_prefix.items] == ["etl_4"]
    assert selectors.dags_with_state(now, prefix="ml", scope=Scope(dags=("etl_*",))).page.items == []
    anywhere = selectors.dags_with_state(now, scope=Scope(dags=("*etl_?",))).page
    assert [d.dag_id for d in anywhere.items] == ["etl_1", "etl_2", "etl_3", "etl_4", "etl_5", "z_etl_9"]


# Bounded queries --------------------------------------------------------------------------------------------
def _queries(client, url):
    with (
        CaptureQueriesContext(connections["default"]) as default,
        CaptureQueriesContext(connections["airflow"]) as airflow,
    ):
        assert client.get(url, **HX).status_code == 200
    return len(default), len(airflow)


@pytest.mark.parametrize("user", ["operator", "scoped"])
@pytest.mark.parametrize("url", ["/", STATS, "/dags/", "/overview/largest/"])
def test_queries_on_large_tables_do_not_grow_with_rows(
    client,
    user_factory,
    dag_run_factory,
    task_key_factory,
    asset_factory,
    asset_key_factory,
    large,
    monkeypatch,
    url,
    user,
):
    """With a snapshot, the same number of queries with 3 and with 60 of everything."""
    monkeypatch.setattr(counting, "COUNT_CAP", 0)
    monkeypatch.setattr(overview_figures, "COUNT_CAP", 0)  # PostgreSQL: the estimate alone, never a capped count too
    who = user_factory(user, perms=ALL_PERMS, unscoped=user != "scoped")
    if user == "scoped":
        AccessScope.objects.create(user=who, kind="dag", pattern="etl_*")
    client.force_login(who)
    snapshot()
    counts = []
    for size in (3, 60):
        TaskStateStore.objects.all().delete()
        AssetStateStore.objects.all().delete()
        for n in range(size):
            run = dag_run_factory(dag_id=f"etl_{size}_{n}")
            task_key_factory(run, key="k", expires_at=timezone.now() - timedelta(hours=n % 2))
            asset_key_factory(asset_factory(), key=f"a{n}")
        large()
        cache.clear()  # both passes cold: a scoped user's sums of the snapshot are kept after the first
        counts.append(_queries(client, url))
    assert counts[0] == counts[1], counts
