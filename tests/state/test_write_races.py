"""Parallel writes of one key through a live server, on both databases: every audited write records the
value it replaced, so the events of a key form a chain (docs/audit.md, "Parallel writes"), and undoing them
one by one, newest first, walks the key back to where it started without a conflict.

N threads, each with its own HTTP connection, are released at once by a barrier: the first writes of a key
that does not exist yet race each other (API PUTs, the dashboard's add form), and mixed with PATCHes and
the value editor, which overwrite what the others committed.
"""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from itertools import pairwise
from urllib.parse import quote

import pytest
import requests

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.records.models import AuditEvent, AuditKey
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
N = 10  # writers at once
ROUNDS = 3  # writes per writer in the mixed tests
RESTORE_ROUNDS = 10  # races of a restore with PUTs: the window between its lock and its insert is narrow
RUN_ID = "manual__2026-12-01T00:00:00+00:00"
CSRF = "r" * 32  # a CSRF secret of the right length: the cookie and the header carry the same one
TIMEOUT = 60


@pytest.fixture
def scene(dag_run_factory, task_instance_factory, asset_factory):
    run = dag_run_factory(dag_id="etl", run_id=RUN_ID)
    task_instance_factory(run, task_id="t")
    return {"run": run, "asset": asset_factory(name="orders")}


@pytest.fixture
def connect(live_server, operator, client):
    """A new HTTP session per writer (requests' sessions are not thread-safe): the API with a bearer token,
    the dashboard with the operator's session cookie and a CSRF secret."""
    _, token = ApiToken.issue(operator, "race")
    client.force_login(operator)
    sessionid = client.cookies["sessionid"].value

    def make() -> requests.Session:
        session = requests.Session()
        session.base = live_server.url
        session.headers.update({"Authorization": f"Bearer {token}", "X-CSRFToken": CSRF, "HX-Request": "true"})
        session.cookies.set("sessionid", sessionid)
        session.cookies.set("csrftoken", CSRF)
        return session

    return make


def task_url(key: str) -> str:
    run = quote(RUN_ID, safe="")
    return f"/api/v2/dags/etl/dagRuns/{run}/taskInstances/t/state-store/{quote(key, safe='')}"


def asset_url(asset, key: str) -> str:
    return f"/api/v2/assets/{asset.pk}/state-store/{quote(key, safe='')}"


def all_at_once(connect, writers) -> list:
    """Run each ``writer(session)`` in a thread of its own, all released at the same moment; their answers
    (a list each) in writer order."""
    barrier = threading.Barrier(len(writers))

    def run(writer):
        with connect() as session:
            session.get(session.base + "/api/statestore/v1/stats", timeout=TIMEOUT)  # connected and logged in
            barrier.wait(timeout=TIMEOUT)
            return writer(session)

    with ThreadPoolExecutor(max_workers=len(writers)) as pool:
        futures = [pool.submit(run, writer) for writer in writers]
        return [future.result() for future in futures]


def put(value, url):
    def write(session):
        return [("put", session.put(session.base + url, json={"value": value}, timeout=TIMEOUT))]

    return write


def chain_of(failed_ok: bool = False, **where) -> list[AuditKey]:
    """The key's audit records in the order their changes were made: an event is created while its key is
    locked, so event ids follow the writes. A failed event changed nothing: it is no part of the chain, and
    only where ``failed_ok`` may there be one."""
    records = list(AuditKey.objects.filter(**where).select_related("event").order_by("event_id"))
    allowed = {AuditEvent.Status.DONE, AuditEvent.Status.FAILED} if failed_ok else {AuditEvent.Status.DONE}
    assert {r.event.status for r in records} <= allowed, [r.event.status for r in records]
    return [r for r in records if r.event.status == AuditEvent.Status.DONE]


def assert_chain(records: list[AuditKey], final: tuple | None) -> None:
    """The first record created the key; each next one replaced what the one before it left; the last one
    left what the table holds."""
    assert records, "no audited write"
    assert records[0].before_value is None, "the first write found the key already there"
    for number, (previous, record) in enumerate(pairwise(records), start=2):
        replaced = (record.before_value, record.before_expires_at)
        assert replaced == (previous.after_value, previous.after_expires_at), (
            f"write {number} of {len(records)} records that it replaced {replaced}, but the write before it "
            f"left {(previous.after_value, previous.after_expires_at)}"
        )
    assert (records[-1].after_value, records[-1].after_expires_at) == final


def undo_all(connect, records: list[AuditKey], current) -> None:
    """Undo every event, newest first, through the API: each one brings back exactly the value its record
    says it replaced (the first one deletes the key), so none is a conflict."""
    with connect() as session:
        for record in reversed(records):
            response = session.post(
                f"{session.base}/api/statestore/v1/audit-events/{record.event_id}/restore", timeout=TIMEOUT
            )
            assert response.status_code == 200, (record.event_id, response.status_code, response.text)
            assert response.json()["restored"] == 1, response.json()
            before = (record.before_value, record.before_expires_at) if record.before_value is not None else None
            assert current() == before


def task_state(key: str):
    row = TaskStateStore.objects.filter(dag_id="etl", run_id=RUN_ID, task_id="t", map_index=-1, key=key).first()
    return None if row is None else (row.value, row.expires_at)


def asset_state(asset, key: str):
    row = AssetStateStore.objects.filter(asset=asset, key=key).first()
    return None if row is None else (row.value, None)


def task_records(key: str, failed_ok: bool = False) -> list[AuditKey]:
    where = {"dag_id": "etl", "run_id": RUN_ID, "task_id": "t", "map_index": -1, "key": key}
    return chain_of(failed_ok, **where, event__store="task")


def asset_records(asset, key: str, failed_ok: bool = False) -> list[AuditKey]:
    return chain_of(failed_ok, asset_id=asset.pk, key=key, event__store="asset")


def assert_answers(answers, allowed: dict[str, set[int]]) -> int:
    """Every answer is one its operation may give under contention (never a 5xx); the number of writes
    that changed the key (each writer's value is its own, so every accepted write changes it)."""
    written = 0
    for kind, response in (answer for writer in answers for answer in writer):
        assert response.status_code in allowed[kind], (kind, response.status_code, response.text[:500])
        if kind == "add" and response.status_code == 422:  # the add form refuses only an existing key
            assert "already exists" in response.text, response.text[:2000]
        written += response.status_code in (200, 204)
    return written


def test_parallel_puts_of_a_new_task_key_record_a_chain(connect, scene):
    answers = all_at_once(connect, [put({"writer": i}, task_url("new")) for i in range(N)])
    assert assert_answers(answers, {"put": {204}}) == N
    records = task_records("new")
    assert len(records) == N
    assert_chain(records, task_state("new"))
    undo_all(connect, records, lambda: task_state("new"))


def test_parallel_puts_of_a_new_asset_key_record_a_chain(connect, scene):
    asset = scene["asset"]
    answers = all_at_once(connect, [put({"writer": i}, asset_url(asset, "new")) for i in range(N)])
    assert assert_answers(answers, {"put": {204}}) == N
    records = asset_records(asset, "new")
    assert len(records) == N
    assert_chain(records, asset_state(asset, "new"))
    undo_all(connect, records, lambda: asset_state(asset, "new"))


def mixed_task_writer(i: int, run_pk: int, key: str):
    """Writer ``i``: PUTs, PATCHes or the dashboard's add form (the first ones of a key that may not exist
    yet), then the value editor once the key has an id."""

    def write(session):
        answers = []
        for n in range(ROUNDS):
            value = {"writer": i, "round": n}
            if i % 3 == 0:
                answers.append(
                    ("put", session.put(session.base + task_url(key), json={"value": value}, timeout=TIMEOUT))
                )
            elif i % 3 == 1:
                url = session.base + task_url(key)
                answers.append(("patch", session.patch(url, json={"value": value}, timeout=TIMEOUT)))
            else:
                form = {"key": key, "value": f'{{"writer": {i}, "round": {n}}}', "map_index": "-1", "expiry": "never"}
                answers.append(
                    ("add", session.post(f"{session.base}/runs/{run_pk}/tasks/t/add/", data=form, timeout=TIMEOUT))
                )
            key_id = TaskStateStore.objects.filter(run_id=RUN_ID, key=key).values_list("pk", flat=True).first()
            if key_id is not None:
                edit = {"value": f'{{"writer": {i}, "round": {n}, "editor": true}}'}
                answers.append(
                    ("edit", session.post(f"{session.base}/keys/task/{key_id}/edit/", data=edit, timeout=TIMEOUT))
                )
        return answers

    return write


def test_mixed_parallel_writes_of_a_new_task_key_record_a_chain(connect, scene):
    run_pk = scene["run"].pk
    answers = all_at_once(connect, [mixed_task_writer(i, run_pk, "mixed") for i in range(N)])
    # A PATCH or the editor finds no key before the first write; the add form refuses a key that exists.
    written = assert_answers(answers, {"put": {204}, "patch": {200, 404}, "add": {204, 422}, "edit": {204}})
    records = task_records("mixed")
    assert len(records) == written
    assert_chain(records, task_state("mixed"))
    undo_all(connect, records, lambda: task_state("mixed"))


def mixed_asset_writer(i: int, asset, key: str):
    """Writer ``i``: PUTs, the dashboard's add form, or the value editor (no key yet: the editor says it
    is gone)."""

    def write(session):
        answers = []
        for n in range(ROUNDS):
            text = f'{{"writer": {i}, "round": {n}}}'
            if i % 3 == 0:
                url = session.base + asset_url(asset, key)
                answers.append(("put", session.put(url, json={"value": {"writer": i, "round": n}}, timeout=TIMEOUT)))
            elif i % 3 == 1:
                form = {"key": key, "value": text}
                answers.append(
                    ("add", session.post(f"{session.base}/assets/{asset.pk}/add/", data=form, timeout=TIMEOUT))
                )
            else:
                url = f"{session.base}/assets/{asset.pk}/key/edit/"
                answers.append(("edit", session.post(url, data={"key": key, "value": text}, timeout=TIMEOUT)))
        return answers

    return write


def test_mixed_parallel_writes_of_a_new_asset_key_record_a_chain(connect, scene):
    asset = scene["asset"]
    answers = all_at_once(connect, [mixed_asset_writer(i, asset, "mixed") for i in range(N)])
    written = assert_answers(answers, {"put": {204}, "add": {204, 422}, "edit": {204, 404}})
    records = asset_records(asset, "mixed")
    assert len(records) == written
    assert_chain(records, asset_state(asset, "mixed"))
    undo_all(connect, records, lambda: asset_state(asset, "mixed"))


def restore(event_id: int):
    def write(session):
        url = f"{session.base}/api/statestore/v1/audit-events/{event_id}/restore"
        return [("restore", session.post(url, timeout=TIMEOUT))]

    return write


def late_put(value, url, delay: float):
    def write(session):
        time.sleep(delay)  # spread over the restore's own steps
        return put(value, url)(session)

    return write


@pytest.mark.parametrize("store", ["task", "asset"])
def test_a_restore_that_brings_a_key_back_while_others_create_it_records_a_chain(connect, scene, store):
    """Undoing a delete re-creates the key; writers creating it at the same time make the restore a
    conflict (409: nothing restored) or come after it, never a 500 nor an overwrite recorded as a create."""
    asset = scene["asset"]
    url, current, records = (
        (task_url, task_state, task_records)
        if store == "task"
        else (lambda k: asset_url(asset, k), lambda k: asset_state(asset, k), partial(asset_records, asset))
    )
    with connect() as session:
        for round_ in range(RESTORE_ROUNDS):
            key = f"back{round_}"
            assert session.put(session.base + url(key), json={"value": "first"}, timeout=TIMEOUT).status_code == 204
            assert session.delete(session.base + url(key), timeout=TIMEOUT).status_code == 204
            deleted = records(key)[-1].event_id
            writers = [restore(deleted)] + [late_put({"writer": i}, url(key), i * 0.004) for i in range(N - 1)]
            answers = all_at_once(connect, writers)
            written = assert_answers(answers, {"put": {204}, "restore": {200, 409}})
            chain = records(key, failed_ok=True)  # a restore refused after its event was recorded
            assert len(chain) == 2 + written
            assert_chain(chain, current(key))


def add_form(url: str, form: dict):
    def write(session):
        return [("add", session.post(session.base + url, data=form, timeout=TIMEOUT))]

    return write


@pytest.mark.parametrize("store", ["task", "asset"])
def test_parallel_add_forms_of_a_new_key_create_it_once(connect, scene, store):
    """The add forms refuse an existing key: of N at once, one adds it, the others say it exists, and
    only the one that added it is recorded (no event for a refused add, failed or not)."""
    run, asset = scene["run"], scene["asset"]
    if store == "task":
        url, fields = f"/runs/{run.pk}/tasks/t/add/", {"map_index": "-1", "expiry": "never"}
    else:
        url, fields = f"/assets/{asset.pk}/add/", {}
    writers = [add_form(url, {"key": "added", "value": f'{{"writer": {i}}}', **fields}) for i in range(N)]
    assert assert_answers(all_at_once(connect, writers), {"add": {204, 422}}) == 1
    records = task_records("added") if store == "task" else asset_records(asset, "added")
    assert len(records) == 1
    assert_chain(records, task_state("added") if store == "task" else asset_state(asset, "added"))
