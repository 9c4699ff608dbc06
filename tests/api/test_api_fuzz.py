"""Schemathesis against our OpenAPI schema, authenticated, on a live server, with all of its checks: no
input produces a 5xx, every answer has the status, content type, headers and body the schema declares,
valid input is accepted and invalid input refused (docs/api.md, "Errors", lists what it cannot know)."""

import functools
import json
from urllib.parse import quote, unquote

import hypothesis
import pytest
import requests
import schemathesis
import schemathesis.specs.openapi.checks  # noqa: F401  (registers the OpenAPI checks)
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS
from schemathesis.core.failures import FailureGroup

from statestore_admin.state import selectors
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES

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
    "contains a lone surrogate (U+D",  # any key or value of a write (docs/writes.md): no UTF-8 form
)


# Airflow 3.4's rules between a task route's coordinates, which a JSON schema cannot state either: answered
# with Airflow's 400 and its words (docs/airflow.md, "Addressing on 3.4").
EXPLAINED_400 = (
    '{"detail":"region_index requires region_id"}',
    '{"detail":"map_index conflicts with region_index"}',
)


def explained(case, exc) -> bool:
    text = str(exc)
    if ignored_region_parameters(case, text):
        return True
    if "Schema-valid request rejected" in text and "[400]" in text:
        return any(reason in text for reason in EXPLAINED_400)
    if "Schema-valid request rejected" not in text or "[422]" not in text:
        return False
    if any(reason in text for reason in EXPLAINED):
        return True
    # An export document's entries are checked by the domain (store, ids, key, value, JSON of an upload).
    return case.path == "/api/statestore/v1/restore" and '"loc":["body"' in text


def ignored_region_parameters(case, text: str) -> bool:
    """One document describes both series: ``region_id`` and ``region_index`` are Airflow 3.4's, and on a 3.3
    database they are ignored as Airflow 3.3 ignores them, so a malformed one is accepted there (and only there:
    on a 3.4 database the same request must be refused)."""
    if selectors.addresses_regions() or not {"region_id", "region_index"} & set(case.query or {}):
        return False
    failures = [line.strip() for line in text.splitlines() if line.strip().startswith("- ST")]
    return bool(failures) and all("Schema-violating request accepted" in line for line in failures)


# Lone surrogates (half of a UTF-16 pair: "\\ud800"): schemathesis never generates them (UTF-8 has no form for
# them), and its validators cannot read them. A client can still send them: in a JSON body as \\u escapes, in a
# URL as the bytes that encoding them anyway gives (WTF-8), percent-encoded. So the surrogate pass splices
# stand-ins (private-use characters) into a case's strings, which the checks read as what they are, and
# ``surrogates_on_the_wire`` turns them into lone surrogates in the request that goes out.
STAND_INS = {"\ue000": "\ud800", "\ue001": "\udbff", "\ue002": "\udc00", "\ue003": "\udfff"}


def with_surrogates(case, data):
    """``case`` with stand-ins for lone surrogates spliced into some of the strings of its JSON body (values
    and object keys), its path parameters and its query, and into one of them at least."""
    spliced = []

    def splice(text: str, force: bool = False) -> str:
        if not force and not data.draw(st.booleans()):
            return text
        at = data.draw(st.integers(0, len(text)))
        spliced.append(text)
        return text[:at] + data.draw(st.sampled_from(sorted(STAND_INS))) + text[at:]

    def walk(item, force=False):
        if isinstance(item, str):
            return splice(item, force)
        if isinstance(item, dict):
            return {(splice(k) if isinstance(k, str) else k): walk(v, force) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v, force) for v in item]
        return item

    json_body = (case.media_type or "").endswith("json") and not isinstance(case.body, (bytes, type(None)))
    for force in (False, True):  # a second pass splices into every string when the first spliced none
        if spliced:
            break
        if json_body:
            case.body = walk(case.body, force)
        case.query = {k: walk(v, force) if isinstance(v, (str, list)) else v for k, v in case.query.items()}
        case.path_parameters = {  # percent-encoded by schemathesis: spliced between characters, not into an escape
            k: quote(splice(unquote(v), force), safe="") if isinstance(v, str) and k != "asset_id" else v
            for k, v in case.path_parameters.items()
        }
    return case


@pytest.fixture
def surrogates_on_the_wire(monkeypatch):
    """Every request ``requests`` prepares (schemathesis' probes' too) carries lone surrogates for the
    stand-ins: in the URL their WTF-8 bytes percent-encoded, in a JSON body their \\u escapes."""
    in_url = {quote(k): quote(v.encode("utf-8", "surrogatepass")) for k, v in STAND_INS.items()}
    in_json = {json.dumps(k).strip('"').encode(): json.dumps(v).strip('"').encode() for k, v in STAND_INS.items()}
    prepared = requests.models.PreparedRequest
    prepare_url, prepare_body = prepared.prepare_url, prepared.prepare_body

    def url(self, *args, **kwargs):
        prepare_url(self, *args, **kwargs)
        for stand_in, surrogate in in_url.items():
            self.url = self.url.replace(stand_in, surrogate)

    def body(self, *args, **kwargs):
        prepare_body(self, *args, **kwargs)
        if isinstance(self.body, bytes) and (self.headers.get("Content-Type") or "").endswith("json"):
            for stand_in, surrogate in in_json.items():
                self.body = self.body.replace(stand_in, surrogate)

    monkeypatch.setattr(prepared, "prepare_url", url)
    monkeypatch.setattr(prepared, "prepare_body", body)


@functools.cache
def operations():
    schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
    return [result.ok() for result in schema.get_all_operations()]


def operation_labels() -> list[str]:
    """``"METHOD path"`` of every operation, read when the tests are collected: one test each, so that the
    suite's workers share them (all in one test, they kept one worker busy for three minutes)."""
    return [operation.label for operation in operations()]


def test_the_schema_has_every_operation():
    assert len(operation_labels()) >= 15


@pytest.mark.parametrize("label", operation_labels())
def test_all_checks_pass_on_every_operation(label, live_server, operator, deployment, settings, surrogates_on_the_wire):
    # Schemathesis sends thousands of requests, many with wrong credentials on purpose: the failed-token
    # throttle (tested in tests/operations/test_throttling.py) would turn every later answer into 429.
    settings.TOKEN_FAILURE_LIMIT = 0
    _, token = ApiToken.issue(operator, "schemathesis")
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    checks = CHECKS.get_all()
    # Every answer's body is checked against the response schema its operation declares.
    assert schemathesis.specs.openapi.checks.response_schema_conformance in checks
    (operation,) = [operation for operation in operations() if operation.label == label]
    failures, calls = [], []
    for mode, surrogates in (
        (GenerationMode.POSITIVE, False),
        (GenerationMode.NEGATIVE, False),
        (GenerationMode.POSITIVE, True),
    ):

        @hypothesis.settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @hypothesis.given(case=operation.as_strategy(generation_mode=mode), data=st.data(), spliced=st.just(surrogates))
        def send(case, data, spliced):
            if spliced:
                case = with_surrogates(case, data)
            try:
                # schemathesis waits 10 s by default: a busy machine (another suite beside this one) answers later
                response = case.call_and_validate(base_url=live_server.url, session=session, checks=checks, timeout=60)
            except (Exception, FailureGroup) as exc:  # one check failed, or several (a group)
                if explained(case, exc):
                    return
                failures.append(f"{case.method} {case.formatted_path} {case.query} {case.body!r}:\n{exc}")
                return
            calls.append(response.status_code)

        send()
    assert not failures, f"{len(failures)} failures:\n\n" + "\n\n".join(failures[:15])
    assert calls  # some answers passed every check, not all explained away
