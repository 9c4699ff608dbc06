"""Deep links from Airflow's UI (/airflow/<destination>/, issue 25): what Airflow's plugin templates fill lands
on the dashboard's page of the same object; what they leave unfilled, a missing object and an out-of-scope one
answer with a page, never a 500."""

from urllib.parse import quote, urlencode

import pytest

from statestore_admin.records.models import AccessScope
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

# Airflow's DAG and task ids are word characters, dots and dashes (any script); a run id may hold anything.
ODD_DAG = "team.etl-ünïcode"
ODD_RUN = "manual__2026-12-01T00:00:00+00:00 / ré #1?"
ODD_TASK = "group.load_ü"


@pytest.fixture
def scene(dag_run_factory, task_instance_factory, task_key_factory, asset_factory):
    run = dag_run_factory(dag_id=ODD_DAG, run_id=ODD_RUN)
    for index in (0, 1):
        task_instance_factory(run, task_id=ODD_TASK, map_index=index)
    task_key_factory(run, task_id=ODD_TASK, map_index=1, key="watermark", value=7)
    empty = dag_run_factory(dag_id=ODD_DAG, run_id="no-state-yet")
    task_instance_factory(empty, task_id="quiet")
    return {"run": run, "empty": empty, "asset": asset_factory(name="orders ü")}


@pytest.fixture
def pages(client, viewer):
    client.force_login(viewer)
    return client


def follow(client, destination, **params):
    return client.get(f"/airflow/{destination}/", params, follow=True)


def test_a_mapped_task_instance_lands_on_its_page_with_its_keys(pages, scene):
    first = pages.get(
        "/airflow/task_instance/", {"dag_id": ODD_DAG, "run_id": ODD_RUN, "task_id": ODD_TASK, "map_index": "1"}
    )
    assert first.status_code == 302
    assert first["Location"] == f"/runs/{scene['run'].pk}/tasks/{quote(ODD_TASK)}/?map_index=1"
    page = pages.get(first["Location"])
    assert page.status_code == 200 and "watermark" in page.content.decode()


def test_an_unfilled_map_index_is_the_unmapped_task_instance(pages, scene):
    """Airflow fills {MAP_INDEX} on /mapped/ pages only: unfilled, the task page's own rule picks (-1 here)."""
    response = pages.get(
        "/airflow/task_instance/",
        {"dag_id": ODD_DAG, "run_id": "no-state-yet", "task_id": "quiet", "map_index": "{MAP_INDEX}"},
    )
    assert response["Location"].endswith("/tasks/quiet/")
    page = pages.get(response["Location"])
    assert page.status_code == 200 and page.context["map_index"] == -1  # no state yet: its page, not a 404


def test_on_airflow_34_a_task_in_a_loop_lands_on_every_iteration(pages, region_factory, dag_run_factory):
    """Airflow 3.4's page of a task directly in a loop names no map index and its templates no region: the
    link lands on the task's page with every iteration's keys."""
    from tests.factories import make_region_instance, make_region_key

    run = dag_run_factory(dag_id="loops", run_id="r")
    loop = region_factory(run, "loop")
    for iteration in (0, 1):
        make_region_instance(run, "step", loop, iteration)
        make_region_key(run, "step", loop, iteration, "seen", f"iteration-{iteration}")
    response = pages.get(
        "/airflow/task_instance/", {"dag_id": "loops", "run_id": "r", "task_id": "step", "map_index": "{MAP_INDEX}"}
    )
    body = pages.get(response["Location"]).content.decode()
    assert "iteration-0" in body and "iteration-1" in body


def test_on_airflow_34_a_mapped_task_in_a_loop_lands_on_every_coordinate_naming_those_at_its_index(
    pages, region_factory, dag_run_factory
):
    """Airflow 3.4's page of a mapped task inside a loop is ``/mapped/{n}`` (its own expansion's index) and its
    templates carry no region: public index n has no task instance and no key, so the link lands on every
    iteration and map position of the task, and the page names the coordinates at index n."""
    from tests.factories import make_region_instance, make_region_key

    run = dag_run_factory(dag_id="loops", run_id="r")
    loop = region_factory(run, "refine")
    for iteration in (0, 1):
        expansion = region_factory(run, "refine.work", parent=loop, parent_index=iteration)
        for index in (0, 1):
            make_region_instance(run, "refine.work", expansion, index)
            make_region_key(run, "refine.work", expansion, index, "cursor", f"it{iteration}-at{index}")
    response = pages.get(
        "/airflow/task_instance/",
        {"dag_id": "loops", "run_id": "r", "task_id": "refine.work", "map_index": "1", "embed": "1"},
    )
    assert response["Location"] == (f"/runs/{run.pk}/tasks/refine.work/?map_index=all&airflow_map_index=1&embed=1")
    page = pages.get(response["Location"])
    body = page.content.decode()
    assert all(f"it{i}-at{j}" in body for i in (0, 1) for j in (0, 1))  # every coordinate's keys
    named = page.context["from_airflow"]
    assert named["index"] == 1 and [c.index for c in named["at"]] == [1, 1]
    assert len({c.region_id for c in named["at"]}) == 2  # one in each iteration's expansion
    assert 'data-testid="from-airflow"' in body and "map index 1 of refine.work" in body
    beyond = pages.get(f"/runs/{run.pk}/tasks/refine.work/?map_index=all&airflow_map_index=7").content.decode()
    assert "none of them at map index 7" in beyond  # said, not an empty list


def test_on_airflow_34_a_mapped_task_outside_loops_lands_on_its_index(pages, region_factory, dag_run_factory):
    """A task's own top-level expansion is what Airflow's public map index names: that coordinate's page."""
    from tests.factories import make_region_instance, make_region_key

    run = dag_run_factory(dag_id="loops", run_id="r")
    expansion = region_factory(run, "fan")
    for index in (0, 1):
        make_region_instance(run, "fan", expansion, index)
        make_region_key(run, "fan", expansion, index, "part", f"at{index}")
    response = pages.get(
        "/airflow/task_instance/", {"dag_id": "loops", "run_id": "r", "task_id": "fan", "map_index": "1"}
    )
    assert response["Location"] == f"/runs/{run.pk}/tasks/fan/?map_index=1"
    page = pages.get(response["Location"])
    assert "at1" in page.content.decode() and "at0" not in page.content.decode()
    assert page.context["from_airflow"] is None


@pytest.mark.parametrize(
    "destination, params, target",
    [
        ("dag", {"dag_id": ODD_DAG}, lambda s: f"/dags/{quote(ODD_DAG, safe='')}/"),
        ("dag_run", {"dag_id": ODD_DAG, "run_id": ODD_RUN}, lambda s: f"/runs/{s['run'].pk}/"),
        ("asset", {"asset_id": "{id}"}, lambda s: f"/assets/{s['asset'].pk}/"),
        ("nav", {}, lambda s: "/"),
    ],
)
def test_each_destination_lands_on_the_same_object(pages, scene, destination, params, target):
    params = {k: v.replace("{id}", str(scene["asset"].pk)) for k, v in params.items()}
    response = pages.get(f"/airflow/{destination}/", params)
    assert response.status_code == 302
    assert response["Location"].replace("%2F", "/") == target(scene).replace("%2F", "/")
    assert pages.get(response["Location"]).status_code == 200


def test_a_task_lands_on_the_search_of_its_keys(pages, scene):
    response = follow(pages, "task", dag_id=ODD_DAG, task_id=ODD_TASK)
    assert response.status_code == 200
    assert response.redirect_chain[0][0].startswith("/search/?store=task&dag_id=")
    assert "watermark" in response.content.decode()


def test_embed_stays_on_the_landing_page(pages, scene):
    response = pages.get("/airflow/dag_run/", {"dag_id": ODD_DAG, "run_id": ODD_RUN, "embed": "1"})
    assert response["Location"] == f"/runs/{scene['run'].pk}/?embed=1"


@pytest.mark.parametrize(
    "destination, params, words",
    [
        ("dag_run", {"dag_id": "{DAG_ID}", "run_id": "{RUN_ID}"}, "Airflow did not fill {DAG_ID}"),
        ("asset", {"asset_id": "{ASSET_ID}"}, "Airflow did not fill {ASSET_ID}"),
        ("asset", {"asset_id": "orders"}, "is not an asset id"),
        ("asset", {"asset_id": "9" * 30}, "is not an asset id"),
        ("task_instance", {"dag_id": ODD_DAG, "run_id": ODD_RUN, "task_id": ODD_TASK, "map_index": "x"}, "map index"),
        (
            "task_instance",
            {"dag_id": ODD_DAG, "run_id": ODD_RUN, "task_id": ODD_TASK, "map_index": "9" * 20},
            "map index",
        ),
        ("task_instance", {"dag_id": ODD_DAG, "run_id": ODD_RUN, "task_id": ODD_TASK, "map_index": "-2"}, "map index"),
        ("task_instance", {"dag_id": ODD_DAG, "run_id": ODD_RUN}, "no task_id"),
        ("dashboard", {}, "Unknown Airflow page"),
    ],
)
def test_what_airflow_did_not_fill_is_a_400_page_saying_so(pages, scene, destination, params, words):
    response = pages.get(f"/airflow/{destination}/", params)
    assert response.status_code == 400
    assert words in response.content.decode().replace("&#x27;", "'")


@pytest.mark.parametrize(
    "destination, params",
    [
        ("dag_run", {"dag_id": ODD_DAG, "run_id": "gone"}),
        ("task_instance", {"dag_id": ODD_DAG, "run_id": ODD_RUN, "task_id": "a/b", "map_index": "0"}),
        ("dag", {"dag_id": "a/b"}),
        ("asset", {"asset_id": "987654"}),
    ],
)
def test_a_missing_object_is_a_404_page(pages, scene, destination, params):
    assert pages.get(f"/airflow/{destination}/", params).status_code == 404


def test_out_of_scope_answers_as_everywhere_else(client, user_factory, scene):
    """As the task instance lookup answers (the DAG: 403) and the asset page (404); nothing of it shows."""
    user = user_factory("scoped", perms=["task.view", "asset.view"], unscoped=False)
    AccessScope.objects.create(user=user, kind="dag", pattern="other_*")
    AccessScope.objects.create(user=user, kind="asset", pattern="other.*")
    client.force_login(user)
    task = {"dag_id": ODD_DAG, "run_id": ODD_RUN, "task_id": ODD_TASK, "map_index": "1"}
    elsewhere = client.get("/task-instance/", task).status_code
    for destination, params, status in [
        ("dag_run", {"dag_id": ODD_DAG, "run_id": ODD_RUN}, elsewhere),
        ("task_instance", task, elsewhere),
        ("asset", {"asset_id": str(scene["asset"].pk)}, client.get(f"/assets/{scene['asset'].pk}/").status_code),
    ]:
        response = client.get(f"/airflow/{destination}/", params)
        assert response.status_code == status and status in (403, 404), destination
        assert "watermark" not in response.content.decode() and "orders" not in response.content.decode()


def test_without_permission_is_403(client, nobody, scene):
    client.force_login(nobody)
    assert client.get("/airflow/dag_run/", {"dag_id": ODD_DAG, "run_id": ODD_RUN}).status_code == 403


def test_signing_in_keeps_the_link(client, scene):
    url = f"/airflow/task_instance/?dag_id={quote(ODD_DAG)}&run_id={quote(ODD_RUN)}&task_id=t&map_index=1"
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")
    assert quote(url, safe="") in response["Location"] or quote(url, safe="/") in response["Location"]


@pytest.mark.parametrize(
    "destination, params, target",
    [
        ("dag", {"dag_id": ODD_DAG}, f"/browse/dags/{quote(ODD_DAG, safe='')}/"),
        (
            "dag_run",
            {"dag_id": ODD_DAG, "run_id": ODD_RUN},
            f"/browse/run/?{urlencode({'dag_id': ODD_DAG, 'run_id': ODD_RUN})}",
        ),
        ("task", {"dag_id": ODD_DAG, "task_id": ODD_TASK}, f"/browse/dags/{quote(ODD_DAG, safe='')}/"),
        (
            "task_instance",
            {"dag_id": ODD_DAG, "run_id": ODD_RUN, "task_id": ODD_TASK, "map_index": "1"},
            f"/browse/task/?{urlencode({'dag_id': ODD_DAG, 'run_id': ODD_RUN, 'task_id': ODD_TASK, 'map_index': 1})}",
        ),
        (
            "task_instance",
            {"dag_id": ODD_DAG, "run_id": ODD_RUN, "task_id": ODD_TASK, "map_index": "{MAP_INDEX}"},
            f"/browse/task/?{urlencode({'dag_id': ODD_DAG, 'run_id': ODD_RUN, 'task_id': ODD_TASK})}",
        ),
        ("asset", {"asset_id": "42"}, "/browse/assets/42/"),
        ("nav", {}, "/"),
    ],
)
def test_on_managed_airflow_each_destination_lands_on_its_browsing_page(pages, settings, destination, params, target):
    """Over Airflow's REST API there are no database ids: the browsing pages, which ask Airflow (the compat stage
    follows them against a real one, tests/compat/test_managed_airflow.py). Validation is the same in both modes."""
    settings.AIRFLOW_API_MODE = True
    response = pages.get(f"/airflow/{destination}/", params)
    assert response.status_code == 302 and response["Location"] == target
    assert pages.get(f"/airflow/{destination}/", {**params, "embed": "1"})["Location"].endswith("embed=1")


def test_on_managed_airflow_what_airflow_did_not_fill_is_still_a_400_page(pages, settings):
    settings.AIRFLOW_API_MODE = True
    assert pages.get("/airflow/asset/", {"asset_id": "{ASSET_ID}"}).status_code == 400
    assert pages.get("/airflow/task_instance/", {"dag_id": ODD_DAG, "run_id": ODD_RUN}).status_code == 400
    assert pages.get("/airflow/dag/", {"dag_id": "a/b"}).status_code == 404
