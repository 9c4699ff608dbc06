"""The client of Airflow's REST API (managed Airflow, statestore_admin/airflow/rest.py): its token, taken from a
real command, and its bounds, against a live server of ours answering Airflow's state routes (the same contract),
through a TCP proxy that answers 503 and 429, stops answering, or refuses connections. The compat stage runs the
same against Airflow's own api-server (tests/compat/test_managed_airflow.py)."""

import base64
import json
import sys
import time
from urllib.parse import quote

import pytest

from statestore_admin.airflow import rest
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES
from tests.faults import TcpProxy

RUN_ID = "manual__2026-12-01T00:00:00+00:00"
KEYS = f"/dags/etl/dagRuns/{quote(RUN_ID, safe='')}/taskInstances/load/state-store"
# Prints argv[2..] in turn, one a run (the last one again once all were printed), and counts its runs in argv[1].
SCRIPT = """\
import pathlib, sys
counter = pathlib.Path(sys.argv[1])
runs = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(runs + 1))
answers = sys.argv[2:]
print(answers[min(runs, len(answers) - 1)])
"""


def command(tmp_path, *answers: str) -> tuple[str, object]:
    script, counter = tmp_path / "token.py", tmp_path / "runs"
    script.write_text(SCRIPT)
    quoted = " ".join(f"'{a}'" for a in answers)
    return f"{sys.executable} {script} {counter} {quoted}", lambda: int(counter.read_text()) if counter.exists() else 0


def jwt(exp: float) -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS512'})}.{part({'sub': 'ops', 'exp': exp})}.c2lnbmF0dXJl"


def test_a_token_command_runs_again_only_when_its_token_expires(tmp_path):
    far, near = jwt(time.time() + 3600), jwt(time.time() + 30)  # 30 s: within the minute kept in hand
    (tmp_path / "a").mkdir()
    line, runs = command(tmp_path / "a", far)
    token = rest.Token(rest.ApiSettings(url="http://airflow", token_command=line))
    assert token.get() == token.get() == far and runs() == 1

    (tmp_path / "b").mkdir()
    line, runs = command(tmp_path / "b", near)
    token = rest.Token(rest.ApiSettings(url="http://airflow", token_command=line))
    assert token.get() == token.get() == near and runs() == 2

    (tmp_path / "c").mkdir()
    answer = json.dumps({"access_token": "opaque-token", "expires_in": 3600})
    line, runs = command(tmp_path / "c", answer)
    token = rest.Token(rest.ApiSettings(url="http://airflow", token_command=line))
    assert token.get() == token.get() == "opaque-token" and runs() == 1

    (tmp_path / "d").mkdir()
    line, runs = command(tmp_path / "d", "plain-token")  # neither a JWT nor expires_in: AIRFLOW_API_TOKEN_TTL
    token = rest.Token(rest.ApiSettings(url="http://airflow", token_command=line, token_ttl=30))
    assert token.get() == token.get() == "plain-token" and runs() == 2


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (
            "import sys; sys.stderr.write('no credentials for ops'); sys.exit(3)",
            "exited with 3: no credentials for ops",
        ),
        ("print()", "printed no token"),
        ("print('two words')", "printed no token"),
        ('print(\'{"token_type": "bearer"}\')', "printed JSON without an access_token"),
    ],
)
def test_a_failing_token_command_says_how(tmp_path, script, message):
    path = tmp_path / "token.py"
    path.write_text(script)
    token = rest.Token(rest.ApiSettings(url="http://airflow", token_command=f"{sys.executable} {path}"))
    with pytest.raises(rest.AirflowApiError) as failed:
        token.get()
    assert message in failed.value.detail and failed.value.status is None and failed.value.unavailable


def test_a_missing_command_is_a_clear_error():
    token = rest.Token(rest.ApiSettings(url="http://airflow", token_command="/nonexistent/get-token --profile x"))
    with pytest.raises(rest.AirflowApiError, match="the token command could not run"):
        token.get()


live = pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True)


@pytest.fixture
def served(committed_airflow_tables, live_server, operator, dag_run_factory, task_instance_factory, task_key_factory):
    """A live server of ours with one task instance and its key, and a token of a user who may read it."""
    run = dag_run_factory(dag_id="etl", run_id=RUN_ID)
    task_instance_factory(run, task_id="load")
    task_key_factory(run, task_id="load", key="watermark", value="2026-11-30")
    _, token = ApiToken.issue(operator, "managed")
    return live_server.url, token


def api_of(url: str, **settings) -> rest.AirflowApi:
    return rest.AirflowApi(rest.ApiSettings(url=url, **settings))


@live
def test_a_refused_token_is_asked_for_again_once(served, tmp_path):
    url, good = served
    line, runs = command(tmp_path, "ssa_revoked-or-expired", good)
    api = api_of(url, token_command=line)
    body = api.request("GET", KEYS)
    assert [e["key"] for e in body["task_state_store"]] == ["watermark"] and runs() == 2
    api.request("GET", KEYS)
    assert runs() == 2  # kept: the good one does not expire for five minutes (AIRFLOW_API_TOKEN_TTL)

    refused = api_of(url, token="ssa_not-a-token")
    with pytest.raises(rest.AirflowApiError) as failed:
        refused.request("GET", KEYS)
    assert failed.value.status == 401 and failed.value.unavailable and "ssa_not-a-token" not in str(failed.value)


@live
def test_overloaded_answers_are_tried_again_then_reported(served):
    url, token = served
    with TcpProxy(int(url.rsplit(":", 1)[1])) as proxy:
        api = api_of(f"http://127.0.0.1:{proxy.port}", token=token, retries=2, timeout=10)
        proxy.answer(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nConnection: close\r\n\r\n", times=2)
        assert api.request("GET", KEYS)["total_entries"] == 1 and proxy.answered == 2
        proxy.answer(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\nConnection: close\r\n\r\n", times=3)
        with pytest.raises(rest.AirflowApiError) as failed:
            api.request("GET", KEYS)
        assert (failed.value.status, failed.value.detail) == (429, "Airflow's API asks to slow down (429)")
        assert proxy.answered == 5
        with pytest.raises(rest.AirflowApiError) as not_found:  # Airflow's own errors are not tried again
            api.request("GET", f"{KEYS}/nope")
        assert (not_found.value.status, not_found.value.detail) == (404, "Task state store key 'nope' not found")
        assert not not_found.value.unavailable and proxy.answered == 5


@live
def test_a_hung_api_costs_one_deadline_and_a_refused_one_is_tried_again(served):
    url, token = served
    with TcpProxy(int(url.rsplit(":", 1)[1])) as proxy:
        api = api_of(f"http://127.0.0.1:{proxy.port}", token=token, retries=2, timeout=1)
        proxy.black_hole()
        started = time.monotonic()
        with pytest.raises(rest.AirflowApiError, match=r"did not answer within 1s"):
            api.request("GET", KEYS)
        assert time.monotonic() - started < 3  # not sent again: three attempts and their pauses take 4.5 s
        proxy.refuse()
        with pytest.raises(rest.AirflowApiError) as refused:
            api.request("GET", KEYS)
        assert refused.value.detail == "cannot connect to Airflow's API: connection refused"
        proxy.pass_through()
        assert api.request("GET", KEYS)["total_entries"] == 1


@live
def test_requests_beyond_the_concurrency_wait_one_deadline_for_a_turn(served):
    url, token = served
    api = api_of(url, token=token, concurrency=1, timeout=1, retries=0)
    with api.turn():  # the one turn, as a request in flight holds it
        started = time.monotonic()
        with pytest.raises(rest.AirflowApiError, match="1 requests to Airflow's API were already waiting"):
            api.request("GET", KEYS)
        assert time.monotonic() - started >= 1
    assert api.request("GET", KEYS)["total_entries"] == 1  # the turn is free again
