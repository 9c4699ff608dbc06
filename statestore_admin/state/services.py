"""Writes to the state store: one function per operation, used by the pages, the API, Django admin and the
commands alike. Every function takes keyword arguments only, starting with the ``Actor``; checks the
actor's permission; validates its input (``values``); and raises the domain's exceptions (``errors``)
before changing anything. Every change is recorded in the audit trail (``audit.change``), in the order
that docs/audit.md describes.

Airflow's rules (docs/airflow.md): ``expires_at`` is computed by the writer at write time; writing a
value needs its task instance to exist (Airflow's API answers 404 otherwise, through every face here);
an asset write records its writer as the API. Removing state (delete, expire) by key id never needs the
task instance; addressing a task instance (clear, or a key by scope) does, as in Airflow.

Confirmed actions (delete, expire, clear after a list was shown) touch only rows not written since the
confirmation (``updated_at <= confirmed_at``): a key written in between is kept and reported, never lost.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace

from django.db import IntegrityError, connections, transaction
from django.db.models import Exists, QuerySet
from django.utils import timezone

from statestore_admin.airflow.models import Asset, AssetStateStore, DagRun, TaskStateStore
from statestore_admin.airflow.router import airflow_alias

from . import audit, permissions, selectors
from .actors import Actor
from .errors import Conflict, Forbidden, Invalid, NotFound
from .models import AuditEvent
from .scopes import Scope, scope_of
from .selectors import TaskScope
from .values import Expiry, clean_key, encode_value

Action = AuditEvent.Action
CREATE, UPSERT, UPDATE = "create", "upsert", "update"  # write modes: new key only, either, existing only
API_WRITER = "api"
# What Airflow's API records as the writer of an asset key: kind "api", no task.
API_WRITER_FIELDS = {
    "last_updated_by_kind": API_WRITER,
    "last_updated_by_dag_id": None,
    "last_updated_by_run_id": None,
    "last_updated_by_task_id": None,
    "last_updated_by_map_index": None,
}


@dataclass(frozen=True)
class Outcome:
    """What an action did: ``changed`` rows, ``kept`` rows skipped because they changed meanwhile, and
    the audit event that records it (None when nothing changed)."""

    changed: int
    kept: int = 0
    event: AuditEvent | None = None

    def describe(self, verb: str) -> str:
        text = f"{verb} {self.changed} key{'s' if self.changed != 1 else ''}"
        if self.kept:
            text += (
                f"; {self.kept} key{'s' if self.kept != 1 else ''} written since you confirmed "
                f"{'were' if self.kept != 1 else 'was'} kept"
            )
        return text + "."


# Addressing keys --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskKeyRef:
    """One task key: by its row id (the dashboard's links), or by task instance and key (Airflow's API)."""

    id: int | None = None
    scope: TaskScope | None = None
    key: str | None = None

    def rows(self, allowed: Scope) -> QuerySet:
        """The key's row, if ``allowed`` covers its DAG: a DAG named out of scope is Forbidden; a key id of
        such a DAG is as not found."""
        if self.id is not None:
            return TaskStateStore.objects.filter(pk=self.id).filter(allowed.dag_q())
        allowed.require_dag(self.scope.dag_id)
        return selectors.scope_keys(self.scope).filter(key=self.key)

    def not_found(self) -> NotFound:
        if self.id is not None:
            return NotFound(f"No task state key with id {self.id}: it may have been deleted.")
        return NotFound(f"Task state store key {self.key!r} not found")


@dataclass(frozen=True)
class TaskSelection:
    """Task keys to act on: explicit ids, or every key of a task instance (``map_index=None``: of every
    map index of the task), optionally only the named keys. A task instance selection needs the task
    instance to exist, as in Airflow."""

    ids: tuple[int, ...] = ()
    scope: TaskScope | None = None
    all_map_indices: bool = False
    keys: tuple[str, ...] | None = None

    @classmethod
    def of_instance(cls, scope: TaskScope, all_map_indices: bool = False) -> TaskSelection:
        return cls(scope=scope, all_map_indices=all_map_indices)

    def queryset(self, allowed: Scope, check_instance: bool = True) -> QuerySet:
        """The selected rows within ``allowed``. A task instance selection checks that the task instance
        exists first (NotFound); with ``check_instance=False`` the rows carry that condition instead, and an
        empty result is to be checked with ``require_instance`` (one query fewer when there are rows).
        A task instance of a DAG out of scope is Forbidden; ids of such keys select nothing."""
        if self.scope is not None:
            allowed.require_dag(self.scope.dag_id)
            rows = TaskStateStore.objects.filter(
                dag_id=self.scope.dag_id, run_id=self.scope.run_id, task_id=self.scope.task_id
            )
            if not self.all_map_indices:
                rows = rows.filter(map_index=self.scope.map_index)
            if self.keys is not None:
                rows = rows.filter(key__in=self.keys)
            if not check_instance:
                return rows.filter(Exists(selectors.task_instances(self.scope, self.all_map_indices)))
            self.require_instance()
            return rows
        if not self.ids:
            raise Invalid({"ids": "Select at least one key."})
        return TaskStateStore.objects.filter(pk__in=self.ids).filter(allowed.dag_q())

    def require_instance(self) -> None:
        if self.scope is not None:
            selectors.require_task_instance(self.scope, any_map_index=self.all_map_indices)

    def audit_scope(self) -> dict:
        if self.scope is None:
            return {}
        scope = {"dag_id": self.scope.dag_id, "run_id": self.scope.run_id, "task_id": self.scope.task_id}
        return scope if self.all_map_indices else {**scope, "map_index": self.scope.map_index}


def _locked_chunks(rows: QuerySet, ordering: str) -> Iterator[list]:
    """The rows, locked, ``audit.CHUNK`` at a time in ``ordering`` (keyset, no open cursor); call inside
    Airflow's transaction. Yields lists of rows."""
    last = None
    while True:
        chunk_rows = rows.select_for_update().order_by(ordering)
        if last is not None:
            chunk_rows = chunk_rows.filter(**{f"{ordering}__gt": last})
        chunk = list(chunk_rows[: audit.CHUNK])
        if chunk:
            yield chunk
        if len(chunk) < audit.CHUNK:
            return
        last = getattr(chunk[-1], ordering)


def _deleted_chunks(
    model, rows: QuerySet | None, identity: tuple[str, ...], few: tuple[str, list] | None = None
) -> Iterator[list]:
    """Delete the rows ``audit.CHUNK`` at a time inside Airflow's transaction, each chunk one
    ``DELETE … RETURNING`` statement; yields the deleted rows (what they held, for the audit). ``few``: the
    condition (SQL, params) of rows known to be at most a chunk, deleted by one plain statement."""
    alias = airflow_alias()
    quote = connections[alias].ops.quote_name
    columns = ", ".join(quote(f.column) for f in model._meta.concrete_fields)
    target = ", ".join(quote(name) for name in identity)
    while True:
        if few:
            sql, params = few
            statement = f"DELETE FROM {quote(model._meta.db_table)} WHERE {sql} RETURNING {columns}"
        else:
            chosen = rows.order_by(*identity).values_list(*identity)[: audit.CHUNK]
            sql, params = chosen.query.get_compiler(using=alias).as_sql()
            statement = f"DELETE FROM {quote(model._meta.db_table)} WHERE ({target}) IN ({sql}) RETURNING {columns}"
        if model._meta.pk.attname in identity:  # rows as model instances, with the database's types
            chunk = list(model.objects.db_manager(alias).raw(statement, params))
        else:  # a composite primary key (asset keys) cannot be a raw query's model: their names and values
            with connections[alias].cursor() as cursor:
                cursor.execute(
                    statement.replace(f"RETURNING {columns}", f"RETURNING {quote('key')}, {quote('value')}"), params
                )
                chunk = [SimpleNamespace(key=key, value=value) for key, value in cursor.fetchall()]
        if chunk:
            yield chunk
        if few or len(chunk) < audit.CHUNK:
            return


def _named_keys_condition(selection: TaskSelection) -> tuple[str, list] | None:
    """For named keys of one task instance (the API's DELETE of a key: at most one row each), the condition
    of the rows and of the task instance's existence as plain SQL: the ORM's query building costs more than
    the statement itself on this path that every API delete takes."""
    scope, keys = selection.scope, selection.keys
    if scope is None or keys is None or selection.all_map_indices or not 0 < len(keys) <= audit.CHUNK:
        return None
    if not -1 <= scope.map_index < 2**31:  # no such row; the ORM path answers it without a database error
        return None
    where = "dag_id = %s AND run_id = %s AND task_id = %s AND map_index = %s"
    ident = [scope.dag_id, scope.run_id, scope.task_id, scope.map_index]
    names = ", ".join(["%s"] * len(keys))
    sql = (
        f"{where} AND {connections[airflow_alias()].ops.quote_name('key')} IN ({names}) "
        f"AND EXISTS (SELECT 1 FROM task_instance WHERE {where})"
    )
    return sql, [*ident, *keys, *ident]


def _confirmed(rows: QuerySet, confirmed_at: datetime | None) -> tuple[QuerySet, int]:
    """The rows a confirmation opened at ``confirmed_at`` acts on, and how many were written since (kept)."""
    if confirmed_at is None:
        return rows, 0
    return selectors.confirmed_keys(rows, confirmed_at=confirmed_at), rows.filter(updated_at__gt=confirmed_at).count()


def _check_unchanged(row, seen_updated_at: datetime | None) -> None:
    if seen_updated_at is not None and row.updated_at != seen_updated_at:
        raise Conflict(
            f"This key was written at {row.updated_at.isoformat()}, after you opened it. "
            "Reload to see the current value before changing it.",
            [{"key": row.key, "current": row.value}],
        )


def _state(row) -> audit.KeyState:
    return (row.value, getattr(row, "expires_at", None))


# Task keys --------------------------------------------------------------------------------------------
def set_task_key(
    *, actor: Actor, scope: TaskScope, key: str, value, expiry: Expiry, mode: str = UPSERT
) -> TaskStateStore:
    """Write a key's value and expiry. ``mode``: CREATE (add; an existing key is a Conflict) or UPSERT
    (Airflow's PUT: create or overwrite). Needs ``add`` for a new key, ``change`` for an existing one."""
    permissions.require_any(actor, permissions.TASK, ("add",) if mode == CREATE else ("add", "change"))
    scope_of(actor).require_dag(scope.dag_id)
    key = clean_key(key)
    text = encode_value(value)
    if scope.map_index < -1:
        raise Invalid({"map_index": "map_index is -1 (not mapped) or more."})
    run = selectors.require_task_instance(scope)
    now = timezone.now()
    expires_at = expiry.resolve(now)
    rows = selectors.scope_keys(scope).filter(key=key)
    action = Action.ADD if mode == CREATE else Action.SET
    with audit.change(actor, action, permissions.TASK, scope=scope.as_audit_scope()) as recorder:
        row = rows.select_for_update().first()
        if row is not None and mode == CREATE:
            raise Conflict(f"The key {key!r} already exists on this task instance; edit it instead.")
        permissions.require(actor, permissions.TASK, "change" if row else "add")
        if row is None:
            row = TaskStateStore(
                dag_run=run, dag_id=scope.dag_id, run_id=scope.run_id, task_id=scope.task_id, map_index=scope.map_index
            )
            row.key = key
            before = None
        else:
            before = _state(row)
        recorder.record([audit.task_change(row, before=before, after=(text, expires_at), limit=recorder.limit)])
        row.value, row.updated_at, row.expires_at = text, now, expires_at
        if before is None and mode == UPSERT:  # Airflow's upsert: a row a task wrote meanwhile is overwritten
            TaskStateStore.objects.bulk_create(
                [row],
                update_conflicts=True,
                unique_fields=["dag_run", "task_id", "map_index", "key"],
                update_fields=["value", "updated_at", "expires_at"],
            )
        elif before is None:
            try:
                with transaction.atomic(using=airflow_alias()):
                    row.save(force_insert=True)
            except IntegrityError:  # a task wrote it meanwhile
                raise Conflict(f"The key {key!r} already exists on this task instance; edit it instead.") from None
        else:
            row.save(update_fields=["value", "updated_at", "expires_at"])
    return row


def patch_task_key(*, actor: Actor, ref: TaskKeyRef, value, seen_updated_at: datetime | None = None) -> TaskStateStore:
    """Replace an existing key's value and keep its expiry (Airflow's PATCH). The key's task instance
    must exist; ``seen_updated_at`` (the dashboard's edit) refuses to overwrite a newer write."""
    permissions.require(actor, permissions.TASK, "change")
    text = encode_value(value)
    rows = ref.rows(scope_of(actor))
    if ref.scope is not None:
        selectors.require_task_instance(ref.scope)
    with audit.change(actor, Action.PATCH, permissions.TASK) as recorder:
        row = rows.select_for_update().first()
        if row is None:
            raise ref.not_found()
        if ref.scope is None:
            selectors.require_task_instance(TaskScope.of(row))
        _check_unchanged(row, seen_updated_at)
        if row.value == text:
            return row  # nothing to change: no write, no event
        recorder.record(
            [audit.task_change(row, before=_state(row), after=(text, row.expires_at), limit=recorder.limit)]
        )
        row.value, row.updated_at = text, timezone.now()
        row.save(update_fields=["value", "updated_at"])
    return row


def set_task_expiry(
    *, actor: Actor, ref: TaskKeyRef, expiry: Expiry, seen_updated_at: datetime | None = None
) -> TaskStateStore:
    """Set when one key expires: the default retention from now, never, or a given instant."""
    permissions.require(actor, permissions.TASK, "change")
    rows = ref.rows(scope_of(actor))
    with audit.change(actor, Action.EXPIRY, permissions.TASK) as recorder:
        row = rows.select_for_update().first()
        if row is None:
            raise ref.not_found()
        _check_unchanged(row, seen_updated_at)
        expires_at = expiry.resolve(timezone.now())
        recorder.record(
            [audit.task_change(row, before=_state(row), after=(row.value, expires_at), limit=recorder.limit)]
        )
        row.expires_at = expires_at
        row.save(update_fields=["expires_at"])
    return row


def expire_task_keys(*, actor: Actor, selection: TaskSelection, confirmed_at: datetime | None = None) -> Outcome:
    """Set ``expires_at = now``: the next GC removes the keys; until then tasks can still read them."""
    permissions.require(actor, permissions.TASK, "change")
    rows, kept = _confirmed(selection.queryset(scope_of(actor)), confirmed_at)
    now = timezone.now()
    with audit.change(actor, Action.EXPIRE, permissions.TASK, scope=selection.audit_scope()) as recorder:
        for chunk in _locked_chunks(rows, "id"):
            recorder.record(
                [audit.task_change(r, before=_state(r), after=(r.value, now), limit=recorder.limit) for r in chunk]
            )
            TaskStateStore.objects.filter(pk__in=[r.pk for r in chunk]).update(expires_at=now)
    return Outcome(recorder.count, kept, recorder.event)


def delete_task_keys(*, actor: Actor, selection: TaskSelection, confirmed_at: datetime | None = None) -> Outcome:
    """Delete the selected keys (the rows; a worker-side object is not reachable from here)."""
    return _delete_task_rows(actor, selection, confirmed_at, Action.DELETE)


def clear_task_instance(
    *, actor: Actor, scope: TaskScope, all_map_indices: bool = False, confirmed_at: datetime | None = None
) -> Outcome:
    """Delete every key of the task instance, or of every map index of the task (404 if there is none)."""
    selection = TaskSelection.of_instance(scope, all_map_indices)
    return _delete_task_rows(actor, selection, confirmed_at, Action.CLEAR)


def _delete_task_rows(actor, selection: TaskSelection, confirmed_at, action) -> Outcome:
    permissions.require(actor, permissions.TASK, "delete")
    # The task instance's existence is a condition of the DELETE itself; only when nothing was deleted is it
    # looked up, to answer Airflow's 404 for a missing task instance.
    allowed = scope_of(actor)
    if selection.scope is not None:
        allowed.require_dag(selection.scope.dag_id)
    few = _named_keys_condition(selection) if confirmed_at is None else None
    rows, kept = (None, 0) if few else _confirmed(selection.queryset(allowed, check_instance=False), confirmed_at)
    details = {"all_map_indices": True} if selection.all_map_indices else {}
    with audit.change(actor, action, permissions.TASK, scope=selection.audit_scope(), details=details) as recorder:
        # Deleted first and recorded next, inside Airflow's transaction: its commit follows the record.
        for chunk in _deleted_chunks(TaskStateStore, rows, ("id",), few):
            recorder.record([audit.task_change(r, before=_state(r), after=None, limit=recorder.limit) for r in chunk])
    if not recorder.count:
        selection.require_instance()
    return Outcome(recorder.count, kept, recorder.event)


# Asset keys -------------------------------------------------------------------------------------------
def _asset_scope(asset: Asset) -> dict:
    return {"asset_id": asset.pk, "asset_name": asset.name, "asset_uri": asset.uri}


def set_asset_key(
    *, actor: Actor, asset_id: int, key: str, value, mode: str = UPSERT, seen_updated_at: datetime | None = None
) -> AssetStateStore:
    """Write an asset key, recorded as written by the API (as Airflow's PUT does). ``mode``: CREATE (add;
    an existing key is a Conflict), UPSERT (Airflow's PUT) or UPDATE (edit; a missing key is NotFound)."""
    permissions.require_any(
        actor, permissions.ASSET, {CREATE: ("add",), UPDATE: ("change",)}.get(mode, ("add", "change"))
    )
    key = clean_key(key)
    text = encode_value(value)
    asset = selectors.get_asset(asset_id, scope=scope_of(actor))
    now = timezone.now()
    rows = AssetStateStore.objects.filter(asset_id=asset_id, key=key)
    action = Action.ADD if mode == CREATE else Action.PATCH if mode == UPDATE else Action.SET
    with audit.change(actor, action, permissions.ASSET, scope=_asset_scope(asset)) as recorder:
        row = rows.select_for_update().first()
        if row is not None and mode == CREATE:
            raise Conflict(f"The key {key!r} already exists on this asset; edit it instead.")
        if row is None and mode == UPDATE:
            raise NotFound(f"Asset {asset_id} has no key {key!r}: it may have been deleted.")
        permissions.require(actor, permissions.ASSET, "change" if row else "add")
        if row is not None:
            _check_unchanged(row, seen_updated_at)
            if mode == UPDATE and row.value == text:
                return row  # an unchanged edit: no write, no event
        before = _state(row) if row is not None else None
        recorder.record([audit.asset_change(asset_id, key, before=before, after=(text, None), limit=recorder.limit)])
        if row is None:
            try:
                with transaction.atomic(using=airflow_alias()):
                    AssetStateStore.objects.create(
                        asset_id=asset_id, key=key, value=text, updated_at=now, **API_WRITER_FIELDS
                    )
            except IntegrityError:  # written meanwhile
                if mode == CREATE:
                    raise Conflict(f"The key {key!r} already exists on this asset; edit it instead.") from None
                rows.update(value=text, updated_at=now, **API_WRITER_FIELDS)
        else:
            rows.update(value=text, updated_at=now, **API_WRITER_FIELDS)
    return selectors.get_asset_key(asset_id, key, scope=scope_of(actor))


def delete_asset_keys(*, actor: Actor, asset_id: int, keys: list[str], confirmed_at: datetime | None = None) -> Outcome:
    """Delete the named keys of an asset (absent ones are not an error, as in Airflow)."""
    if not keys:
        raise Invalid({"keys": "Select at least one key."})
    return _delete_asset_rows(actor, asset_id, keys, confirmed_at, Action.DELETE)


def clear_asset(*, actor: Actor, asset_id: int, confirmed_at: datetime | None = None) -> Outcome:
    """Delete every key of an asset (clear its state)."""
    return _delete_asset_rows(actor, asset_id, None, confirmed_at, Action.CLEAR)


def _delete_asset_rows(actor, asset_id: int, keys: list[str] | None, confirmed_at, action) -> Outcome:
    permissions.require(actor, permissions.ASSET, "delete")
    asset = selectors.get_asset(asset_id, scope=scope_of(actor))
    rows = AssetStateStore.objects.filter(asset_id=asset_id)
    if keys is not None:
        rows = rows.filter(key__in=keys)
    rows, kept = _confirmed(rows, confirmed_at)
    with audit.change(actor, action, permissions.ASSET, scope=_asset_scope(asset)) as recorder:
        for chunk in _deleted_chunks(AssetStateStore, rows, ("asset_id", "key")):
            recorder.record(
                [audit.asset_change(asset_id, r.key, before=_state(r), after=None, limit=recorder.limit) for r in chunk]
            )
    return Outcome(recorder.count, kept, recorder.event)


# Restore ----------------------------------------------------------------------------------------------
KEEP, OVERWRITE = "keep", "overwrite"


@dataclass
class RestoreOutcome:
    restored: int = 0
    unchanged: int = 0
    kept: list[dict] = field(default_factory=list)  # conflicts the operator chose to keep
    missing: list[dict] = field(default_factory=list)  # DAG run or asset gone: nothing restored for them
    events: list[AuditEvent] = field(default_factory=list)

    def describe(self) -> str:
        parts = [f"Restored {self.restored} key{'s' if self.restored != 1 else ''}"]
        if self.unchanged:
            parts.append(f"{self.unchanged} already as recorded")
        if self.kept:
            parts.append(f"{len(self.kept)} kept as they are now")
        if self.missing:
            parts.append(f"{len(self.missing)} not restored: {self.missing[0]['reason']}")
        return "; ".join(parts) + "."


@dataclass
class Target:
    """One key to bring back to ``state`` (None: the key must not exist), in a task or an asset scope."""

    store: str
    key: str
    state: audit.KeyState | None
    expected: audit.KeyState | None = None  # what the key holds now if nobody wrote it since
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    map_index: int | None = None
    asset_id: int | None = None
    ident: str = ""
    run_pk: int | None = None

    def describe(self) -> dict:
        if self.store == permissions.TASK:
            scope = {"dag_id": self.dag_id, "run_id": self.run_id, "task_id": self.task_id, "map_index": self.map_index}
        else:
            scope = {"asset_id": self.asset_id}
        return {"id": self.ident, "key": self.key, **scope}


def restore_event(
    *, actor: Actor, event_id: int, overwrite: bool = False, resolutions: dict[str, str] | None = None
) -> RestoreOutcome:
    """Bring the event's keys back to their state before it (value and ``expires_at``).

    A key written again after the event is a conflict: nothing is restored and ``Conflict`` lists both
    values, unless ``overwrite`` or ``resolutions`` (AuditKey id → KEEP / OVERWRITE) decide. Keys whose
    DAG run or asset no longer exists are reported in ``missing`` and not restored.
    """
    event = selectors.get_audit_event(event_id, scope=scope_of(actor))
    if not event.restorable:
        reason = (
            "Garbage collection follows Airflow's rules and is not restorable."
            if event.action == Action.GC
            else "This change failed and changed nothing: there is nothing to restore."
        )
        raise Invalid({"event": reason})
    targets = []
    for key in event.keys.all().iterator(chunk_size=audit.CHUNK):
        if key.truncated:
            raise Invalid({"event": f"The recorded value of {key.key!r} is truncated; it cannot be restored."})
        targets.append(
            Target(
                store=event.store,
                key=key.key,
                state=(key.before_value, key.before_expires_at) if key.before_value is not None else None,
                expected=(key.after_value, key.after_expires_at) if key.after_value is not None else None,
                dag_id=key.dag_id,
                run_id=key.run_id,
                task_id=key.task_id,
                map_index=key.map_index,
                asset_id=key.asset_id,
                ident=str(key.pk),
            )
        )
    return _restore(actor, targets, overwrite, resolutions or {}, restored_from=event)


def restore_document(*, actor: Actor, document, overwrite: bool = False) -> RestoreOutcome:
    """Restore the keys of an export (``exports.parse_document``): each key gets the value and expiry in
    the file. A key that exists with another value is a conflict unless ``overwrite``."""
    from .exports import parse_document

    return _restore(actor, parse_document(document), overwrite, {}, restored_from=None)


def _same(current: audit.KeyState | None, wanted: audit.KeyState | None, store: str) -> bool:
    if current is None or wanted is None:
        return current is wanted
    return current[0] == wanted[0] and (store == permissions.ASSET or current[1] == wanted[1])


def _restore(actor, targets: list[Target], overwrite: bool, resolutions: dict, restored_from) -> RestoreOutcome:
    groups = {store: [t for t in targets if t.store == store] for store in (permissions.TASK, permissions.ASSET)}
    groups = {store: group for store, group in groups.items() if group}
    for store in groups:
        for action in permissions.RESTORE_ACTIONS:
            permissions.require(actor, store, action)
    _require_in_scope(scope_of(actor), targets)
    # Every store is checked before any is changed: a conflict anywhere restores nothing anywhere.
    with transaction.atomic(using=airflow_alias()):
        conflicts = [c for store, group in groups.items() for c in _plan(store, group, overwrite, resolutions)[1]]
    _raise_conflicts(conflicts)
    result = RestoreOutcome()
    for store, group in groups.items():
        _restore_store(actor, store, group, overwrite, resolutions, restored_from, result)
    return result


def _require_in_scope(allowed: Scope, targets: list[Target]) -> None:
    """Every key to restore is of a DAG or an asset in scope: otherwise nothing is restored."""
    if not allowed.restricted:
        return
    outside = sorted({t.dag_id for t in targets if t.store == permissions.TASK and not allowed.allows_dag(t.dag_id)})
    asset_ids = {t.asset_id for t in targets if t.store == permissions.ASSET}
    if asset_ids:  # an asset deleted since is not restored anyway (``missing``)
        existing = set(Asset.objects.filter(pk__in=asset_ids).values_list("pk", flat=True))
        inside = set(selectors.scoped_assets(allowed).filter(pk__in=asset_ids).values_list("pk", flat=True))
        outside += [f"asset {asset_id}" for asset_id in sorted(existing - inside)]
    if outside:
        raise Forbidden(f"Nothing was restored: you do not have access to {', '.join(map(str, outside[:5]))}.")


def _raise_conflicts(conflicts: list[dict]) -> None:
    if conflicts:
        raise Conflict(
            f"{len(conflicts)} key{'s were' if len(conflicts) != 1 else ' was'} written again since; "
            "nothing was restored. Choose per key, or overwrite.",
            conflicts,
        )


def _plan(store, targets, overwrite, resolutions, result: RestoreOutcome | None = None):
    """What a restore would do, with the rows locked (inside Airflow's transaction): the (target, row, current
    state) to write, and the conflicts; missing, unchanged and kept keys are counted in ``result``."""
    result = result or RestoreOutcome()
    conflicts, plan = [], []
    for target in targets:
        row, missing = _locate(target)
        if missing:
            result.missing.append({**target.describe(), "reason": missing})
            continue
        current = _state(row) if row is not None else None
        if _same(current, target.state, store):
            result.unchanged += 1
            continue
        if not _same(current, target.expected, store):
            choice = OVERWRITE if overwrite else resolutions.get(target.ident)
            if choice == KEEP:
                result.kept.append(target.describe())
                continue
            if choice != OVERWRITE:
                conflicts.append(
                    {**target.describe(), "current": _state_dict(current), "restore": _state_dict(target.state)}
                )
                continue
        plan.append((target, row, current))
    return plan, conflicts


def _restore_store(actor, store, targets, overwrite, resolutions, restored_from, result: RestoreOutcome) -> None:
    with audit.change(actor, Action.RESTORE, store, restored_from=restored_from) as recorder:
        plan, conflicts = _plan(store, targets, overwrite, resolutions, result)
        _raise_conflicts(conflicts)  # written between the check and now
        for start in range(0, len(plan), audit.CHUNK):
            chunk = plan[start : start + audit.CHUNK]
            recorder.record([_restore_change(t, current, recorder.limit) for t, _, current in chunk])
            for target, row, _ in chunk:
                _apply(target, row)
    result.restored += recorder.count
    if recorder.event is not None:
        result.events.append(recorder.event)


def _state_dict(state: audit.KeyState | None) -> dict | None:
    if state is None:
        return None
    return {"value": state[0], "expires_at": state[1].isoformat() if state[1] else None}


def _locate(target: Target):
    """The key's current row (locked) or None, and why it cannot be restored ("" when it can)."""
    if target.store == permissions.TASK:
        run = DagRun.objects.filter(dag_id=target.dag_id, run_id=target.run_id).first()
        if run is None:
            return None, f"the DAG run {target.run_id!r} of {target.dag_id!r} no longer exists"
        target.run_pk = run.pk
        row = (
            TaskStateStore.objects.select_for_update()
            .filter(dag_run=run, task_id=target.task_id, map_index=target.map_index, key=target.key)
            .first()
        )
        return row, ""
    if not Asset.objects.filter(pk=target.asset_id).exists():
        return None, f"the asset with id {target.asset_id} no longer exists"
    row = AssetStateStore.objects.select_for_update().filter(asset_id=target.asset_id, key=target.key).first()
    return row, ""


def _restore_change(target: Target, current, limit):
    if target.store == permissions.TASK:
        return audit.key_change(
            key=target.key,
            before=current,
            after=target.state,
            dag_id=target.dag_id,
            run_id=target.run_id,
            task_id=target.task_id,
            map_index=target.map_index,
            limit=limit,
        )
    return audit.asset_change(target.asset_id, target.key, before=current, after=target.state, limit=limit)


def _apply(target: Target, row) -> None:
    now = timezone.now()
    if target.store == permissions.TASK:
        if target.state is None:
            TaskStateStore.objects.filter(pk=row.pk).delete()
        elif row is None:
            TaskStateStore.objects.create(
                dag_run_id=target.run_pk,
                dag_id=target.dag_id,
                run_id=target.run_id,
                task_id=target.task_id,
                map_index=target.map_index,
                key=target.key,
                value=target.state[0],
                updated_at=now,
                expires_at=target.state[1],
            )
        else:
            TaskStateStore.objects.filter(pk=row.pk).update(
                value=target.state[0], expires_at=target.state[1], updated_at=now
            )
        return
    rows = AssetStateStore.objects.filter(asset_id=target.asset_id, key=target.key)
    if target.state is None:
        rows.delete()
    elif row is None:
        AssetStateStore.objects.create(
            asset_id=target.asset_id, key=target.key, value=target.state[0], updated_at=now, **API_WRITER_FIELDS
        )
    else:
        rows.update(value=target.state[0], updated_at=now, **API_WRITER_FIELDS)
