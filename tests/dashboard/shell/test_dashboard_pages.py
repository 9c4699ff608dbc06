"""The dashboard's pages: login, permissions, content, escaping, pagination and bounded queries."""

import json
from datetime import timedelta

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.records.models import GcRun
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
XSS = "<script>alert(1)</script>"


@pytest.fixture
def world(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    """A mapped task, plain tasks, an XSS key and value, a worker ref, an active and an inactive asset."""
    now = timezone.now()
    run = dag_run_factory(dag_id="etl", run_id="scheduled__2026-11-29T00:00:00+00:00", state="running")
    for map_index in (0, 1, 2):
        task_instance_factory(run, task_id="train", map_index=map_index)
        task_key_factory(
            run,
            task_id="train",
            map_index=map_index,
            key="checkpoint",
            value={"epoch": map_index},
            expires_at=now + timedelta(days=30),
        )
    task_instance_factory(run, task_id="submit")
    task_key_factory(run, task_id="submit", key="job_id", value="spark-1", expires_at=None)
    task_key_factory(run, task_id="submit", key="old", value=1, expires_at=now - timedelta(hours=1))
    task_key_factory(run, task_id="submit", key="soon", value=2, expires_at=now + timedelta(minutes=30))
    xss = task_key_factory(run, task_id="submit", key=XSS, value=XSS, expires_at=None)
    task_key_factory(run, task_id="submit", key="ref", value={"__airflow_state_ref__": "s3://bucket/ref"})
    active = asset_factory(name="orders", uri="s3://warehouse/orders")
    asset_key_factory(
        active,
        key="watermark",
        value="2026-11-30",
        kind="task",
        dag_id="etl",
        run_id=run.run_id,
        task_id="submit",
        map_index=-1,
    )
    asset_key_factory(active, key=XSS, value=XSS, kind="api")
    inactive = asset_factory(name="legacy", uri="file:///legacy.csv", active=False)
    asset_key_factory(inactive, key="last_export", value="2026-10-01", kind="watcher")
    return {"run": run, "xss": xss, "active": active, "inactive": inactive}


def pages(world):
    run, active = world["run"], world["active"]
    return [
        "/",
        "/overview/largest/",
        "/dags/",
        "/dags/etl/",
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/tasks/train/?map_index=1",
        "/assets/",
        f"/assets/{active.pk}/",
        f"/assets/{active.pk}/key/?key=watermark",
        "/search/?key=job",
        f"/keys/task/{world['xss'].pk}/",
    ]


def test_every_page_needs_a_login(client, world):
    for url in pages(world):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), url


def test_every_page_renders_for_an_operator(client, operator, world):
    client.force_login(operator)
    for url in pages(world):
        assert client.get(url).status_code == 200, url


def test_users_without_view_permission_get_403(client, nobody, world):
    client.force_login(nobody)
    run, active = world["run"], world["active"]
    for url in [
        "/dags/",
        "/dags/etl/",
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/tasks/train/",
        "/assets/",
        f"/assets/{active.pk}/",
        f"/keys/task/{world['xss'].pk}/",
        "/overview/largest/",
    ]:
        assert client.get(url).status_code == 403, url
    home = client.get("/").content.decode()
    assert "may not view task state" in home and 'href="/dags/"' not in home
    search = client.get("/search/?key=job").content.decode()
    assert "job_id" not in search and "Task state" not in search


def test_search_shows_only_the_stores_a_user_may_view(client, user_factory, world):
    client.force_login(user_factory("assets_only", perms=["asset.view"]))
    html = client.get("/search/?key=a").content.decode()
    assert "watermark" in html and "job_id" not in html


def test_viewer_sees_no_action_buttons(client, viewer, world):
    client.force_login(viewer)
    for url in [
        f"/runs/{world['run'].pk}/",
        f"/runs/{world['run'].pk}/tasks/submit/",
        f"/assets/{world['active'].pk}/",
        f"/keys/task/{world['xss'].pk}/",
    ]:
        html = client.get(url).content.decode()
        for label in (">Edit<", ">Delete<", "Expire now", "Clear all", "Add key", 'name="ids"'):
            assert label not in html, (url, label)


@pytest.mark.parametrize("page", ["run", "task", "key", "search", "asset", "asset_key", "largest"])
def test_keys_and_values_are_escaped(client, operator, world, page):
    client.force_login(operator)
    run, active = world["run"], world["active"]
    url = {
        "run": f"/runs/{run.pk}/",
        "task": f"/runs/{run.pk}/tasks/submit/",
        "key": f"/keys/task/{world['xss'].pk}/",
        "search": "/search/?key=script",
        "asset": f"/assets/{active.pk}/",
        "largest": "/overview/largest/",
        "asset_key": f"/assets/{active.pk}/key/?key=%3Cscript%3Ealert(1)%3C/script%3E",
    }[page]
    html = client.get(url).content.decode()
    assert XSS not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_overview_figures_and_configuration(client, operator, world, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS", "7")
    GcRun.objects.create(
        started_at=timezone.now(),
        cutoff=timezone.now(),
        batch_size=0,
        rows_deleted=42,
        outcome="completed",
        host="gc-host",
        pid=1,
    )
    client.force_login(operator)
    html = client.get("/").content.decode()
    assert 'data-testid="task-keys">8<' in html and 'data-testid="asset-keys">3<' in html
    assert 'data-testid="expired-keys">1<' in html and 'data-testid="expiring-keys">1<' in html
    assert 'data-testid="never-keys">3<' in html
    assert "environment variable AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS" in html.replace("<wbr>", "")
    assert "gc-host" in html and ">42<" in html
    assert "State lives in these tables" in html


def test_overview_explains_custom_and_worker_backends(client, operator, world, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__BACKEND", "company.RedisBackend")
    monkeypatch.setenv("AIRFLOW__WORKERS__STATE_STORE_BACKEND", "company.S3Backend")
    client.force_login(operator)
    html = client.get("/").content.decode()
    assert "custom [state_store] backend keeps state elsewhere" in html
    assert "worker-side backend stores the values elsewhere" in html


def test_overview_shows_an_invalid_option_instead_of_failing(client, operator, world, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS", "abc")
    client.force_login(operator)
    response = client.get("/")
    assert response.status_code == 200
    assert "[state_store] default_retention_days" in response.content.decode()


def test_run_page_groups_by_task_and_map_index(client, operator, world):
    """One table a task, a mapped task's with a map index column whose links name the task instance."""
    client.force_login(operator)
    html = client.get(f"/runs/{world['run'].pk}/").content.decode()
    assert html.index(">submit<") < html.index(">train<")
    train = html[html.index('<h2 id="task-2"><a href') :]  # the second task's section
    assert ">train</a>" in train[:200] and train.count("<table") == 1 and "<th>Map index</th>" in train
    for map_index in (0, 1, 2):
        assert f">train[{map_index}]</a>" in train
    assert "badge-expired" in html and "badge-expiring" in html and "badge-never" in html and "worker ref" in html


def test_task_instance_page_lists_its_map_indexes(client, operator, world):
    client.force_login(operator)
    html = client.get(f"/runs/{world['run'].pk}/tasks/train/?map_index=1").content.decode()
    assert 'href="?map_index=0"' in html and 'aria-current="page">1<' in html
    assert "{&quot;epoch&quot;: 1}" in html and "{&quot;epoch&quot;: 0}" not in html
    assert "Clear all map indexes" in html


def test_asset_pages_warn_about_inactive_assets_and_link_writers(client, operator, world):
    client.force_login(operator)
    assert "deletes the state of inactive assets" in client.get(f"/assets/{world['inactive'].pk}/").content.decode()
    html = client.get(f"/assets/{world['active'].pk}/").content.decode()
    assert "deletes the state of inactive assets" not in html
    assert (
        "/task-instance/?dag_id=etl&amp;run_id=scheduled__2026-11-29T00%3A00%3A00%2B00%3A00&amp;task_id=submit" in html
    )
    lookup = client.get("/task-instance/", {"dag_id": "etl", "run_id": world["run"].run_id, "task_id": "submit"})
    assert lookup.status_code == 302 and lookup["Location"] == f"/runs/{world['run'].pk}/tasks/submit/?map_index=-1"
    assert client.get("/task-instance/", {"dag_id": "gone", "run_id": "x", "task_id": "y"}).status_code == 404
    listing = client.get("/assets/?with_state=1").content.decode()
    assert "orders" in listing and "legacy" in listing and "inactive" in listing


def test_key_detail_pretty_prints_and_shows_refs(client, operator, world, dag_run_factory, task_key_factory):
    run = world["run"]
    big = task_key_factory(run, task_id="submit", key="big", value={"rows": list(range(50)), "meta": {"a": 1}})
    client.force_login(operator)
    html = client.get(f"/keys/task/{big.pk}/").content.decode()
    assert '<details class="j-fold" open>' in html and "50 items" in html and "Copy JSON" in html
    ref = TaskStateStore.objects.get(key="ref")
    html = client.get(f"/keys/task/{ref.pk}/").content.decode()
    assert "worker-side ref" in html and "s3://bucket/ref" in html
    assert client.get("/keys/task/999999/").status_code == 404


def test_search_filters(client, operator, world):
    client.force_login(operator)
    assert "job_id" in client.get("/search/?key=JOB").content.decode()  # contains, case-insensitive
    assert "job_id" not in client.get("/search/?key=ob&match=prefix").content.decode()
    html = client.get("/search/?status=expired&store=task").content.decode()
    assert ">old<" in html and "job_id" not in html
    html = client.get("/search/?dag_id=etl&task_id=train").content.decode()
    assert html.count(">checkpoint<") == 3 and "watermark" not in html
    html = client.get("/search/?key=watermark&asset=warehouse").content.decode()
    assert "watermark" in html


def test_dag_list_prefix_and_cursor(client, operator, dag_run_factory, task_key_factory):
    for n in range(55):
        task_key_factory(dag_run_factory(dag_id=f"dag_{n:03d}"), key="k")
    client.force_login(operator)
    first = client.get("/dags/").content.decode()
    assert "dag_049" in first and "dag_050" not in first and "More →" in first
    cursor = first.split('rel="next" href="?cursor=')[1].split('"')[0]
    second = client.get(f"/dags/?cursor={cursor}").content.decode()
    assert "dag_050" in second and "dag_054" in second and "dag_049" not in second and "End of list" in second
    assert "dag_012" in client.get("/dags/?prefix=dag_01").content.decode()
    assert "dag_020" not in client.get("/dags/?prefix=dag_01").content.decode()
    assert client.get("/dags/?cursor=not-a-cursor").status_code == 200


def test_keyset_pages_do_not_overlap(client, operator, dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory()
    task_instance_factory(run, task_id="t")
    for n in range(130):
        task_key_factory(run, task_id="t", key=f"k{n:03d}")
    client.force_login(operator)
    seen, url = [], f"/runs/{run.pk}/tasks/t/"
    while url:
        html = client.get(url).content.decode()
        seen += [part.split("</code>")[0] for part in html.split('class="key"><a href="/keys/task/')[1:]]
        url = (
            f"/runs/{run.pk}/tasks/t/" + html.split('rel="next" href="')[1].split('"')[0].replace("&amp;", "&")
            if 'rel="next"' in html
            else None
        )
    keys = [s.split("<code><bdi>")[1].split("</bdi>")[0] for s in seen]
    assert keys == [f"k{n:03d}" for n in range(130)]


def _queries(client, url):
    with (
        CaptureQueriesContext(connections["default"]) as default,
        CaptureQueriesContext(connections["airflow"]) as airflow,
    ):
        assert client.get(url).status_code == 200
    return len(default), len(airflow)


@pytest.mark.parametrize("page", ["overview", "dags", "runs", "run", "task", "assets", "asset", "search", "largest"])
def test_queries_do_not_grow_with_rows(
    client, operator, dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory, page
):
    """The same number of queries with 3 and with 60 of everything: no N+1 anywhere."""
    client.force_login(operator)
    counts = []
    for size in (3, 60):
        TaskStateStore.objects.all().delete()
        run = dag_run_factory(dag_id=f"dag_{size}")
        for n in range(size):
            task_instance_factory(run, task_id=f"t{n}", map_index=n % 3)
            task_key_factory(run, task_id=f"t{n}", map_index=n % 3, key=f"k{n}", value={"n": n})
            task_key_factory(dag_run_factory(dag_id=f"other_{size}_{n}"), key="x")
            asset = asset_factory(active=n % 2 == 0)
            asset_key_factory(asset, key=f"a{n}", kind="task", dag_id=run.dag_id, run_id=run.run_id, task_id="t0")
        url = {
            "overview": "/",
            "dags": "/dags/",
            "runs": f"/dags/{run.dag_id}/",
            "run": f"/runs/{run.pk}/",
            "task": f"/runs/{run.pk}/tasks/t0/",
            "assets": "/assets/",
            "asset": f"/assets/{asset.pk}/",
            "search": "/search/?key=k",
            "largest": "/overview/largest/",
        }[page]
        counts.append(_queries(client, url))
    assert counts[0] == counts[1], counts


def test_htmx_panel_refresh_renders_only_the_panel(client, operator, world):
    client.force_login(operator)
    response = client.get(f"/runs/{world['run'].pk}/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="keys-panel")
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="keys-panel">') and "<html" not in html


def test_no_exact_count_of_a_whole_state_table_in_lists(client, operator, world):
    client.force_login(operator)
    for url in ["/dags/", f"/runs/{world['run'].pk}/", "/assets/", f"/assets/{world['active'].pk}/", "/search/?key=a"]:
        with CaptureQueriesContext(connections["airflow"]) as queries:
            client.get(url)
        for query in queries.captured_queries:
            sql = query["sql"].upper()  # a count stopped at a cap (a LIMIT-ed subquery) is bounded
            assert not ("COUNT(*)" in sql and "WHERE" not in sql and "LIMIT" not in sql), (url, sql)


def test_json_helpers_render_non_json_text(client, operator, world):
    key = TaskStateStore.objects.get(key="job_id")
    TaskStateStore.objects.filter(pk=key.pk).update(value="not json")
    client.force_login(operator)
    assert "not json" in client.get(f"/keys/task/{key.pk}/").content.decode()
    assert json.loads('"x"') == "x"
