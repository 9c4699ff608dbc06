"""The write path, called directly: one event per change with exact before/after, and undo of each."""

import json
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from statestore_admin.access import permissions
from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.audit import events as audit
from statestore_admin.core.errors import Conflict, Forbidden, Invalid, NotFound
from statestore_admin.core.values import AT, DEFAULT, NEVER, Expiry
from statestore_admin.exports import restore as restores
from statestore_admin.exports.documents import Target
from statestore_admin.records.models import AuditEvent, AuditKey
from statestore_admin.state import services
from statestore_admin.state.selectors import TaskAddress

from ..conftest import BOTH_DATABASES
from ..factories import make_task_keys

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
LATER = timezone.now().replace(microsecond=0) + timedelta(days=3)


@pytest.fixture
def run(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="r1")
    task_instance_factory(run, task_id="t")
    for map_index in (0, 1):
        task_instance_factory(run, task_id="mapped", map_index=map_index)
        task_key_factory(run, task_id="mapped", map_index=map_index, key="a", value=map_index, expires_at=LATER)
    task_key_factory(run, task_id="t", key="job", value={"id": 1}, expires_at=LATER)
    task_key_factory(run, task_id="t", key="never", value="n")
    return run


@pytest.fixture
def asset(asset_factory, asset_key_factory):
    asset = asset_factory(name="orders", uri="s3://b/orders")
    asset_key_factory(asset, key="watermark", value="2026-11-01", kind="task", dag_id="etl", run_id="r1", task_id="t")
    asset_key_factory(asset, key="cursor", value={"id": 7}, kind="watcher")
    return asset


T = TaskAddress("etl", "r1", "t")


def state():
    """Everything in both stores: {(scope..., key): (value, expires_at)}."""
    rows = {
        (k.dag_id, k.run_id, k.task_id, k.map_index, k.key): (k.value, k.expires_at)
        for k in TaskStateStore.objects.all()
    }
    rows.update({(a.asset_id, a.key): (a.value, None) for a in AssetStateStore.objects.all()})
    return rows


def only_event():
    events = list(AuditEvent.objects.all())
    assert len(events) == 1, events
    return events[0]


def keys_of(event):
    return {k.key: k for k in event.keys.all()}


# One event per change, with exact before/after --------------------------------------------------------
def test_set_overwrites_and_records_before_and_after(run, ui):
    before = TaskStateStore.objects.get(key="job")
    services.set_task_key(actor=ui, scope=T, key="job", value={"id": 2}, expiry=Expiry(NEVER))
    event = only_event()
    assert (event.action, event.via, event.actor, event.status, event.key_count) == ("set", "ui", "operator", "done", 1)
    assert (event.dag_id, event.run_id, event.task_id, event.map_index) == ("etl", "r1", "t", -1)
    key = keys_of(event)["job"]
    assert (key.before_value, key.before_expires_at) == (before.value, before.expires_at)
    assert (key.after_value, key.after_expires_at) == ('{"id": 2}', None)


def test_add_records_no_before_and_refuses_an_existing_key(run, ui):
    services.set_task_key(actor=ui, scope=T, key="new", value=[1], expiry=Expiry(DEFAULT), mode=services.CREATE)
    key = keys_of(only_event())["new"]
    assert key.before_value is None and key.after_value == "[1]"
    # The default expiry is now + default_retention_days (30).
    assert abs(key.after_expires_at - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)
    with pytest.raises(Conflict, match="already exists"):
        services.set_task_key(actor=ui, scope=T, key="new", value=[2], expiry=Expiry(DEFAULT), mode=services.CREATE)
    assert AuditEvent.objects.count() == 1


def test_patch_keeps_expiry_and_skips_a_no_op(run, ui):
    job = TaskStateStore.objects.get(key="job")
    services.patch_task_key(actor=ui, ref=services.TaskKeyRef(id=job.pk), value={"id": 1})  # unchanged
    assert AuditEvent.objects.count() == 0 and TaskStateStore.objects.get(pk=job.pk).updated_at == job.updated_at
    services.patch_task_key(actor=ui, ref=services.TaskKeyRef(scope=T, key="job"), value={"id": 5})
    key = keys_of(only_event())["job"]
    assert (key.before_value, key.after_value) == ('{"id": 1}', '{"id": 5}')
    assert key.before_expires_at == key.after_expires_at == LATER


def test_patch_needs_the_task_instance_by_id_and_by_scope_alike(run, ui, task_key_factory, dag_run_factory):
    """Airflow's PATCH answers 404 when the task instance is gone; the dashboard's edit (by id) does the same."""
    orphan = task_key_factory(run, task_id="gone", key="k", value=1)
    for ref in (
        services.TaskKeyRef(id=orphan.pk),
        services.TaskKeyRef(scope=TaskAddress("etl", "r1", "gone"), key="k"),
    ):
        with pytest.raises(NotFound, match="Task instance not found"):
            services.patch_task_key(actor=ui, ref=ref, value=2)
    assert TaskStateStore.objects.get(pk=orphan.pk).value == "1" and AuditEvent.objects.count() == 0


def test_expiry_expire_delete_and_clear_each_record_one_event(run, ui):
    job = TaskStateStore.objects.get(key="job")
    services.set_task_expiry(actor=ui, ref=services.TaskKeyRef(id=job.pk), expiry=Expiry(AT, LATER + timedelta(days=1)))
    outcome = services.expire_task_keys(actor=ui, selection=services.TaskSelection(ids=(job.pk,)))
    assert outcome.changed == 1 and outcome.event.action == "expire"
    outcome = services.clear_task_instance(actor=ui, scope=TaskAddress("etl", "r1", "mapped"), all_map_indices=True)
    assert outcome.changed == 2 and outcome.event.details == {"all_map_indices": True}
    assert (outcome.event.task_id, outcome.event.map_index) == ("mapped", None)
    outcome = services.delete_task_keys(actor=ui, selection=services.TaskSelection(ids=(job.pk,)))
    assert outcome.event.action == "delete" and keys_of(outcome.event)["job"].after_value is None
    assert list(AuditEvent.objects.order_by("id").values_list("action", "key_count")) == [
        ("expiry", 1),
        ("expire", 1),
        ("clear", 2),
        ("delete", 1),
    ]


def test_nothing_changed_means_no_event(run, ui):
    services.delete_task_keys(actor=ui, selection=services.TaskSelection(scope=T, keys=("absent",)))
    assert AuditEvent.objects.count() == 0


def test_asset_writes_record_the_asset(asset, ui):
    services.set_asset_key(actor=ui, asset_id=asset.pk, key="cursor", value={"id": 8}, mode=services.UPDATE)
    services.set_asset_key(actor=ui, asset_id=asset.pk, key="new", value=1)
    services.delete_asset_keys(actor=ui, asset_id=asset.pk, keys=["new"])
    services.clear_asset(actor=ui, asset_id=asset.pk)
    events = list(AuditEvent.objects.order_by("id"))
    assert [(e.action, e.key_count, e.store) for e in events] == [
        ("patch", 1, "asset"),
        ("set", 1, "asset"),
        ("delete", 1, "asset"),
        ("clear", 2, "asset"),
    ]
    assert all((e.asset_id, e.asset_name, e.asset_uri) == (asset.pk, "orders", "s3://b/orders") for e in events)
    cursor = keys_of(events[0])["cursor"]
    assert (cursor.before_value, cursor.after_value, cursor.after_expires_at) == ('{"id": 7}', '{"id": 8}', None)


def test_bad_input_and_missing_permissions_change_nothing_and_record_nothing(run, asset, user_factory, ui):
    viewer = Actor(via="ui", user=user_factory("v", perms=["task.view", "asset.view"]))
    before = state()
    attempts = [
        (Invalid, lambda: services.set_task_key(actor=ui, scope=T, key="k" * 513, value=1, expiry=Expiry(DEFAULT))),
        (Invalid, lambda: services.set_task_key(actor=ui, scope=T, key="k", value=None, expiry=Expiry(DEFAULT))),
        (
            Invalid,
            lambda: services.set_task_key(actor=ui, scope=T, key="k", value=float("nan"), expiry=Expiry(DEFAULT)),
        ),
        (
            NotFound,
            lambda: services.set_task_key(
                actor=ui, scope=TaskAddress("etl", "nope", "t"), key="k", value=1, expiry=Expiry(DEFAULT)
            ),
        ),
        (NotFound, lambda: services.clear_asset(actor=ui, asset_id=999999)),
        (Forbidden, lambda: services.delete_task_keys(actor=viewer, selection=services.TaskSelection(scope=T))),
        (Forbidden, lambda: services.clear_asset(actor=viewer, asset_id=asset.pk)),
        (Forbidden, lambda: services.set_asset_key(actor=viewer, asset_id=asset.pk, key="x", value=1)),
    ]
    for error, attempt in attempts:
        with pytest.raises(error):
            attempt()
    assert state() == before and AuditEvent.objects.count() == 0


def test_a_change_that_fails_after_its_event_is_recorded_rolls_back_and_is_marked_failed(run, ui):
    job = TaskStateStore.objects.get(key="job")
    with pytest.raises(RuntimeError):
        with audit.change(ui, "delete", "task") as recorder:
            recorder.record([audit.task_change(job, before=(job.value, job.expires_at), after=None, limit=0)])
            TaskStateStore.objects.filter(pk=job.pk).delete()
            raise RuntimeError("the Airflow database went away")
    assert TaskStateStore.objects.filter(pk=job.pk).exists()  # Airflow's transaction rolled back
    event = only_event()
    assert event.status == "failed" and "went away" in event.error


def test_pending_event_older_than_a_minute_is_outcome_unknown(run, ui):
    event = AuditEvent.objects.create(actor="x", via="ui", action="delete", store="task")
    assert event.outcome == "pending"
    AuditEvent.objects.filter(pk=event.pk).update(at=timezone.now() - timedelta(minutes=2))
    assert AuditEvent.objects.get(pk=event.pk).outcome == "unknown"


def test_values_over_the_limit_are_kept_truncated_and_not_restorable(run, ui, monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__MAX_VALUE_STORAGE_BYTES", "0")
    services.set_task_key(actor=ui, scope=T, key="big", value="x" * 5000, expiry=Expiry(NEVER))
    monkeypatch.setenv("AIRFLOW__STATE_STORE__MAX_VALUE_STORAGE_BYTES", "1000")
    outcome = services.delete_task_keys(actor=ui, selection=services.TaskSelection(scope=T, keys=("big",)))
    key = keys_of(outcome.event)["big"]
    assert key.truncated and len(key.before_value.encode()) == 1000
    with pytest.raises(Invalid, match="truncated"):
        restores.restore_event(actor=ui, event_id=outcome.event.pk)


def test_commands_act_as_the_os_user(run, system):
    outcome = services.clear_task_instance(actor=system, scope=T)
    event = outcome.event
    assert event.via == "command" and event.user is None and event.os_user and event.host
    assert event.actor == f"{event.os_user}@{event.host}"


# Undo ------------------------------------------------------------------------------------------------
UNDOABLE = {
    "set": lambda a, run: services.set_task_key(actor=a, scope=T, key="job", value=9, expiry=Expiry(NEVER)),
    "add": lambda a, run: services.set_task_key(
        actor=a, scope=T, key="added", value=1, expiry=Expiry(DEFAULT), mode=services.CREATE
    ),
    "patch": lambda a, run: services.patch_task_key(actor=a, ref=services.TaskKeyRef(scope=T, key="job"), value=3),
    "expiry": lambda a, run: services.set_task_expiry(
        actor=a, ref=services.TaskKeyRef(scope=T, key="never"), expiry=Expiry(AT, LATER)
    ),
    "expire": lambda a, run: services.expire_task_keys(actor=a, selection=services.TaskSelection(scope=T)),
    "delete": lambda a, run: services.delete_task_keys(
        actor=a, selection=services.TaskSelection(scope=T, keys=("job",))
    ),
    "clear": lambda a, run: services.clear_task_instance(actor=a, scope=T),
    "clear all map indexes": lambda a, run: services.clear_task_instance(
        actor=a, scope=TaskAddress("etl", "r1", "mapped"), all_map_indices=True
    ),
    "asset set": lambda a, run: services.set_asset_key(actor=a, asset_id=run.asset.pk, key="watermark", value="x"),
    "asset add": lambda a, run: services.set_asset_key(actor=a, asset_id=run.asset.pk, key="n", value=1, mode="create"),
    "asset delete": lambda a, run: services.delete_asset_keys(actor=a, asset_id=run.asset.pk, keys=["cursor"]),
    "asset clear": lambda a, run: services.clear_asset(actor=a, asset_id=run.asset.pk),
}


@pytest.mark.parametrize("change", UNDOABLE)
def test_every_undoable_change_restores_exactly_what_it_changed(run, asset, ui, change):
    run.asset = asset
    before = state()
    UNDOABLE[change](ui, run)
    event = AuditEvent.objects.get()
    assert state() != before
    outcome = restores.restore_event(actor=ui, event_id=event.pk)
    assert state() == before, change
    assert outcome.restored == event.key_count and not outcome.kept and not outcome.missing
    restore = AuditEvent.objects.exclude(pk=event.pk).get()
    assert (restore.action, restore.restored_from_id, restore.key_count) == ("restore", event.pk, event.key_count)
    # The restore is itself a change: undoing it brings the first change back.
    restores.restore_event(actor=ui, event_id=restore.pk)
    assert AuditEvent.objects.count() == 3


def test_restoring_twice_changes_nothing_the_second_time(run, ui):
    outcome = services.clear_task_instance(actor=ui, scope=T)
    restores.restore_event(actor=ui, event_id=outcome.event.pk)
    again = restores.restore_event(actor=ui, event_id=outcome.event.pk)
    assert again.restored == 0 and again.unchanged == 2 and AuditEvent.objects.count() == 2


def test_a_key_written_again_is_a_conflict_resolved_per_key(run, ui):
    outcome = services.clear_task_instance(actor=ui, scope=T)
    services.set_task_key(actor=ui, scope=T, key="job", value="rewritten", expiry=Expiry(NEVER))
    with pytest.raises(Conflict) as conflict:
        restores.restore_event(actor=ui, event_id=outcome.event.pk)
    assert [(c["key"], c["current"]["value"], c["restore"]["value"]) for c in conflict.value.details] == [
        ("job", '"rewritten"', '{"id": 1}')
    ]
    assert not TaskStateStore.objects.filter(key="never").exists()  # nothing restored
    ident = conflict.value.details[0]["id"]
    kept = restores.restore_event(actor=ui, event_id=outcome.event.pk, resolutions={ident: restores.KEEP})
    assert kept.restored == 1 and len(kept.kept) == 1
    assert TaskStateStore.objects.get(key="job").value == '"rewritten"'
    assert TaskStateStore.objects.filter(key="never").exists()
    restores.restore_event(actor=ui, event_id=outcome.event.pk, overwrite=True)
    assert TaskStateStore.objects.get(key="job").value == '{"id": 1}'


def test_restore_reports_keys_whose_run_or_asset_is_gone(run, asset, ui):
    task_event = services.clear_task_instance(actor=ui, scope=T).event
    asset_event = services.clear_asset(actor=ui, asset_id=asset.pk).event
    run.delete()
    asset.delete()
    for event in (task_event, asset_event):
        outcome = restores.restore_event(actor=ui, event_id=event.pk)
        assert outcome.restored == 0 and len(outcome.missing) == event.key_count
        assert "no longer exists" in outcome.missing[0]["reason"]


def test_gc_and_failed_events_are_not_restorable(ui):
    for action, status in (("gc", "done"), ("delete", "failed")):
        event = AuditEvent.objects.create(actor="x", via="gc", action=action, store="task", status=status)
        with pytest.raises(Invalid):
            restores.restore_event(actor=ui, event_id=event.pk)
    with pytest.raises(NotFound):
        restores.restore_event(actor=ui, event_id=987654)


def test_restore_needs_write_permissions(run, ui, user_factory):
    event = services.clear_task_instance(actor=ui, scope=T).event
    changer = Actor(via="ui", user=user_factory("c", perms=["task.view", "task.change"]))
    with pytest.raises(Forbidden):
        restores.restore_event(actor=changer, event_id=event.pk)


# Large changes -----------------------------------------------------------------------------------------
def test_a_large_clear_is_recorded_in_chunks_with_every_key(dag_run_factory, task_instance_factory, ui):
    run = dag_run_factory(dag_id="big", run_id="r")
    task_instance_factory(run, task_id="t")
    now = timezone.now()
    make_task_keys(run, audit.CHUNK * 3 + 7, key="k{i:05}", value=json.dumps, updated_at=now)
    outcome = services.clear_task_instance(actor=ui, scope=TaskAddress("big", "r", "t"))
    assert outcome.changed == audit.CHUNK * 3 + 7 == outcome.event.key_count
    assert AuditKey.objects.filter(event=outcome.event).count() == outcome.changed
    assert not TaskStateStore.objects.filter(dag_id="big").exists()
    restores.restore_event(actor=ui, event_id=outcome.event.pk)
    assert TaskStateStore.objects.filter(dag_id="big").count() == outcome.changed


def test_an_upload_with_a_conflict_in_one_store_restores_nothing_in_either(run, asset, ui):
    from statestore_admin.exports import documents as exports

    document = json.loads(
        "".join(
            exports.iter_document(
                TaskStateStore.objects.filter(key="job"), AssetStateStore.objects.filter(asset=asset, key="cursor")
            )
        )
    )
    TaskStateStore.objects.filter(key="job").delete()
    AssetStateStore.objects.filter(key="cursor").update(value='"changed"')
    before = state()
    with pytest.raises(Conflict) as conflict:
        restores.restore_document(actor=ui, document=document)
    assert [c["key"] for c in conflict.value.details] == ["cursor"]
    assert state() == before and AuditEvent.objects.count() == 0
    outcome = restores.restore_document(actor=ui, document=document, overwrite=True)
    assert outcome.restored == 2 and TaskStateStore.objects.filter(key="job").exists()
    assert [e.store for e in outcome.events] == ["task", "asset"]


def test_worker_side_references_are_audited_and_restored_as_references(run, ui, task_key_factory):
    ref = {"__airflow_state_ref__": "s3://bucket/state/etl/r1/t/-1/blob"}
    task_key_factory(run, task_id="t", key="blob", value=ref)
    outcome = services.delete_task_keys(actor=ui, selection=services.TaskSelection(scope=T, keys=("blob",)))
    key = keys_of(outcome.event)["blob"]
    assert json.loads(key.before_value) == ref and key.after_value is None
    restores.restore_event(actor=ui, event_id=outcome.event.pk)
    assert json.loads(TaskStateStore.objects.get(key="blob").value) == ref


def test_add_permission_alone_adds_new_keys_and_overwrites_none(run, asset, user_factory):
    adder = Actor(via="ui", user=user_factory("adder", perms=["task.view", "task.add", "asset.view", "asset.add"]))
    services.set_task_key(actor=adder, scope=T, key="new", value=1, expiry=Expiry(DEFAULT))
    services.set_asset_key(actor=adder, asset_id=asset.pk, key="new", value=2)
    assert TaskStateStore.objects.get(key="new").value == "1"
    assert AssetStateStore.objects.get(key="new").value == "2"
    before = state()
    with pytest.raises(Forbidden):
        services.set_task_key(actor=adder, scope=T, key="job", value=3, expiry=Expiry(DEFAULT))
    with pytest.raises(Forbidden):
        services.set_asset_key(actor=adder, asset_id=asset.pk, key="cursor", value=4)
    assert state() == before


@pytest.mark.parametrize("store", ["task", "asset"])
def test_a_restore_whose_key_was_created_after_it_looked_is_a_conflict_naming_the_value(run, asset, store):
    """The branch a restore takes when another writer creates the key between the restore's locked read (no
    row then) and its insert. tests/state/test_write_races.py reaches it only when the timing falls that way; here
    the key simply exists when the restore inserts."""
    if store == "task":
        target = Target(
            store=permissions.TASK, key="job", state=('"back"', None), dag_id="etl", run_id="r1", task_id="t",
            map_index=-1, run_pk=run.pk, ident="0",
        )  # fmt: skip
        current = '{"id": 1}'
    else:
        target = Target(store=permissions.ASSET, key="cursor", state=('"back"', None), asset_id=asset.pk, ident="0")
        current = '{"id": 7}'
    before = state()
    with pytest.raises(Conflict) as raised, transaction.atomic(using=airflow_alias()):
        restores._apply(target, None)
    assert state() == before
    [conflict] = raised.value.details
    assert conflict["key"] == target.key and json.loads(conflict["current"]["value"]) == json.loads(current)
