"""/api/v2's task routes on an Airflow 3.4 database address task state as Airflow 3.4.0b2's api-server does
(``resolve_task_scope``): ``map_index`` alone is the public map index, ``region_id`` with ``region_index`` a
stored address, and every refusal has Airflow's status and body. The rows are shaped like what Airflow 3.4
writes: a loop of 3 iterations around a mapped task, a plain mapped task, a mapped task group, an expansion
that a clear forked, two live expansions of one task, each with its DAG version's serialized DAG. On a 3.3
database the same routes keep 3.3.2's contract (``test_33_*``). Run with AIRFLOW_FIXTURE_SERIES=3.4."""

import json
import uuid
from pathlib import Path

import pytest
from django.db import connections

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.airflow.versions import SENTINEL_REGION_ID, schema_of
from statestore_admin.records.models import AuditEvent
from tests import factories
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
RUN_ID = "manual__2026-12-01T00:00:00+00:00"
BASE = f"/api/v2/dags/loops/dagRuns/{RUN_ID.replace('+', '%2B')}/taskInstances"
SELECT = {"detail": "Select a region and index for this task instance"}


@pytest.fixture
def airflow_34(db):
    if not schema_of(connections["airflow"]).regions:
        pytest.skip("Airflow 3.4's dynamic regions: run with AIRFLOW_FIXTURE_SERIES=3.4")


@pytest.fixture
def airflow_33(db):
    if schema_of(connections["airflow"]).regions:
        pytest.skip("Airflow 3.3's contract: runs with the default AIRFLOW_FIXTURE_SERIES=3.3")


@pytest.fixture
def audited_regions(airflow_34):
    """A write in a region records its region in the audit trail (AuditEvent.region_id, migration 0007)."""
    assert any(f.name == "region_id" for f in AuditEvent._meta.get_fields())


@pytest.fixture
def api(client, operator):
    from tests.api.test_api import bearer

    client.defaults.update(bearer(operator))
    return client


class Scene:
    """The DAG ``loops``' run and what Airflow 3.4 wrote for it; every task instance has a key "k" whose value
    says where it sits (``label``), so an answer shows which row it read."""

    def __init__(self):
        f = factories
        self.run = f.make_dag_run(dag_id="loops", run_id=RUN_ID)
        self.version = f.make_dag_version(
            "loops",
            {
                "refine": f.serialized_task_group(
                    "refine", {"refine.work": "mapped", "refine.check": "plain"}, loop=True
                ),
                "mapped": "mapped",
                "grp": f.serialized_task_group("grp", {"grp.inner": "plain"}, mapped=True),
                "forked": "mapped",
                "twice": "mapped",
                "plain": "plain",
            },
        )
        self.instances = []
        self.loop = f.make_region(self.run, "refine")
        # the loop's 3 iterations: refine.check at the loop's index, refine.work's expansion in each
        self.work = [f.make_region(self.run, "refine.work", parent=self.loop, parent_index=i) for i in range(3)]
        for i, region in enumerate(self.work):
            self.add("refine.check", i, self.loop.pk)
            self.add("refine.work", 0, region.pk)
        self.add("refine.work", 1, self.work[2].pk)
        self.mapped = f.make_region(self.run, "mapped")
        for i in range(3):
            self.add("mapped", i, self.mapped.pk)
        self.group = f.make_region(self.run, "grp")
        for i in range(2):
            self.add("grp.inner", i, self.group.pk)
        # a clear re-created the expansion: the old one's task instances left the working set, keys kept
        self.old = f.make_region(self.run, "forked")
        self.new = f.make_fork(self.old)
        for i in range(2):
            f.archive(self.add("forked", i, self.old.pk))
            self.add("forked", i, self.new.pk)
        # two live expansions of one task (two schedulers raced): Airflow refuses to choose
        self.twice = [f.make_region(self.run, "twice"), f.make_region(self.run, "twice")]
        for region in self.twice:
            self.add("twice", 0, region.pk)
        self.add("plain", -1, SENTINEL_REGION_ID)
        f.pin(self.version, self.run, self.instances)

    def add(self, task_id, index, region_id):
        ti = factories.make_task_instance(self.run, task_id=task_id, map_index=index, region_id=region_id)
        factories.make_task_key(
            self.run,
            key="k",
            value=self.label(task_id, region_id, index),
            task_id=task_id,
            map_index=index,
            region_id=region_id,
        )
        self.instances.append(ti)
        return ti

    @staticmethod
    def label(task_id, region_id, index):
        return f"{task_id}@{region_id}:{index}"


@pytest.fixture
def scene(airflow_34):
    return Scene()


def get(api, task_id, query="", key="k"):
    return api.get(f"{BASE}/{task_id}/state-store/{key}{'?' + query if query else ''}")


def value(api, task_id, query=""):
    response = get(api, task_id, query)
    assert response.status_code == 200, response.content
    return response.json()["value"]


def put(api, task_id, query, key, body):
    return api.put(f"{BASE}/{task_id}/state-store/{key}?{query}", json.dumps(body), content_type="application/json")


def rows(task_id):
    """Every key of ``task_id`` in the database, as (label of its coordinates, key, value)."""
    found = TaskStateStore.objects.filter(dag_id="loops", task_id=task_id)
    return sorted((Scene.label(task_id, r.region_id, r.map_index), r.key, json.loads(r.value)) for r in found)


# Refusals, each with Airflow's status and body -------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "status", "body"),
    [
        ("region_index=0", 400, {"detail": "region_index requires region_id"}),
        ("region_id={work0}&region_index=0&map_index=1", 400, {"detail": "map_index conflicts with region_index"}),
        ("map_index=0", 400, SELECT),  # a task inside a loop, without its region
        ("", 400, SELECT),
        # the loop's region holds no refine.work: nothing there (Airflow looks, and finds none)
        ("region_id={loop}", 404, {"detail": "Task instance not found for selected coordinates"}),
    ],
)
def test_refusals_of_a_task_in_a_loop(api, scene, query, status, body):
    query = query.format(work0=scene.work[0].pk, loop=scene.loop.pk)
    for task_id in ("refine.work",):
        response = get(api, task_id, query)
        assert (response.status_code, response.json()) == (status, body)


def test_an_unmapped_task_in_a_loop_needs_region_and_index(api, scene):
    assert get(api, "refine.check", "map_index=1").json() == SELECT
    assert get(api, "refine.check", f"region_id={scene.loop.pk}").json() == SELECT  # the pass unselected
    assert value(api, "refine.check", f"region_id={scene.loop.pk}&region_index=1") == scene.label(
        "refine.check", scene.loop.pk, 1
    )


def test_several_live_executions_are_409(api, scene):
    response = get(api, "twice", "map_index=0")
    assert response.status_code == 409
    assert response.json() == {"detail": f"Multiple live producers for loops/{RUN_ID}/twice index 0"}
    # naming one of them resolves it (map_index is still the index: -1 by default, none there)
    assert value(api, "twice", f"region_id={scene.twice[1].pk}&map_index=0") == scene.label(
        "twice", scene.twice[1].pk, 0
    )
    assert get(api, "twice", f"region_id={scene.twice[1].pk}").status_code == 404


def test_no_task_instance_at_the_coordinates_is_404(api, scene):
    for query in ("map_index=7", "", f"region_id={scene.work[0].pk}&map_index=5"):
        response = get(api, "mapped" if "region" not in query else "refine.work", query)
        assert (response.status_code, response.json()) == (
            404,
            {"detail": "Task instance not found for selected coordinates"},
        )
    # a task without any task instance in a region is addressed as on 3.3: its list is empty, a write 404s
    empty = api.get(f"{BASE}/nope/state-store")
    assert (empty.status_code, empty.json()) == (200, {"task_state_store": [], "total_entries": 0})
    missing = put(api, "nope", "map_index=-1", "k", {"value": 1})
    assert missing.status_code == 404
    assert missing.json() == {
        "detail": f"Task instance not found for dag_id='loops', run_id='{RUN_ID}', task_id='nope', map_index=-1"
    }


@pytest.mark.parametrize(
    ("query", "errors"),
    [
        (
            "region_id=x",
            [
                {
                    "type": "uuid_parsing",
                    "loc": ["query", "region_id"],
                    "msg": "Input should be a valid UUID, invalid character: found `x` at 0",
                    "input": "x",
                    "ctx": {"error": "invalid character: found `x` at 0"},
                }
            ],
        ),
        (
            "region_id=1234&region_index=-2&map_index=y",
            [
                {
                    "type": "int_parsing",
                    "loc": ["query", "map_index"],
                    "msg": "Input should be a valid integer, unable to parse string as an integer",
                    "input": "y",
                },
                {
                    "type": "uuid_parsing",
                    "loc": ["query", "region_id"],
                    "msg": "Input should be a valid UUID, invalid length: found 4",
                    "input": "1234",
                    "ctx": {"error": "invalid length: found 4"},
                },
                {
                    "type": "greater_than_equal",
                    "loc": ["query", "region_index"],
                    "msg": "Input should be greater than or equal to -1",
                    "input": "-2",
                    "ctx": {"ge": -1},
                },
            ],
        ),
        (
            "region_id=00000000-0000-0000-0000-0000000000001",
            [
                {
                    "type": "uuid_parsing",
                    "loc": ["query", "region_id"],
                    "msg": "Input should be a valid UUID, invalid group length in group 4: expected 12, found 13",
                    "input": "00000000-0000-0000-0000-0000000000001",
                    "ctx": {"error": "invalid group length in group 4: expected 12, found 13"},
                }
            ],
        ),
    ],
)
def test_malformed_coordinates_are_airflows_422(api, scene, query, errors):
    response = get(api, "mapped", query)
    assert (response.status_code, response.json()) == (422, {"detail": errors})


def test_map_index_below_minus_one_is_a_message(api, scene):
    response = get(api, "mapped", "map_index=-2")
    assert (response.status_code, response.json()) == (422, {"detail": "map_index must be greater than or equal to -1"})
    clear = api.delete(f"{BASE}/mapped/state-store?map_index=-2")  # the clear's map_index is a checked query
    below = {
        "type": "greater_than_equal",
        "loc": ["query", "map_index"],
        "msg": "Input should be greater than or equal to -1",
        "input": "-2",
        "ctx": {"ge": -1},
    }
    assert (clear.status_code, clear.json()) == (422, {"detail": [below] * 3})


# What Airflow 3.4.0b2's api-server answered, observed (FastAPI's TestClient on its app, SQLite database):
# a clear reports its parameters' errors once per dependency that reads them; a list reports the paging
# parameters' errors after the coordinates'; a write its body's after them, and a missing task instance
# before a malformed body.
def test_a_clear_reports_as_fastapi_does(api, scene):
    response = api.delete(f"{BASE}/mapped/state-store?all_map_indices=maybe&region_id=x")
    locs = [e["loc"][1] for e in response.json()["detail"]]
    scope = ["region_id", "all_map_indices"]
    assert response.status_code == 422 and locs == [*scope, *scope, "all_map_indices", *scope, "all_map_indices"]


def test_errors_are_reported_together(api, scene):
    listed = api.get(f"{BASE}/mapped/state-store?map_index=x&limit=-1&offset=y")
    assert [e["loc"] for e in listed.json()["detail"]] == [
        ["query", "map_index"],
        ["query", "limit"],
        ["query", "offset"],
    ]
    written = put(api, "mapped", "region_id=x", "k", {"nope": 1})
    assert [e["loc"] for e in written.json()["detail"]] == [["query", "region_id"], ["body", "value"], ["body", "nope"]]
    # a coordinate refusal comes before the body's
    assert put(api, "mapped", "region_index=0", "k", {"nope": 1}).json() == {
        "detail": "region_index requires region_id"
    }


def test_a_missing_task_instance_before_a_malformed_body(api, scene):
    response = put(api, "nope", "map_index=3", "k", {"nope": 1})
    assert response.status_code == 404
    assert response.json() == {
        "detail": f"Task instance not found for dag_id='loops', run_id='{RUN_ID}', task_id='nope', map_index=3"
    }
    present = put(api, "plain", "map_index=-1", "k", {"nope": 1})
    assert present.status_code == 422 and [e["loc"] for e in present.json()["detail"]] == [
        ["body", "value"],
        ["body", "nope"],
    ]


def test_uuid_forms_pydantic_accepts(api, scene):
    region = scene.work[1].pk
    for form in (str(region), region.hex, f"{{{region}}}", f"urn:uuid:{region}", str(region).upper()):
        assert value(api, "refine.work", f"region_id={form}&map_index=0") == scene.label("refine.work", region, 0)


# Reads ----------------------------------------------------------------------------------------------------
def test_map_index_is_the_public_map_index(api, scene):
    assert value(api, "mapped", "map_index=2") == scene.label("mapped", scene.mapped.pk, 2)
    assert value(api, "grp.inner", "map_index=1") == scene.label("grp.inner", scene.group.pk, 1)
    assert value(api, "plain") == scene.label("plain", SENTINEL_REGION_ID, -1)
    # a forked expansion: the current one, never the one the clear replaced
    assert value(api, "forked", "map_index=1") == scene.label("forked", scene.new.pk, 1)


def test_each_iteration_of_the_loop_is_its_own(api, scene):
    for region in scene.work:
        assert value(api, "refine.work", f"region_id={region.pk}&map_index=0") == scene.label(
            "refine.work", region.pk, 0
        )
        listed = api.get(f"{BASE}/refine.work/state-store?region_id={region.pk}&region_index=0").json()
        assert listed["total_entries"] == 1
        assert listed["task_state_store"][0]["value"] == scene.label("refine.work", region.pk, 0)


def test_retained_data_is_read_at_its_explicit_address(api, scene):
    old = value(api, "forked", f"region_id={scene.old.pk}&region_index=1")
    assert old == scene.label("forked", scene.old.pk, 1)
    # only map_index: the old expansion is no candidate
    assert api.get(f"{BASE}/forked/state-store?map_index=0").json()["task_state_store"][0]["value"] == scene.label(
        "forked", scene.new.pk, 0
    )


def test_a_run_without_its_serialized_dag_is_400(api, airflow_34):
    run = factories.make_dag_run(dag_id="unparsed", run_id="r")
    region = factories.make_region(run, "m")
    factories.make_task_instance(run, task_id="m", map_index=0, region_id=region.pk)
    response = api.get("/api/v2/dags/unparsed/dagRuns/r/taskInstances/m/state-store?map_index=0")
    assert (response.status_code, response.json()) == (400, {"detail": "Pinned Dag for unparsed/r not found"})


def test_a_compressed_serialized_dag_is_read(api, airflow_34):
    run = factories.make_dag_run(dag_id="squeezed", run_id="r")
    version = factories.make_dag_version(
        "squeezed", {"l": factories.serialized_task_group("l", {"l.t": "plain"}, loop=True)}, compressed=True
    )
    loop = factories.make_region(run, "l")
    factories.pin(version, run, [factories.make_task_instance(run, task_id="l.t", map_index=0, region_id=loop.pk)])
    response = api.get("/api/v2/dags/squeezed/dagRuns/r/taskInstances/l.t/state-store")
    assert (response.status_code, response.json()) == (400, SELECT)  # the loop was read from the zlib'd document


# Writes: exactly the addressed coordinate ------------------------------------------------------------------
def test_writes_act_on_the_resolved_region_only(api, scene, audited_regions):
    target = scene.work[2].pk
    query = f"region_id={target}&map_index=0"
    before = rows("refine.work")
    assert put(api, "refine.work", query, "new", {"value": {"n": 1}}).status_code == 204
    label = scene.label("refine.work", target, 0)
    assert rows("refine.work") == sorted([*before, (label, "new", {"n": 1})])
    patched = api.patch(
        f"{BASE}/refine.work/state-store/new?{query}", json.dumps({"value": 2}), content_type="application/json"
    )
    assert patched.status_code == 200 and patched.content == b"null"
    assert rows("refine.work") == sorted([*before, (label, "new", 2)])
    # the same key in another iteration is absent there
    other = f"region_id={scene.work[0].pk}&map_index=0"
    assert get(api, "refine.work", other, key="new").status_code == 404
    assert api.delete(f"{BASE}/refine.work/state-store/k?{query}").status_code == 204
    assert rows("refine.work") == sorted([r for r in [*before, (label, "new", 2)] if r[:2] != (label, "k")])
    event = AuditEvent.objects.filter(action="delete").latest("pk")
    assert (event.task_id, event.map_index) == ("refine.work", 0)
    assert event.region_id == target


def test_put_by_map_index_writes_the_current_expansion(api, scene, audited_regions):
    assert put(api, "forked", "map_index=1", "again", {"value": True}).status_code == 204
    written = TaskStateStore.objects.get(task_id="forked", key="again")
    assert (written.region_id, written.map_index) == (scene.new.pk, 1)


def test_clear_one_index_of_one_iteration(api, scene):
    before = rows("refine.work")
    response = api.delete(f"{BASE}/refine.work/state-store?region_id={scene.work[2].pk}&map_index=1")
    assert response.status_code == 204
    assert rows("refine.work") == [r for r in before if r[0] != scene.label("refine.work", scene.work[2].pk, 1)]


def test_all_map_indices_clears_one_expansion(api, scene):
    others = {task: rows(task) for task in ("refine.work", "grp.inner", "forked", "plain")}
    assert api.delete(f"{BASE}/mapped/state-store?all_map_indices=true").status_code == 204
    assert rows("mapped") == []
    # in one iteration of the loop: that iteration's expansion only
    assert (
        api.delete(f"{BASE}/refine.work/state-store?region_id={scene.work[2].pk}&all_map_indices=true").status_code
        == 204
    )
    assert rows("refine.work") == [
        r for r in others["refine.work"] if not r[0].startswith(f"refine.work@{scene.work[2].pk}")
    ]
    # a forked expansion: the current one; the replaced one's keys stay
    assert api.delete(f"{BASE}/forked/state-store?all_map_indices=true").status_code == 204
    assert rows("forked") == [r for r in others["forked"] if str(scene.old.pk) in r[0]]
    assert rows("plain") == others["plain"]


def test_all_map_indices_in_a_mapped_task_group_clears_one_index(api, scene):
    """Airflow 3.4.0b2's ``_clear_all_map_indices``: the group's region is not the task's own expansion, so
    only the first index is cleared."""
    before = rows("grp.inner")
    assert api.delete(f"{BASE}/grp.inner/state-store?all_map_indices=true").status_code == 204
    assert rows("grp.inner") == [r for r in before if not r[0].endswith(":0")]


def test_all_map_indices_in_a_loop_without_region_is_400(api, scene):
    response = api.delete(f"{BASE}/refine.work/state-store?all_map_indices=true")
    assert (response.status_code, response.json()) == (400, SELECT)
    assert len(rows("refine.work")) == 4


# Asset writers ------------------------------------------------------------------------------------------------
def test_asset_writer_on_34(api, airflow_34):
    asset = factories.make_asset(name="a34")
    ti, region = uuid.uuid4(), uuid.uuid4()
    common = {"dag_id": "loops", "run_id": RUN_ID, "task_id": "t", "task_instance_id": ti, "try_number": 2}
    factories.make_asset_key(
        asset, key="in_region", kind="task", map_index=-1, region_id=region, region_index=3, **common
    )
    factories.make_asset_key(
        asset, key="no_region", kind="task", map_index=4, region_id=SENTINEL_REGION_ID, region_index=4, **common
    )
    factories.make_asset_key(asset, key="api", kind="api")
    entries = {e["key"]: e for e in api.get(f"/api/v2/assets/{asset.pk}/state-store").json()["asset_state_store"]}
    head = {"kind": "task", "dag_id": "loops", "run_id": RUN_ID, "task_id": "t"}
    assert entries["in_region"]["last_updated_by"] == {
        **head,
        "map_index": -1,
        "task_instance_id": str(ti),
        "region_id": str(region),
        "region_index": 3,
        "try_number": 2,
    }
    assert list(entries["in_region"]["last_updated_by"]) == [
        "kind",
        "dag_id",
        "run_id",
        "task_id",
        "map_index",
        "task_instance_id",
        "region_id",
        "region_index",
        "try_number",
    ]
    assert entries["no_region"]["last_updated_by"] == {
        **head,
        "map_index": 4,
        "task_instance_id": str(ti),
        "try_number": 2,
    }
    api_writer = {"kind": "api", "dag_id": None, "run_id": None, "task_id": None, "map_index": None}
    assert entries["api"]["last_updated_by"] == {**api_writer, "task_instance_id": None, "try_number": None}
    one = api.get(f"/api/v2/assets/{asset.pk}/state-store/in_region").json()
    assert one["last_updated_by"] == entries["in_region"]["last_updated_by"]
    assert AssetStateStore.objects.filter(asset=asset).count() == 3


def test_asset_writer_on_33_keeps_its_shape(api, airflow_33):
    asset = factories.make_asset(name="a33")
    factories.make_asset_key(asset, key="w", kind="task", dag_id="d", run_id="r", task_id="t", map_index=2)
    writer = api.get(f"/api/v2/assets/{asset.pk}/state-store/w").json()["last_updated_by"]
    assert writer == {"kind": "task", "dag_id": "d", "run_id": "r", "task_id": "t", "map_index": 2}


# Airflow 3.3: region parameters do not exist -------------------------------------------------------------------
def test_33_ignores_region_parameters(api, airflow_33):
    run = factories.make_dag_run(dag_id="loops", run_id=RUN_ID)
    factories.make_task_instance(run, task_id="m", map_index=1)
    factories.make_task_key(run, key="k", value="v", task_id="m", map_index=1)
    for query in ("map_index=1", "map_index=1&region_id=x&region_index=-5", f"map_index=1&region_id={uuid.uuid4()}"):
        assert get(api, "m", query).json()["value"] == "v"
    assert get(api, "m", "region_index=0").status_code == 404  # map_index -1: no such key, and no 400
    response = get(api, "m", "map_index=-2")
    assert response.status_code == 422 and response.json()["detail"][0]["type"] == "greater_than_equal"


# The definitions, read from what Airflow 3.4.0b2 itself serializes ------------------------------------------
# serialized_dag_34.json: DagSerialization.to_dict() of this DAG, made with apache-airflow 3.4.0b2:
#   grp = a @task_group(x) of inner(x) >> inner2(), expanded over [1, 2]; mapped = a @task expanded over
#   [1, 2, 3]; refine = a @task_group of work expanded over [1, 2], refine.loop(max_iterations=3); plain.
@pytest.mark.parametrize(
    ("task_id", "mapped", "loop"),
    [
        ("grp.inner", True, None),
        ("grp.inner2", True, None),
        ("mapped", True, None),
        ("refine.work", True, "refine"),
        ("refine.__loop_gate", False, "refine"),
        ("plain", False, None),
    ],
)
def test_definitions_from_airflows_own_serialization(task_id, mapped, loop):
    from statestore_admin.state.selectors.coordinates import TaskDefinition, definition_of

    document = json.loads((Path(__file__).parent / "serialized_dag_34.json").read_text())
    assert definition_of(document["dag"], task_id) == TaskDefinition(mapped, loop)
    assert definition_of(document["dag"], "gone") is None
