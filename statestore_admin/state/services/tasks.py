"""Writes to task keys: set (Airflow's PUT), patch, expiry (of one key or of a selection), expire, delete, and
clear of a task instance; ``TaskKeyRef`` addresses one key, ``TaskSelection`` the keys an action takes (``RunMatch``:
a run's keys matching its page's filter)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connections
from django.db.models import Exists, QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.access import policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import Scope, scope_of
from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.versions import schema_of
from statestore_admin.audit import events as audit
from statestore_admin.core.errors import Conflict, Invalid, NotFound
from statestore_admin.core.values import Expiry, clean_key, encode_value, same_value
from statestore_admin.state.addresses import (
    TaskAddress,
    address_keys,
    instance_not_found,
    require_task_instance,
    task_instances,
)
from statestore_admin.state.services.confirmations import Listing, listed_chunks, outcome_of
from statestore_admin.state.services.outcomes import CREATE, UPSERT, Action, Outcome
from statestore_admin.state.services.rows import (
    check_unchanged,
    delete_objects_of,
    deleted_chunks,
    holds_ref,
    locked_chunks,
    locked_or_created,
    require_object_delete,
    state_of,
    unwritten,
)


@dataclass(frozen=True)
class TaskKeyRef:
    """One task key: by its row id (the dashboard's links), or by task instance and key (Airflow's API)."""

    id: int | None = None
    address: TaskAddress | None = None
    key: str | None = None

    def rows(self, allowed: Scope) -> QuerySet:
        """The key's row, if ``allowed`` covers its DAG: a DAG named out of scope is Forbidden; a key id of
        such a DAG is as not found."""
        if self.id is not None:
            return TaskStateStore.objects.filter(pk=self.id).filter(allowed.dag_q())
        allowed.require_dag(self.address.dag_id)
        return address_keys(self.address).filter(key=self.key)

    def not_found(self) -> NotFound:
        if self.id is not None:
            return NotFound(_("No task state key with id %(id)s: it may have been deleted.") % {"id": self.id})
        return NotFound(_("Task state store key %(key)r not found") % {"key": self.key})


@dataclass(frozen=True)
class RunMatch:
    """The keys of a DAG run, of one task (``task_id``) or of every task, starting with ``prefix`` (any case, as the
    run page filters): what "select all matching" and clearing or expiring a whole run act on."""

    dag_id: str
    run_id: str
    task_id: str = ""
    prefix: str = ""

    def rows(self) -> QuerySet:
        rows = TaskStateStore.objects.filter(dag_id=self.dag_id, run_id=self.run_id)
        if self.task_id:
            rows = rows.filter(task_id=self.task_id)
        return rows.filter(key__istartswith=self.prefix) if self.prefix else rows


@dataclass(frozen=True)
class TaskSelection:
    """Task keys to act on: explicit ids, or every key of a task instance (``map_index=None``: of every
    map index of the task), optionally only the named keys, or a run's keys (``run_match``). A task instance
    selection needs the task instance to exist, as in Airflow."""

    ids: tuple[int, ...] = ()
    address: TaskAddress | None = None
    all_map_indices: bool = False
    keys: tuple[str, ...] | None = None
    run_match: RunMatch | None = None

    @classmethod
    def of_instance(cls, address: TaskAddress, all_map_indices: bool = False) -> TaskSelection:
        return cls(address=address, all_map_indices=all_map_indices)

    def queryset(self, allowed: Scope, check_instance: bool = True) -> QuerySet:
        """The selected rows within ``allowed``. A task instance selection checks that the task instance
        exists first (NotFound); with ``check_instance=False`` the rows carry that condition instead, and an
        empty result is to be checked with ``require_instance`` (one query fewer when there are rows).
        A task instance of a DAG out of scope is Forbidden; ids of such keys select nothing."""
        if self.run_match is not None:
            allowed.require_dag(self.run_match.dag_id)
            return self.run_match.rows()
        if self.address is not None:
            allowed.require_dag(self.address.dag_id)
            rows = address_keys(self.address, any_map_index=self.all_map_indices)
            if self.keys is not None:
                rows = rows.filter(key__in=self.keys)
            if not check_instance:
                return rows.filter(Exists(task_instances(self.address, self.all_map_indices)))
            self.require_instance()
            return rows
        if not self.ids:
            raise Invalid({"ids": _("Select at least one key.")})
        return TaskStateStore.objects.filter(pk__in=self.ids).filter(allowed.dag_q())

    def require_instance(self) -> None:
        if self.address is not None:
            require_task_instance(self.address, any_map_index=self.all_map_indices)

    def event_location(self) -> dict:
        if self.run_match is not None:
            match = self.run_match
            where = {"dag_id": match.dag_id, "run_id": match.run_id}
            return {**where, "task_id": match.task_id} if match.task_id else where
        if self.address is None:
            return {}
        address = self.address
        where = {"dag_id": address.dag_id, "run_id": address.run_id, "task_id": address.task_id}
        return where if self.all_map_indices else {**where, "map_index": address.map_index}


def _named_keys_condition(selection: TaskSelection) -> tuple[str, list] | None:
    """For named keys of one task instance (the API's DELETE of a key: at most one row each), the condition
    of the rows and of the task instance's existence as plain SQL: the ORM's query building costs more than
    the statement itself on this path that every API delete takes."""
    address, keys = selection.address, selection.keys
    if address is None or keys is None or selection.all_map_indices or not 0 < len(keys) <= audit.CHUNK:
        return None
    if not -1 <= address.map_index < 2**31:  # no such row; the ORM path answers it without a database error
        return None
    connection = connections[airflow_alias()]
    schema = schema_of(connection)
    if address.in_region and not schema.regions:
        return None  # no such row on 3.3; the ORM path answers it
    where = f"dag_id = %s AND run_id = %s AND task_id = %s AND {schema.index_column} = %s"
    ident = [address.dag_id, address.run_id, address.task_id, address.map_index]
    if schema.regions:
        where += " AND region_id = %s"
        ident.append(TaskStateStore._meta.get_field("region_id").get_db_prep_value(address.region_id, connection))
    names = ", ".join(["%s"] * len(keys))
    sql = (
        f"{where} AND {connection.ops.quote_name('key')} IN ({names}) "
        f"AND EXISTS (SELECT 1 FROM task_instance WHERE {where})"
    )
    return sql, [*ident, *keys, *ident]


def set_task_key(
    *, actor: Actor, address: TaskAddress, key: str, value, expiry: Expiry, mode: str = UPSERT
) -> TaskStateStore:
    """Write a key's value and expiry. ``mode``: CREATE (add; an existing key is a Conflict) or UPSERT
    (Airflow's PUT: create or overwrite). Needs ``add`` for a new key, ``change`` for an existing one.
    Writing the value and expiry a key has is not made (``written`` False): with the default retention
    the expiry moves on, so such a write is made."""
    policies.require(actor, policies.TASK, "add" if mode == CREATE else policies.SET)
    scope_of(actor).require_dag(address.dag_id)
    key = clean_key(key)
    text = encode_value(value)
    if address.map_index < -1:
        raise Invalid({"map_index": _("map_index is -1 (not mapped) or more.")})
    run = require_task_instance(address)
    now = timezone.now()
    expires_at = expiry.resolve(now)
    rows = address_keys(address).filter(key=key)
    action = Action.ADD if mode == CREATE else Action.SET
    new = TaskStateStore(dag_run=run, **address.fields(), key=key, value=text, updated_at=now, expires_at=expires_at)
    may_add = policies.allows(actor, policies.TASK, "add")
    with audit.change(actor, action, policies.TASK, location=address.event_location()) as recorder:
        row, created = locked_or_created(rows, new if may_add else None, _run_gone(address))
        if row is not None and not created and mode == CREATE:
            raise Conflict(_("The key %(key)r already exists on this task instance; edit it instead.") % {"key": key})
        policies.require_write(actor, policies.TASK, created=row is None or created)
        if created:
            recorder.record([audit.task_change(row, before=None, after=(text, expires_at), limit=recorder.limit)])
        else:
            if same_value(row.value, text) and row.expires_at == expires_at:
                return unwritten(row)
            recorder.record(
                [audit.task_change(row, before=state_of(row), after=(text, expires_at), limit=recorder.limit)]
            )
            row.value, row.updated_at, row.expires_at = text, now, expires_at
            row.save(update_fields=["value", "updated_at", "expires_at"])
    row.written = True
    return row


def _run_gone(address: TaskAddress) -> NotFound:
    """What a write answers when the key's DAG run was deleted between its checks and its insert."""
    return instance_not_found(address)


def patch_task_key(
    *, actor: Actor, ref: TaskKeyRef, value, seen_updated_at: datetime | None = None, delete_object: bool = False
) -> TaskStateStore:
    """Replace an existing key's value and keep its expiry (Airflow's PATCH). The key's task instance
    must exist; ``seen_updated_at`` (the dashboard's edit) refuses to overwrite a newer write. The same
    value is not written (``written`` False). ``delete_object``: the worker-side object of the reference
    the value replaces is deleted after the row is written, as a delete does (``objects`` on the row)."""
    policies.require(actor, policies.TASK, "edit")
    text = encode_value(value)
    if delete_object:
        require_object_delete(actor, policies.TASK, text)
    rows = ref.rows(scope_of(actor))
    if ref.address is not None:
        require_task_instance(ref.address)
    with audit.change(actor, Action.PATCH, policies.TASK) as recorder:
        row = rows.select_for_update().first()
        if row is None:
            raise ref.not_found()
        if ref.address is None:
            require_task_instance(TaskAddress.of(row))
        check_unchanged(row, seen_updated_at)
        if same_value(row.value, text):
            return unwritten(row)
        recorder.record(
            [audit.task_change(row, before=state_of(row), after=(text, row.expires_at), limit=recorder.limit)]
        )
        row.value, row.updated_at = text, timezone.now()
        row.save(update_fields=["value", "updated_at"])
    row.written = True
    row.objects = delete_objects_of(recorder) if delete_object else None
    return row


def set_task_expiry(
    *, actor: Actor, ref: TaskKeyRef, expiry: Expiry, seen_updated_at: datetime | None = None
) -> TaskStateStore:
    """Set when one key expires: the default retention from now, never, or a given instant."""
    policies.require(actor, policies.TASK, "expire")
    rows = ref.rows(scope_of(actor))
    with audit.change(actor, Action.EXPIRY, policies.TASK) as recorder:
        row = rows.select_for_update().first()
        if row is None:
            raise ref.not_found()
        check_unchanged(row, seen_updated_at)
        expires_at = expiry.resolve(timezone.now())
        recorder.record(
            [audit.task_change(row, before=state_of(row), after=(row.value, expires_at), limit=recorder.limit)]
        )
        row.expires_at = expires_at
        row.save(update_fields=["expires_at"])
    return row


def expire_task_keys(*, actor: Actor, selection: TaskSelection, listed: Listing | None = None) -> Outcome:
    """Set ``expires_at = now``: the next GC removes the keys; until then tasks can still read them. After
    a confirmation, only the keys it ``listed``, as it listed them."""
    policies.require(actor, policies.TASK, "expire")
    rows, others = selection.queryset(scope_of(actor)), []
    now = timezone.now()
    with audit.change(actor, Action.EXPIRE, policies.TASK, location=selection.event_location()) as recorder:
        chunks = locked_chunks(rows, "id") if listed is None else listed_chunks(rows, "id", listed, others)
        for chunk in chunks:
            recorder.record(
                [audit.task_change(r, before=state_of(r), after=(r.value, now), limit=recorder.limit) for r in chunk]
            )
            TaskStateStore.objects.filter(pk__in=[r.pk for r in chunk]).update(expires_at=now)
    return outcome_of(recorder, listed, others)


def set_task_keys_expiry(
    *, actor: Actor, selection: TaskSelection, expiry: Expiry, listed: Listing | None = None
) -> Outcome:
    """Set when the selected keys expire, all to the same instant (the default retention from now, never, or a
    given one), in one audited change that can be undone; after a confirmation, only the keys it ``listed``, as
    it listed them."""
    policies.require(actor, policies.TASK, "expire")
    rows, others = selection.queryset(scope_of(actor)), []
    expires_at = expiry.resolve(timezone.now())
    with audit.change(actor, Action.EXPIRY, policies.TASK, location=selection.event_location()) as recorder:
        chunks = locked_chunks(rows, "id") if listed is None else listed_chunks(rows, "id", listed, others)
        for chunk in chunks:
            limit = recorder.limit
            after = [audit.task_change(r, before=state_of(r), after=(r.value, expires_at), limit=limit) for r in chunk]
            recorder.record(after)
            TaskStateStore.objects.filter(pk__in=[r.pk for r in chunk]).update(expires_at=expires_at)
    return outcome_of(recorder, listed, others)


def delete_task_keys(*, actor: Actor, selection: TaskSelection, listed: Listing | None = None) -> Outcome:
    """Delete the selected keys (their rows, then their worker-side objects: ``delete_objects_of``); after a
    confirmation, only the keys it ``listed``, as it listed them."""
    return _delete_task_rows(actor, selection, listed, Action.DELETE)


def clear_task_instance(
    *, actor: Actor, address: TaskAddress, all_map_indices: bool = False, listed: Listing | None = None
) -> Outcome:
    """Delete every key of the task instance, or of every map index of the task (404 if there is none);
    after a confirmation, only the keys it ``listed``, as it listed them."""
    selection = TaskSelection.of_instance(address, all_map_indices)
    return _delete_task_rows(actor, selection, listed, Action.CLEAR)


def _delete_task_rows(actor, selection: TaskSelection, listed: Listing | None, action) -> Outcome:
    policies.require(actor, policies.TASK, "clear" if action == Action.CLEAR else "delete")
    # The task instance's existence is a condition of the DELETE itself; only when nothing was deleted is it
    # looked up, to answer Airflow's 404 for a missing task instance.
    allowed = scope_of(actor)
    if selection.address is not None:
        allowed.require_dag(selection.address.dag_id)
    few = _named_keys_condition(selection) if listed is None else None
    rows, others = (None if few else selection.queryset(allowed, check_instance=False)), []
    details = {"all_map_indices": True} if selection.all_map_indices else {}
    holds_refs = False
    with audit.change(actor, action, policies.TASK, location=selection.event_location(), details=details) as recorder:
        # Deleted first and recorded next, inside Airflow's transaction: its commit follows the record.
        if listed is None:
            deleted = deleted_chunks(TaskStateStore, rows, ("id",), few)
        else:
            deleted = (
                part
                for chunk in listed_chunks(rows, "id", listed, others)
                for part in deleted_chunks(
                    TaskStateStore, TaskStateStore.objects.filter(pk__in=[r.pk for r in chunk]), ("id",)
                )
            )
        for chunk in deleted:
            recorder.record([audit.task_change(r, before=state_of(r), after=None, limit=recorder.limit) for r in chunk])
            holds_refs = holds_refs or holds_ref(chunk)
    if not recorder.count and not others:
        selection.require_instance()
    return outcome_of(recorder, listed, others, delete_objects_of(recorder) if holds_refs else None)
