"""`manage.py audit_prune` (audit retention) and `manage.py state_store_restore` (restore from an export)."""

import io
import json
import socket
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.audit import retention
from statestore_admin.core.errors import Invalid
from statestore_admin.exports import documents as exports
from statestore_admin.records.models import AuditEvent, AuditKey
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


def run(command, *args, **options):
    """Run a command; return (stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    call_command(command, *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


# audit_prune -----------------------------------------------------------------------------------------
def make_event(days_ago: float, keys: int = 2, **fields) -> AuditEvent:
    event = AuditEvent.objects.create(
        at=timezone.now() - timedelta(days=days_ago),
        status=AuditEvent.Status.DONE,
        actor="alice",
        via="ui",
        action="set",
        store="task",
        key_count=keys,
        **fields,
    )
    AuditKey.objects.bulk_create(
        [
            AuditKey(event=event, dag_id="d", run_id="r", task_id="t", map_index=-1, key=f"k{n}", after_value="1")
            for n in range(keys)
        ]
    )
    return event


def pruned() -> AuditEvent:
    """The events that were there before the prune: its own event (action prune) aside."""
    return AuditEvent.objects.exclude(action=AuditEvent.Action.PRUNE)


@pytest.fixture
def history():
    old = [make_event(400 + n) for n in range(5)]
    recent = [make_event(days) for days in (364, 30, 0)]
    return old, recent


def test_prune_deletes_old_events_and_their_keys_in_batches(history):
    old, recent = history
    out, _ = run("audit_prune", older_than=365, batch_size=2)
    assert out.startswith("Deleted 5 audit event(s) and 10 audited key(s) older than ")
    assert out.rstrip().endswith("in 3 batch(es).")
    assert set(pruned().values_list("pk", flat=True)) == {e.pk for e in recent}
    assert set(AuditKey.objects.values_list("event_id", flat=True)) == {e.pk for e in recent}
    assert AuditKey.objects.count() == 6  # the recent events keep every key


def test_prune_dry_run_counts_and_deletes_nothing(history):
    out, _ = run("audit_prune", older_than=365, dry_run=True)
    assert out.startswith("Would delete 5 audit event(s) and 10 audited key(s) older than ")
    assert AuditEvent.objects.count() == 8 and AuditKey.objects.count() == 16


def test_prune_with_nothing_old_is_a_no_op(history):
    out, _ = run("audit_prune", older_than=3650)
    assert out.startswith("Deleted 0 audit event(s) and 0 audited key(s)")
    assert pruned().count() == 8


def test_prune_default_batch_size_and_exact_boundary():
    make_event(2.0 + 1 / 24)
    kept = make_event(2.0 - 1 / 24)
    result = retention.prune(timedelta(days=2), actor=Actor.command())
    assert (result.events, result.keys, result.batches) == (1, 2, 1)
    assert list(pruned().values_list("pk", flat=True)) == [kept.pk]


def test_a_prune_records_who_ran_it_in_the_trail(history):
    run("audit_prune", older_than=365, batch_size=2)
    event = AuditEvent.objects.get(action=AuditEvent.Action.PRUNE)
    command = Actor.command()
    assert (event.actor, event.os_user, event.host, event.via) == (
        command.name,
        command.os_user,
        command.host,
        "command",
    )
    assert event.status == AuditEvent.Status.DONE and event.finished_at is not None
    assert (event.details["events"], event.details["keys"], event.details["batches"]) == (5, 10, 3)
    run("audit_prune", older_than=365, dry_run=True)  # a dry run changes nothing: no event
    assert AuditEvent.objects.filter(action=AuditEvent.Action.PRUNE).count() == 1


def test_a_prune_as_someone_records_them_and_keeps_its_own_event(user_factory):
    make_event(400)
    admin = user_factory("root")
    # ``now`` a year ahead: the run's own event is older than the cutoff, and stays
    result = retention.prune(
        timedelta(days=2), actor=Actor(via="ui", user=admin), now=timezone.now() + timedelta(days=365)
    )
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.user, event.via) == ("prune", "root", admin, "ui")
    assert result.events == event.details["events"] == 1


def test_a_restore_of_a_pruned_event_stays(history):
    old, _ = history
    restore = make_event(1, restored_from=old[0])
    run("audit_prune", older_than=365)
    restore.refresh_from_db()
    assert restore.restored_from is None and AuditKey.objects.filter(event=restore).count() == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"older_than": 0}, "--older-than"),
        ({"older_than": -5}, "--older-than"),
        ({"older_than": 30, "batch_size": 0}, "--batch-size"),
    ],
)
def test_prune_refuses_bad_numbers(history, options, message):
    with pytest.raises(CommandError, match=message) as excinfo:
        run("audit_prune", **options)
    assert excinfo.value.returncode == 2
    assert AuditEvent.objects.count() == 8


def test_prune_rules_are_in_the_domain():
    with pytest.raises(Invalid) as excinfo:
        retention.prune(timedelta(hours=23), batch_size=0, actor=Actor.command())
    assert set(excinfo.value.message_dict) == {"older_than", "batch_size"}


# state_store_restore ----------------------------------------------------------------------------------
@pytest.fixture
def exported(tmp_path, dag_run_factory, task_key_factory, asset_factory, asset_key_factory):
    run_ = dag_run_factory(dag_id="etl")
    expiry = (timezone.now() + timedelta(days=3)).replace(microsecond=0)
    task_key_factory(run_, task_id="submit", key="job_id", value="spark-1", expires_at=None)
    task_key_factory(run_, task_id="train", map_index=2, key="checkpoint", value={"epoch": 7}, expires_at=expiry)
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="watermark", value="2026-11-30")
    path = tmp_path / "export.json"
    path.write_text(
        "".join(
            exports.iter_document(
                TaskStateStore.objects.filter(dag_id="etl"), AssetStateStore.objects.filter(asset=asset)
            )
        )
    )
    state = {
        "task": set(TaskStateStore.objects.values_list("task_id", "map_index", "key", "value", "expires_at")),
        "asset": set(AssetStateStore.objects.values_list("asset_id", "key", "value")),
    }
    return path, state


def current():
    return {
        "task": set(TaskStateStore.objects.values_list("task_id", "map_index", "key", "value", "expires_at")),
        "asset": set(AssetStateStore.objects.values_list("asset_id", "key", "value")),
    }


def test_export_delete_restore_brings_the_keys_back(exported):
    path, before = exported
    TaskStateStore.objects.all().delete()
    AssetStateStore.objects.all().delete()
    out, _ = run("state_store_restore", str(path))
    assert out.startswith("Restored 3 keys.")
    assert current() == before
    events = list(AuditEvent.objects.order_by("id"))
    assert [(e.action, e.via, e.store, e.key_count, e.status) for e in events] == [
        ("restore", "command", "task", 2, "done"),
        ("restore", "command", "asset", 1, "done"),
    ]
    assert events[0].user is None and events[0].os_user and events[0].host == socket.gethostname()
    assert f"#{events[0].pk}" in out and f"#{events[1].pk}" in out
    keys = AuditKey.objects.filter(event=events[0]).order_by("key")
    assert [(k.key, k.before_value, k.after_value) for k in keys] == [
        ("checkpoint", None, '{"epoch": 7}'),
        ("job_id", None, '"spark-1"'),
    ]


def test_restore_of_unchanged_keys_changes_nothing(exported):
    path, before = exported
    out = json.loads(run("state_store_restore", str(path), json=True)[0])
    assert (out["outcome"], out["restored"], out["unchanged"], out["events"]) == ("restored", 0, 3, [])
    assert current() == before and not AuditEvent.objects.exists()


def test_conflicts_are_listed_and_exit_1_without_overwrite(exported):
    path, before = exported
    TaskStateStore.objects.filter(key="job_id").update(value='"spark-2"')
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as excinfo:
        call_command("state_store_restore", str(path), stdout=out, stderr=err)
    assert excinfo.value.code == 1
    assert "written again since; nothing was restored" in err.getvalue() and "--overwrite" in err.getvalue()
    assert "key 'job_id': now '\"spark-2\"', in the file '\"spark-1\"'" in err.getvalue()
    assert TaskStateStore.objects.get(key="job_id").value == '"spark-2"'
    assert not AuditEvent.objects.filter(status="done").exists()
    run("state_store_restore", str(path), overwrite=True)
    assert current() == before


def test_conflicts_as_json(exported):
    path, _ = exported
    AssetStateStore.objects.filter(key="watermark").update(value='"2027-01-01"')
    out = io.StringIO()
    with pytest.raises(SystemExit) as excinfo:
        call_command("state_store_restore", str(path), json=True, stdout=out, stderr=io.StringIO())
    body = json.loads(out.getvalue())
    assert excinfo.value.code == 1 and body["outcome"] == "conflict"
    assert [(c["key"], c["current"]["value"], c["restore"]["value"]) for c in body["conflicts"]] == [
        ("watermark", '"2027-01-01"', '"2026-11-30"')
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "Cannot read"),
        ("{not json", "is not valid JSON"),
        ('{"format": "something-else"}', "Not a statestore-admin export"),
        ('{"format": "statestore-admin/keys", "version": 1, "keys": [{"store": "task", "key": ""}]}', "keys\\[0\\]"),
    ],
)
def test_a_bad_file_is_exit_2_and_changes_nothing(tmp_path, exported, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(CommandError, match=message) as excinfo:
        run("state_store_restore", str(path))
    assert excinfo.value.returncode == 2
    assert current() == exported[1] and not AuditEvent.objects.exists()
