"""Our endpoints' answers with every part filled in (a statistics snapshot, GC runs, expired keys of both
stores) match the response schema the OpenAPI document declares: the fuzz run's deployment has none of
these, so their shapes would go unchecked there."""

from datetime import timedelta

import jsonschema
import pytest
from django.test import Client
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator

from statestore_admin.access.actors import Actor
from statestore_admin.records.models import GcRun
from statestore_admin.stats.snapshots import take_snapshot
from statestore_admin.tokens.models import ApiToken

from ..conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
OURS = "/api/statestore/v1"
GETS = (
    "/stats",
    "/gc/dry-run",
    "/orphans",
    "/search/task-keys",
    "/search/asset-keys",
    "/insights/series",
    "/insights/expiry",
    "/insights/sizes",
    "/insights/top",
    "/insights/gc",
    "/audit-events",
)


def json_schema(document, schema):
    """The OpenAPI 3.0 schema as JSON Schema: references inlined, ``nullable`` as a null alternative."""
    if isinstance(schema, list):
        return [json_schema(document, s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return json_schema(document, document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]])
    converted = {k: json_schema(document, v) for k, v in schema.items() if k != "nullable"}
    if schema.get("nullable"):
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


@pytest.fixture
def filled(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    now = timezone.now()
    run = dag_run_factory(dag_id="etl", run_id="r")
    task_instance_factory(run, task_id="t")
    task_key_factory(run, task_id="t", key="old", value={"a": 1}, expires_at=now - timedelta(days=1))
    task_key_factory(run, task_id="t", key="soon", value="x" * 500, expires_at=now + timedelta(hours=2))
    task_key_factory(run, task_id="t", key="never", value=[1, 2])
    asset_key_factory(asset_factory(name="orders"), key="watermark", value="2026-11-30")
    GcRun.objects.create(
        started_at=now - timedelta(hours=1),
        finished_at=now,
        cutoff=now - timedelta(hours=1),
        batch_size=1000,
        rows_deleted=3,
        batches=1,
        outcome="completed",
        host="gc-host",
        pid=1,
    )
    take_snapshot(actor=Actor.command())


@pytest.mark.usefixtures("filled")
def test_filled_answers_match_their_declared_schema(operator):
    document = SchemaGenerator().get_schema(request=None, public=True)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(operator, 'shapes')[1]}")
    for path in GETS:
        response = api.get(f"{OURS}{path}")
        assert response.status_code == 200, (path, response.content)
        declared = document["paths"][f"{OURS}{path}"]["get"]["responses"]["200"]["content"]["application/json"]
        jsonschema.validate(response.json(), json_schema(document, declared["schema"]))
    body = api.get(f"{OURS}/insights/top").json()
    assert body["snapshot"] and body["largest"] and body["dags_by_keys"]  # the lists were filled, and checked
    assert api.get(f"{OURS}/stats").json()["gc_runs"]
    assert api.get(f"{OURS}/gc/dry-run").json()["sample"]


def test_a_body_off_its_schema_fails():
    document = SchemaGenerator().get_schema(request=None, public=True)
    declared = document["paths"][f"{OURS}/insights/gc"]["get"]["responses"]["200"]["content"]["application/json"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"days": 7, "runs": [{"started_at": None}]}, json_schema(document, declared["schema"]))


def test_error_answers_match_the_error_schema(operator):
    document = SchemaGenerator().get_schema(request=None, public=True)
    responses = document["paths"][f"{OURS}/gc/dry-run"]["get"]["responses"]
    anonymous = Client().get(f"{OURS}/gc/dry-run")
    invalid = Client(HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(operator, 'shapes')[1]}").get(
        f"{OURS}/gc/dry-run", {"top": "many"}
    )
    assert (anonymous.status_code, invalid.status_code) == (401, 422)
    assert isinstance(anonymous.json()["detail"], str) and isinstance(invalid.json()["detail"], list)
    for response in (anonymous, invalid):
        declared = responses[str(response.status_code)]["content"]["application/json"]["schema"]
        jsonschema.validate(response.json(), json_schema(document, declared))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"detail": [{"msg": 1}]}, json_schema(document, responses["422"]["content"]["application/json"]["schema"])
        )
