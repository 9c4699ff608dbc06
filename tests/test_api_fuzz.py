"""Schemathesis against our OpenAPI schema, authenticated, on a live server: no input may produce a 5xx."""

import hypothesis
import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck
from schemathesis import GenerationMode

from statestore_admin.tokens.models import ApiToken

from .conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
EXAMPLES = 25  # per operation and mode; derandomized, so every run sends the same requests


@pytest.fixture
def deployment(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="r")
    task_instance_factory(run, task_id="t")
    task_key_factory(run, task_id="t", key="k", value={"a": 1})
    asset_key_factory(asset_factory(), key="k", value=[1])


def operations():
    schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
    return [result.ok() for result in schema.get_all_operations()]


def test_no_input_produces_a_server_error(live_server, operator, deployment):
    _, token = ApiToken.issue(operator, "schemathesis")
    headers = {"Authorization": f"Bearer {token}"}
    failures, calls = [], []
    for operation in operations():
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @hypothesis.settings(
                max_examples=EXAMPLES,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
            def send(case):
                response = case.call(base_url=live_server.url, headers=headers)
                calls.append(response.status_code)
                if response.status_code >= 500:
                    failures.append(
                        f"{case.method} {case.formatted_path} {case.query} {case.body!r} -> {response.status_code}"
                    )

            send()
    assert not failures, "\n".join(failures[:20])
    assert len(calls) > 100 and len(operations()) >= 15
