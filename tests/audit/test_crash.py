"""A process killed between the two databases: the change is never missing from the audit trail.

The change happens in Airflow's database, its event in the dashboard's. A real process (``manage.py shell``)
runs a clear and is killed with SIGKILL while it waits at a fault-injection point (``STATESTORE_FAULT_PAUSE``):
after the pending event was committed (before the change), and after Airflow's transaction committed (before
the event was confirmed).
"""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.exports import restore as restores
from statestore_admin.records.models import AuditEvent
from tests.gc.test_gc_concurrency import ROOT, manage_env

from ..conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]

CLEAR = (
    "from statestore_admin.state import services; from statestore_admin.access.actors import Actor; "
    "from statestore_admin.state.selectors import TaskAddress; "
    "services.clear_task_instance(actor=Actor.command(), scope=TaskAddress('etl', 'r1', 't'))"
)


@pytest.fixture
def keys(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="r1")
    task_instance_factory(run, task_id="t")
    for name in ("a", "b", "c"):
        task_key_factory(run, task_id="t", key=name, value={"v": name})
    return run


def run_until_killed(step: str, marker: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", CLEAR],
        cwd=ROOT,
        env={**manage_env(), "STATESTORE_FAULT_PAUSE": f"{step}:{marker}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists():
        if process.poll() is not None:
            raise AssertionError(f"exited {process.returncode} before {step}: {process.stderr.read()}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"never reached {step}")
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL


def test_killed_after_the_change_leaves_a_pending_event_with_every_key(keys, tmp_path, operator):
    run_until_killed("after_change", tmp_path / "marker")
    assert not TaskStateStore.objects.filter(dag_id="etl").exists()  # Airflow's transaction had committed
    event = AuditEvent.objects.get()
    assert (event.status, event.action, event.via, event.key_count) == ("pending", "clear", "command", 3)
    assert sorted(event.keys.values_list("key", "before_value")) == [
        ("a", '{"v": "a"}'),
        ("b", '{"v": "b"}'),
        ("c", '{"v": "c"}'),
    ]
    assert event.outcome == "pending"
    AuditEvent.objects.filter(pk=event.pk).update(at=timezone.now() - timedelta(minutes=2))
    assert AuditEvent.objects.get(pk=event.pk).outcome == "unknown"
    # The operator can still undo it: the recorded keys come back.
    from statestore_admin.access.actors import Actor

    restores.restore_event(actor=Actor(via="ui", user=operator), event_id=event.pk)
    assert sorted(TaskStateStore.objects.filter(dag_id="etl").values_list("key", flat=True)) == ["a", "b", "c"]


def test_killed_before_the_change_changes_nothing_and_the_event_stays_pending(keys, tmp_path):
    run_until_killed("after_pending", tmp_path / "marker")
    assert TaskStateStore.objects.filter(dag_id="etl").count() == 3  # Airflow's transaction rolled back
    event = AuditEvent.objects.get()
    assert event.status == "pending" and event.keys.count() == 3
