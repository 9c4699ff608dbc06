"""Schemathesis against our OpenAPI schema, authenticated, on a live server, with all of its checks: no
input produces a 5xx, every answer has the status, content type, headers and body the schema declares,
valid input is accepted and invalid input refused (docs/api.md, "Errors", lists what it cannot know)."""

import hypothesis
import pytest
import requests
import schemathesis
import schemathesis.specs.openapi.checks  # noqa: F401  (registers the OpenAPI checks)
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS
from schemathesis.core.failures import FailureGroup

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


# False positives (docs/api.md, "Errors"): rules a JSON schema cannot state, answered with a 422 that
# names them. Each is matched by the answer's own message, so any other refusal still fails the test.
EXPLAINED = (
    "NUL characters (\\\\x00) are not allowed",  # any text parameter: PostgreSQL cannot store or compare NUL
    "This is in the future; garbage collection only deletes what has expired.",  # gc/dry-run ?before=
)


def explained(case, exc) -> bool:
    text = str(exc)
    if "Schema-valid request rejected" not in text or "[422]" not in text:
        return False
    if any(reason in text for reason in EXPLAINED):
        return True
    # An export document's entries are checked by the domain (store, ids, key, value, JSON of an upload).
    return case.path == "/api/statestore/v1/restore" and '"loc":["body"' in text


def operations():
    schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
    return [result.ok() for result in schema.get_all_operations()]


def test_all_checks_pass_on_every_operation(live_server, operator, deployment, settings):
    # Schemathesis sends thousands of requests, many with wrong credentials on purpose: the failed-token
    # throttle (tested in tests/test_throttling.py) would turn every later answer into 429.
    settings.TOKEN_FAILURE_LIMIT = 0
    _, token = ApiToken.issue(operator, "schemathesis")
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    checks = CHECKS.get_all()
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
                try:
                    response = case.call_and_validate(base_url=live_server.url, session=session, checks=checks)
                except (Exception, FailureGroup) as exc:  # one check failed, or several (a group)
                    if explained(case, exc):
                        return
                    failures.append(f"{case.method} {case.formatted_path} {case.query} {case.body!r}:\n{exc}")
                    return
                calls.append(response.status_code)

            send()
    import os

    if os.environ.get("FUZZ_DUMP"):
        open(os.environ["FUZZ_DUMP"], "w").write("\n\n".join(failures))
    assert not failures, f"{len(failures)} failures:\n\n" + "\n\n".join(failures[:15])
    assert len(calls) > 100 and len(operations()) >= 15
