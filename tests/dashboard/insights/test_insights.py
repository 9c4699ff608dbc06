"""The Insights page (``/insights/``) and its JSON API (``/api/statestore/v1/insights/...``): figures and SVG
from known snapshots, who sees what (a scoped user only their DAGs and assets, store-wide figures hidden,
GC runs only to unscoped task viewers), no value and no out-of-scope id in any answer, escaping of ids in
SVG text, the empty state."""

import re
import xml.etree.ElementTree as ET
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from statestore_admin import grants
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import EVERYTHING, Scope
from statestore_admin.records.models import GcRun, StatsSnapshot, StatsSnapshotDag
from statestore_admin.stats import insights
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

EVIL_DAG = '<script>alert("dag")</script>'
EVIL_KEY = "<img src=x onerror=alert(1)>"
OUT_OF_SCOPE = ("ml_secret", "ml.secret-asset", "ml-secret-task", "ml-secret-key", EVIL_DAG)
VALUE = "SNAPSHOT-NEVER-HAS-VALUES"
BOTH = ("task", "asset")


def _dag_rows(snapshot, rows):
    for dag_id, keys, size, expired in rows:
        StatsSnapshotDag.objects.create(
            snapshot=snapshot, dag_id=dag_id, keys=keys, bytes=size, expired=expired, expiring=1, never=2, runs=1
        )


@pytest.fixture
def world(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    """Airflow state for the scopes (the DAGs a scoped user may see are found in Airflow's table), and three
    snapshots over the last ten days (the middle one failed: never shown), plus GC runs."""
    now = timezone.now()
    for dag_id in ("etl_orders", "ml_secret", EVIL_DAG):
        run = dag_run_factory(dag_id=dag_id)
        task_instance_factory(run, task_id="t")
        task_key_factory(run, task_id="t", key="k", value=VALUE)
    etl_asset = asset_factory(name="etl.orders", uri="s3://etl/orders")
    ml_asset = asset_factory(name="ml.secret-asset", uri="s3://ml/secret")
    asset_key_factory(etl_asset, key="wm", value=VALUE)
    asset_key_factory(ml_asset, key="wm", value=VALUE)

    def snapshot(days_ago, factor, status=StatsSnapshot.Status.DONE):
        taken = now - timedelta(days=days_ago)
        return StatsSnapshot.objects.create(
            taken_at=taken,
            finished_at=taken + timedelta(seconds=42),
            status=status,
            task_keys=1000 * factor,
            task_bytes=64_000 * factor,
            expired=100,
            expiring=50,
            never=200,
            live=900 * factor,
            dags=3,
            asset_keys=30 * factor,
            asset_bytes=3_000 * factor,
            assets=2,
        )

    old = snapshot(9, 1)
    _dag_rows(old, [("etl_orders", 300, 20_000, 10), ("ml_secret", 600, 40_000, 80), (EVIL_DAG, 100, 4_000, 10)])
    failed = snapshot(5, 50, StatsSnapshot.Status.FAILED)
    _dag_rows(failed, [("etl_orders", 99_999, 1, 0)])
    latest = snapshot(1, 2)
    _dag_rows(latest, [("etl_orders", 700, 50_000, 20), ("ml_secret", 1_100, 70_000, 70), (EVIL_DAG, 200, 8_000, 10)])
    day = (now + timedelta(days=1)).date()
    latest.expiry_histogram = [
        {"day": str(day + timedelta(days=i)), "keys": 10 * (i + 1), "bytes": 100 * (i + 1)} for i in range(30)
    ]
    latest.size_histogram = [
        {"store": "task", "up_to": 1024, "keys": 1500},
        {"store": "task", "up_to": 1048576, "keys": 490},
        {"store": "task", "up_to": None, "keys": 10},
        {"store": "asset", "up_to": 1024, "keys": 60},
    ]
    latest.top_tasks = [
        {"dag_id": "ml_secret", "task_id": "ml-secret-task", "keys": 1_100, "bytes": 70_000},
        {"dag_id": "etl_orders", "task_id": "load", "keys": 700, "bytes": 50_000},
        {"dag_id": EVIL_DAG, "task_id": "t", "keys": 200, "bytes": 8_000},
    ]
    latest.top_assets = [
        {"asset_id": ml_asset.pk, "name": "ml.secret-asset", "uri": "s3://ml/secret", "keys": 20, "bytes": 2_000},
        {"asset_id": etl_asset.pk, "name": "etl.orders", "uri": "s3://etl/orders", "keys": 40, "bytes": 4_000},
    ]
    task_fields = {"asset_id": None, "asset_name": None, "asset_uri": None}
    latest.largest = [
        {
            "store": "task",
            "key": "ml-secret-key",
            "size": 9_000,
            "key_id": 1,
            "dag_id": "ml_secret",
            "run_id": "r",
            "task_id": "ml-secret-task",
            "map_index": -1,
            **task_fields,
        },
        {
            "store": "task",
            "key": EVIL_KEY,
            "size": 8_000,
            "key_id": 2,
            "dag_id": "etl_orders",
            "run_id": "r",
            "task_id": "load",
            "map_index": -1,
            **task_fields,
        },
        {
            "store": "asset",
            "key": "etl-asset-key",
            "size": 700,
            "key_id": None,
            "dag_id": None,
            "run_id": None,
            "task_id": None,
            "map_index": None,
            "asset_id": etl_asset.pk,
            "asset_name": "etl.orders",
            "asset_uri": "s3://etl/orders",
        },
    ]
    latest.save()
    gc_old = GcRun.objects.create(
        started_at=now - timedelta(days=20),
        finished_at=now - timedelta(days=20) + timedelta(seconds=30),
        cutoff=now,
        batch_size=1000,
        rows_deleted=111,
        outcome=GcRun.Outcome.COMPLETED,
        host="h",
        pid=1,
        dag_ids=["ml_secret"],
    )
    gc_new = GcRun.objects.create(
        started_at=now - timedelta(days=2),
        finished_at=now - timedelta(days=2) + timedelta(seconds=12),
        cutoff=now,
        batch_size=1000,
        rows_deleted=4321,
        outcome=GcRun.Outcome.PARTIAL,
        host="h",
        pid=1,
    )
    return {"now": now, "old": old, "latest": latest, "gc_old": gc_old, "gc_new": gc_new, "etl_asset": etl_asset}


@pytest.fixture
def scoped(user_factory):
    """A Viewer-like user scoped to DAGs etl_* and assets etl.*."""
    user = user_factory("scoped", perms=["task.view", "asset.view"], unscoped=False)
    team = Group.objects.create(name="etl-team")
    grants.grant(team, dags=["etl_*"], assets=["etl.*"], actor=Actor.command())
    user.groups.add(team)
    return user


def text(response) -> str:
    return response.content.decode()


def svgs(html: str) -> list[ET.Element]:
    """Every SVG of the page, parsed as XML (the template's output must be well-formed)."""
    return [ET.fromstring(s) for s in re.findall(r"<svg\b.*?</svg>", html, flags=re.S)]


# The domain ---------------------------------------------------------------------------------------
def test_latest_figures_unscoped_and_scoped(world):
    figures = insights.latest(scope=EVERYTHING, stores=BOTH)
    assert figures.snapshot == world["latest"]
    assert (figures.task_keys, figures.task_bytes, figures.asset_keys) == (2000, 128_000, 60)
    mine = insights.latest(scope=Scope(dags=("etl_*",), assets=("etl.*",)), stores=BOTH)
    assert (mine.task_keys, mine.task_bytes, mine.expired) == (700, 50_000, 20)
    assert mine.asset_keys is None and mine.asset_bytes is None  # asset totals span assets out of scope


def test_series_is_oldest_first_without_failed_snapshots(world):
    s = insights.series(30, world["now"], scope=EVERYTHING, stores=BOTH)
    assert [p.task_keys for p in s.points] == [1000, 2000]
    assert [p.asset_bytes for p in s.points] == [3000, 6000]
    assert [d.dag_id for d in s.dags] == ["ml_secret", "etl_orders", EVIL_DAG]
    assert s.dags[0].keys == [600, 1100] and s.dags[1].bytes == [20_000, 50_000]
    assert [p.task_keys for p in insights.series(7, world["now"], scope=EVERYTHING, stores=BOTH).points] == [2000]


def test_series_of_a_scoped_user_sums_their_dags(world):
    s = insights.series(30, world["now"], scope=Scope(dags=("etl_*",), assets=()), stores=BOTH)
    assert [(p.task_keys, p.task_bytes, p.asset_keys) for p in s.points] == [(300, 20_000, None), (700, 50_000, None)]
    assert [d.dag_id for d in s.dags] == ["etl_orders"]


def test_a_scopes_sums_are_kept_per_snapshot_and_patterns(world):
    """A scoped user's sums are kept (done snapshots never change), but a new snapshot and other patterns are
    summed anew: never another snapshot's or another scope's figures."""
    etl, ml = Scope(dags=("etl_*",), assets=()), Scope(dags=("ml_*",), assets=())
    assert insights.latest(scope=etl, stores=BOTH).task_keys == 700
    assert [p.task_keys for p in insights.series(30, world["now"], scope=etl, stores=BOTH).points] == [300, 700]
    assert insights.latest(scope=ml, stores=BOTH).task_keys == 1100
    assert [d["dag_id"] for d in insights.top(scope=ml, stores=BOTH).dags_by_keys] == ["ml_secret"]
    newer = StatsSnapshot.objects.create(
        taken_at=world["now"] - timedelta(hours=1), finished_at=world["now"], status=StatsSnapshot.Status.DONE
    )
    _dag_rows(newer, [("etl_orders", 5, 50, 0), ("etl_new", 9, 90, 0), ("ml_secret", 1, 10, 0)])
    assert insights.latest(scope=etl, stores=BOTH).task_keys == 14
    assert [p.task_keys for p in insights.series(30, world["now"], scope=etl, stores=BOTH).points] == [300, 700, 14]
    top = insights.top(scope=etl, stores=BOTH)
    assert [d["dag_id"] for d in top.dags_by_keys] == ["etl_new", "etl_orders"]
    assert insights.latest(scope=ml, stores=BOTH).task_keys == 1


def test_series_without_view_on_task_state_hides_task_figures(world):
    s = insights.series(30, world["now"], scope=EVERYTHING, stores=("asset",))
    assert [(p.task_keys, p.asset_keys) for p in s.points] == [(None, 30), (None, 60)]
    assert s.dags == []


def test_a_long_series_is_thinned_to_the_last_snapshot_of_each_period(world):
    now = world["now"]
    StatsSnapshot.objects.bulk_create(
        StatsSnapshot(taken_at=now - timedelta(minutes=30 * i), finished_at=now, status="done", task_keys=i)
        for i in range(1, 400)
    )
    points = insights.series(90, now, scope=EVERYTHING, stores=BOTH).points
    assert len(points) <= insights.MAX_POINTS
    assert points[-1].task_keys == 1  # the latest is always kept
    assert [p.taken_at for p in points] == sorted(p.taken_at for p in points)


def test_expiry_sizes_and_top(world):
    e = insights.expiry(scope=EVERYTHING, stores=BOTH)
    assert len(e.days) == 30 and e.days[0].keys == 10
    assert e.by_status == {"expired": 100, "expiring": 50, "later": 1800 - 50 - 200, "never": 200}
    assert [(b.store, b.up_to) for b in insights.sizes(scope=EVERYTHING, stores=BOTH)][-1] == ("asset", 1024)
    top = insights.top(scope=EVERYTHING, stores=BOTH)
    assert [d["dag_id"] for d in top.dags_by_keys] == ["ml_secret", "etl_orders", EVIL_DAG]
    assert [t["task_id"] for t in top.tasks_by_bytes] == ["ml-secret-task", "load", "t"]
    assert [a["name"] for a in top.assets_by_keys] == ["etl.orders", "ml.secret-asset"]
    assert [v["key"] for v in top.largest] == ["ml-secret-key", EVIL_KEY, "etl-asset-key"]


def test_a_scoped_user_gets_no_store_wide_distribution_and_filtered_lists(world):
    scope = Scope(dags=("etl_*",), assets=("etl.*",))
    e = insights.expiry(scope=scope, stores=BOTH)
    assert e.days is None and e.by_status["expired"] == 20
    assert insights.sizes(scope=scope, stores=BOTH) == []
    top = insights.top(scope=scope, stores=BOTH)
    assert [d["dag_id"] for d in top.dags_by_keys] == ["etl_orders"]
    assert [t["dag_id"] for t in top.tasks_by_keys] == ["etl_orders"]
    assert [a["name"] for a in top.assets_by_bytes] == ["etl.orders"]
    assert [v["key"] for v in top.largest] == [EVIL_KEY, "etl-asset-key"]


def test_largest_values_only_of_viewable_stores(world):
    top = insights.top(scope=EVERYTHING, stores=("asset",))
    assert [v["store"] for v in top.largest] == ["asset"]
    assert top.dags_by_keys == [] and top.tasks_by_keys == []


def test_gc_history_only_for_unscoped_task_viewers(world):
    now = world["now"]
    assert [r.rows_deleted for r in insights.gc_history(30, now, scope=EVERYTHING, stores=BOTH)] == [111, 4321]
    assert [r.rows_deleted for r in insights.gc_history(7, now, scope=EVERYTHING, stores=BOTH)] == [4321]
    assert insights.gc_history(30, now, scope=Scope(dags=("etl_*",), assets=()), stores=BOTH) is None
    assert insights.gc_history(30, now, scope=EVERYTHING, stores=("asset",)) is None


def test_days_are_validated():
    assert insights.parse_days(None) == insights.parse_days("") == 30
    assert insights.parse_days("7") == 7
    with pytest.raises(insights.Invalid):
        insights.parse_days("365")


# The page -----------------------------------------------------------------------------------------
def test_the_page_draws_every_chart_with_its_numbers(client, viewer, world):
    client.force_login(viewer)
    response = client.get("/insights/")
    assert response.status_code == 200
    html = text(response)
    for chart in (
        "task-keys",
        "task-bytes",
        "asset-keys",
        "asset-bytes",
        "dag-keys",
        "dag-bytes",
        "expiry",
        "status",
        "sizes-task",
        "sizes-asset",
        "dags-by-keys",
        "dags-by-bytes",
        "tasks-by-keys",
        "tasks-by-bytes",
        "assets-by-keys",
        "assets-by-bytes",
        "gc-rows",
        "gc-duration",
    ):
        assert f'data-testid="chart-{chart}"' in html, chart
    parsed = svgs(html)
    assert len(parsed) == 18
    for svg in parsed:
        linked = svg.find(".//a") is not None  # inline SVG: no namespace
        assert svg.get("role") in ("group", "img") and svg.get("aria-label")
        assert not (linked and svg.get("role") == "img")  # an image has no links inside (axe: nested-interactive)
    assert html.count('<details class="chart-numbers">') == 18
    assert 'data-testid="insights-task-keys">2,000<' in html
    # the task keys line: two points, the latest higher (smaller y)
    line = re.search(r'data-testid="chart-task-keys".*?<polyline class="line" points="([^"]+)"', html, re.S)
    (x1, y1), (x2, y2) = (tuple(map(float, p.split(","))) for p in line.group(1).split())
    assert x2 > x1 and y2 < y1
    assert "4.3k" in html  # GC rows deleted, in the GC chart's table
    assert VALUE not in html
    assert 'aria-current="page">30 days' in html


def test_the_range_filter(client, viewer, world):
    client.force_login(viewer)
    html = text(client.get("/insights/?days=7"))
    assert 'aria-current="page">7 days' in html
    rows = re.search(r'data-testid="chart-task-keys".*?<tbody>(.*?)</tbody>', html, re.S).group(1)
    assert rows.count("<tr>") == 1
    assert "111" not in re.search(r'data-testid="chart-gc-rows".*?</figure>', html, re.S).group(0)
    bad = client.get("/insights/?days=365")
    assert bad.status_code == 200 and "Unknown days" in text(bad)


def test_ids_and_keys_are_escaped_in_svg_text(client, viewer, world):
    client.force_login(viewer)
    html = text(client.get("/insights/"))
    assert EVIL_DAG not in html and EVIL_KEY not in html
    assert "&lt;script&gt;alert(&quot;dag&quot;)&lt;/script&gt;" in html
    labels = [t.text for svg in svgs(html) for t in svg.iter("{http://www.w3.org/2000/svg}text") if t.text] + [
        t.text for svg in svgs(html) for t in svg.iter("text") if t.text
    ]
    assert any(label.startswith('<script>alert("dag")') for label in labels)  # drawn as text, not markup


def test_a_scoped_user_sees_only_their_dags(client, scoped, world):
    client.force_login(scoped)
    html = text(client.get("/insights/"))
    for marker in OUT_OF_SCOPE:
        assert marker not in html, marker
    assert "&lt;script&gt;" not in html
    assert "etl_orders" in html and "etl.orders" in html
    assert 'data-testid="insights-task-keys">700<' in html
    for hidden in ("chart-expiry", "chart-sizes-task", "chart-asset-keys", "chart-gc-rows", "insights-asset-keys"):
        assert hidden not in html, hidden
    assert "Garbage collection" not in html


def test_store_figures_need_view_on_the_store(client, user_factory, world):
    client.force_login(user_factory("assets-only", perms=["asset.view"]))
    html = text(client.get("/insights/"))
    assert "chart-asset-keys" in html and "chart-assets-by-keys" in html
    for hidden in (
        "chart-task-keys",
        "chart-dags-by-keys",
        "chart-expiry",
        "chart-gc-rows",
        "ml-secret-key",
        "etl_orders",
    ):
        assert hidden not in html, hidden
    client.force_login(user_factory("nothing"))
    html = text(client.get("/insights/"))
    assert "You may not view task state or asset state" in html and "<svg" not in html


def test_empty_state_without_a_snapshot(client, viewer):
    client.force_login(viewer)
    html = text(client.get("/insights/"))
    assert 'data-testid="insights-empty"' in html
    assert "manage.py state_store_stats" in html and "<svg" not in html


def test_the_nav_links_to_insights(client, viewer, nobody):
    client.force_login(viewer)
    assert 'href="/insights/"' in text(client.get("/"))
    client.force_login(nobody)
    assert 'href="/insights/"' not in text(client.get("/"))


# The API ------------------------------------------------------------------------------------------
API = "/api/statestore/v1/insights/"


def test_api_series_expiry_sizes_top_gc(client, viewer, world):
    client.force_login(viewer)
    series = client.get(API + "series?days=30").json()
    assert series["days"] == 30 and series["snapshot"]["id"] == world["latest"].pk
    assert [p["task_keys"] for p in series["points"]] == [1000, 2000]
    assert series["dags"][0] == {"dag_id": "ml_secret", "keys": [600, 1100], "bytes": [40_000, 70_000]}
    assert series["latest"]["task_keys"] == 2000
    expiry = client.get(API + "expiry").json()
    assert len(expiry["days"]) == 30 and expiry["by_status"]["never"] == 200
    sizes = client.get(API + "sizes").json()
    assert sizes["buckets"][0] == {"store": "task", "up_to": 1024, "keys": 1500}
    top = client.get(API + "top").json()
    assert top["dags_by_bytes"][0]["dag_id"] == "ml_secret" and len(top["largest"]) == 3
    gc = client.get(API + "gc?days=30").json()
    assert [(r["rows_deleted"], r["outcome"]) for r in gc["runs"]] == [(111, "completed"), (4321, "partial")]
    assert gc["runs"][1]["duration_seconds"] == 12
    for body in (series, expiry, sizes, top, gc):
        assert VALUE not in str(body)


def test_api_scoped(client, scoped, world):
    client.force_login(scoped)
    bodies = [client.get(API + name).json() for name in ("series", "expiry", "sizes", "top")]
    for body in bodies:
        for marker in OUT_OF_SCOPE:
            assert marker not in str(body), marker
    series, expiry, sizes, top = bodies
    assert [p["task_keys"] for p in series["points"]] == [300, 700]
    assert series["points"][0]["asset_keys"] is None and series["latest"]["asset_keys"] is None
    assert expiry["days"] is None and expiry["by_status"]["expired"] == 20
    assert sizes["buckets"] == []
    assert [t["dag_id"] for t in top["tasks_by_keys"]] == ["etl_orders"]
    assert client.get(API + "gc").status_code == 403


def test_api_permissions_and_validation(client, user_factory, world):
    assert client.get(API + "series").status_code == 401
    client.force_login(user_factory("nothing"))
    assert client.get(API + "top").status_code == 403
    client.force_login(user_factory("assets-only", perms=["asset.view"]))
    assert client.get(API + "gc").status_code == 403
    top = client.get(API + "top").json()
    assert top["dags_by_keys"] == [] and [v["store"] for v in top["largest"]] == ["asset"]
    assert client.get(API + "series").json()["points"][0]["task_keys"] is None
    bad = client.get(API + "series?days=5")
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"] == ["query", "days"]


def test_api_without_a_snapshot(client, viewer):
    client.force_login(viewer)
    assert client.get(API + "series").json()["points"] == []
    assert client.get(API + "top").json()["snapshot"] is None
    assert client.get(API + "expiry").json() == {"snapshot": None, "days": None, "by_status": None}
    assert client.get(API + "gc").json()["runs"] == []


def test_the_insights_endpoints_are_in_the_schema(client, viewer):
    client.force_login(viewer)
    schema = client.get("/api/schema/?format=json").json()
    for name in ("series", "expiry", "sizes", "top", "gc"):
        assert f"/api/statestore/v1/insights/{name}" in schema["paths"]
