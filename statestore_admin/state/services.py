"""Writes to the state store: one function per operation, used by the pages, the API, Django admin and the
commands alike. Every function takes keyword arguments only, starting with the ``Actor``; checks the
actor's permission; validates its input (``values``); and raises the domain's exceptions (``errors``)
before changing anything. Every change is recorded in the audit trail (``audit.change``), in the order
that docs/audit.md describes.

Airflow's rules (docs/airflow.md): ``expires_at`` is computed by the writer at write time; writing a
value needs its task instance to exist (Airflow's API answers 404 otherwise, through every face here);
an asset write records its writer as the API. Removing state (delete, expire) by key id never needs the
task instance; addressing a task instance (clear, or a key by scope) does, as in Airflow.

Confirmed actions (delete, expire, clear after a dialog listed the keys) act on exactly the keys the
confirmation listed, in the version it listed (``Listing``): a key added since, or written since, is kept
and reported, never lost, whatever the clock of the process that wrote it says. A write that changes
nothing (the same value, and for a task key the same expiry) is not made: no row is touched, no event is
recorded, and the returned row says so (``written`` is False). Every write reads the key it replaces under
a lock, a key that does not exist yet included (``_locked_or_created``): parallel writers of one key each
record the value they replaced.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from itertools import islice
from types import SimpleNamespace

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, connections, transaction
from django.db.models import Exists, Q, QuerySet
from django.utils import timezone

from statestore_admin.airflow.models import Asset, AssetStateStore, DagRun, TaskStateStore
from statestore_admin.airflow.router import airflow_alias

from . import audit, objects, permissions, selectors
from .actors import Actor
from .errors import Conflict, Forbidden, Invalid, NotFound
from .exports import Target, parse_document
from .models import AuditEvent, AuditKey
from .scopes import Scope, scope_of
from .selectors import TaskScope
from .values import Expiry, clean_key, encode_value, same_value, stored_surrogate

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


def _keys(n: int) -> str:
    return f"{n:,} key{'s' if n != 1 else ''}"


@dataclass(frozen=True)
class Outcome:
    """What an action did: ``changed`` rows and the audit event that records it (None when nothing
    changed). After a confirmation, what it did not touch: ``added`` keys it had not listed, ``rewritten``
    keys written since it listed them (both kept; ``kept_keys`` names the first of them), and ``gone``
    listed keys that no longer existed."""

    changed: int
    added: int = 0
    rewritten: int = 0
    gone: int = 0
    kept_keys: tuple[str, ...] = ()
    event: AuditEvent | None = None
    objects: objects.ObjectDeletes | None = None

    @property
    def kept(self) -> int:
        return self.added + self.rewritten

    @property
    def objects_failed(self) -> int:
        """Worker-side objects that could not be deleted after their rows (now orphans): a warning to the user."""
        return self.objects.failed_count if self.objects is not None else 0

    def describe(self, verb: str) -> str:
        text = f"{verb} {_keys(self.changed)}"
        if self.kept:
            why = [
                f"{self.added:,} added" if self.added else "",
                f"{self.rewritten:,} written" if self.rewritten else "",
            ]
            names = ", ".join(repr(k) for k in self.kept_keys[:KEPT_NAMED])
            more = f" and {self.kept - KEPT_NAMED:,} more" if self.kept > KEPT_NAMED else ""
            text += (
                f"; kept {_keys(self.kept)} that changed after the list was shown "
                f"({', '.join(w for w in why if w)} since): {names}{more}"
            )
        if self.gone:
            text += f"; {_keys(self.gone)} listed {'were' if self.gone != 1 else 'was'} already gone"
        return text + "." + (self.objects.describe() if self.objects else "")


# Confirmations ----------------------------------------------------------------------------------------
LISTED_MAX = 10_000  # keys one confirmation can list (its token carries 12 bytes per key)
KEPT_NAMED = 5  # kept keys named in an outcome's description
_HASH_BYTES = 6  # of a key's identity, and of its version
_TOKEN_SALT = "statestore_admin.state.services.Listing"


@cache
def _hash_key() -> bytes:
    """The key of the hashes in listings: a user cannot learn a value from its hash by guessing."""
    return hashlib.sha256(b"statestore-admin listing\0" + settings.SECRET_KEY.encode()).digest()


def _hashed(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), key=_hash_key(), digest_size=_HASH_BYTES).digest()


def _identity(row) -> str:
    """A task key is its row id; an asset key, its asset and name."""
    return f"t{row.pk}" if isinstance(row, TaskStateStore) else f"a{row.asset_id}\0{row.key}"


def _version(row) -> str:
    """A key as a confirmation shows it: when its writer says it was written, and its value."""
    return f"{row.updated_at.isoformat()}\0{row.value}"


@dataclass(frozen=True)
class Listing:
    """The keys a confirmation listed: each key's identity and version (``_identity``, ``_version``), as
    keyed hashes. The dialog carries it as a signed ``token``; confirming acts on exactly these keys as
    they were. ``sample`` holds the first rows in the listing's order, for the dialog to show."""

    versions: dict[bytes, bytes]
    sample: tuple = ()
    refs: int = 0  # worker-side references among the keys
    latest: datetime | None = None  # the latest ``updated_at`` among the keys

    @property
    def count(self) -> int:
        return len(self.versions)

    @property
    def token(self) -> str:
        packed = b"".join(identity + version for identity, version in sorted(self.versions.items()))
        return signing.Signer(salt=_TOKEN_SALT).sign(base64.urlsafe_b64encode(packed).decode())

    @classmethod
    def from_token(cls, token: str) -> Listing:
        try:
            packed = base64.urlsafe_b64decode(signing.Signer(salt=_TOKEN_SALT).unsign(token or ""))
        except (signing.BadSignature, ValueError):
            raise Invalid({"listed": "The confirmation's list of keys is missing or damaged; open it again."}) from None
        step = 2 * _HASH_BYTES
        return cls(
            {packed[i : i + _HASH_BYTES]: packed[i + _HASH_BYTES : i + step] for i in range(0, len(packed), step)}
        )

    def sort(self, rows: list, others: list[tuple[str, bool]]) -> list:
        """Of ``rows`` (current, locked), those listed in the version listed; each other one is added to
        ``others`` as (its key, whether it was listed in another version)."""
        listed = []
        for row in rows:
            version = self.versions.get(_hashed(_identity(row)))
            if version is not None and version == _hashed(_version(row)):
                listed.append(row)
            else:
                others.append((row.key, version is not None))
        return listed


def _outcome(
    recorder, listed: Listing | None, others: list[tuple[str, bool]], deletes: objects.ObjectDeletes | None = None
) -> Outcome:
    """What an action did, and after a confirmation (``listed``), what it kept (``others``)."""
    if listed is None:
        return Outcome(recorder.count, event=recorder.event, objects=deletes)
    rewritten = sum(1 for _, was_listed in others if was_listed)
    return Outcome(
        recorder.count,
        added=len(others) - rewritten,
        rewritten=rewritten,
        gone=listed.count - recorder.count - rewritten,
        kept_keys=tuple(key for key, _ in others[:KEPT_NAMED]),
        event=recorder.event,
        objects=deletes,
    )


def _holds_ref(rows) -> bool:
    return any(r.value and objects.REF_MARKER in r.value for r in rows)


def _delete_objects(recorder) -> objects.ObjectDeletes | None:
    """Airflow's order for worker-side values: the rows are deleted and committed (the caller's ``audit.change``
    has finished), then their objects. The references are read back from the change's own audit keys, a chunk
    at a time (memory stays bounded however many rows went). A failed object delete never brings a row back:
    it is recorded in the audit event (its reference and error) and reported; the object is an orphan until
    the same key is written again (references are deterministic) or ``state_store_orphans --delete`` removes
    it. None when no deleted row referenced an object (inline references have none)."""
    if recorder.event is None:
        return None
    values = (
        AuditKey.objects.filter(event=recorder.event, before_value__contains=objects.REF_MARKER)
        .order_by("pk")
        .values_list("before_value", flat=True)
        .iterator(chunk_size=audit.CHUNK)
    )
    store, deletes = objects.storage(), objects.ObjectDeletes()
    while chunk := list(islice(values, audit.CHUNK)):
        objects.delete_objects(objects.refs_to_delete(chunk, store), store, into=deletes)
    if not deletes.attempted:
        return None
    details = {**recorder.event.details, "objects": deletes.details()}
    AuditEvent.objects.filter(pk=recorder.event.pk).update(details=details)
    recorder.event.details = details
    return deletes


def _listed_chunks(rows: QuerySet, ordering: str, listed: Listing, others: list) -> Iterator[list]:
    """The rows that ``listed`` lists in the version it listed, locked, a chunk at a time (see
    ``_locked_chunks``); the other rows are added to ``others`` (``Listing.sort``)."""
    for chunk in _locked_chunks(rows, ordering):
        chosen = listed.sort(chunk, others)
        if chosen:
            yield chosen


def list_keys(rows: QuerySet, *, sample: int = 0) -> Listing:
    """List ``rows`` (task or asset keys, in the order to show) for a confirmation; the first ``sample``
    rows are kept, each with ``preview``, ``size`` and ``is_ref`` as ``selectors.with_previews`` gives.
    More than ``LISTED_MAX`` keys cannot be confirmed one by one (Invalid). Values are read to hash their
    versions, never returned beyond the sample."""
    count = rows.count()
    if count > LISTED_MAX:
        raise Invalid(
            {
                "keys": f"These are {count:,} keys; a confirmation lists at most {LISTED_MAX:,}. Act on fewer at "
                "a time (a selection, one map index), or use the API's clear."
            }
        )
    versions, shown, refs, latest = {}, [], 0, None
    for row in rows.iterator(chunk_size=audit.CHUNK):
        versions[_hashed(_identity(row))] = _hashed(_version(row))
        refs += row.value.startswith(selectors.REF_PREFIX)
        latest = row.updated_at if latest is None else max(latest, row.updated_at)
        if len(shown) < sample:
            row.preview = row.value[: selectors.PREVIEW_CHARS]
            row.size, row.is_ref = len(row.value), row.value.startswith(selectors.REF_PREFIX)
            shown.append(row)
    return Listing(versions, tuple(shown), refs, latest)


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


def _check_unchanged(row, seen_updated_at: datetime | None) -> None:
    """An edit opened on the version ``seen_updated_at`` is refused when the key was written since; the
    Conflict carries the current version (value and ``updated_at``) to offer instead."""
    if seen_updated_at is not None and row.updated_at != seen_updated_at:
        raise Conflict(
            "This key was written after you opened it; nothing was saved.",
            [{"key": row.key, "current": row.value, "updated_at": row.updated_at}],
        )


def _unwritten(row):
    """A write that would change nothing is not made: no row is touched and no event recorded (the
    event's ``audit.change`` records nothing), and the row says so."""
    row.written = False
    return row


def _state(row) -> audit.KeyState:
    return (row.value, getattr(row, "expires_at", None))


# The natural key of a row: what ``ON CONFLICT`` names (Airflow's unique constraint, or primary key).
NATURAL_KEYS = {TaskStateStore: ("dag_run", "task_id", "map_index", "key"), AssetStateStore: ("asset", "key")}
CREATE_ATTEMPTS = 5  # a new key that other writers keep creating and deleting meanwhile: then a Conflict


def _locked_or_created(rows: QuerySet, new, gone: NotFound):
    """The key's row, locked, and whether this transaction created it: ``new`` (an unsaved row holding what
    to write) is inserted when there is no row, unless it is None (then the row is None). Call inside
    Airflow's transaction, before recording the change.

    ``SELECT … FOR UPDATE`` locks nothing where no row exists yet: two writers of a new key would both find
    none, and the second would overwrite the first's row believing it created the key. Here the insert
    itself decides (``_insert_if_absent``); when another writer created the key first, its committed row is
    locked and read, so a write's *before* is always the value it replaces. ``gone``: raised when the row's
    DAG run or asset was deleted since the caller checked it."""
    for _ in range(CREATE_ATTEMPTS):
        row = rows.select_for_update().first()
        if row is not None or new is None:
            return row, False
        try:
            if _insert_if_absent(new):
                return new, True
        except IntegrityError:  # the foreign key: its DAG run or asset is gone (nothing was inserted)
            raise gone from None
    raise Conflict(f"Other writers created and deleted the key {new.key!r} meanwhile; nothing was written. Try again.")


def _may(actor: Actor, store: str, action: str) -> bool:
    try:
        permissions.require(actor, store, action)
    except Forbidden:
        return False
    return True


def _insert_if_absent(row) -> bool:
    """``INSERT … ON CONFLICT DO NOTHING`` of the new ``row``: True when this statement created it (no other
    transaction can see or write it until Airflow's transaction commits), False when the key exists. On
    PostgreSQL the statement waits for a concurrent insert of the same key to commit or roll back, so after
    False the row is there to lock; on SQLite, writers take turns (``BEGIN IMMEDIATE``, docs/writes.md)."""
    meta = type(row)._meta
    connection = connections[airflow_alias()]
    quote = connection.ops.quote_name
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    conflict = ", ".join(quote(meta.get_field(name).column) for name in NATURAL_KEYS[type(row)])
    returned = meta.pk if meta.pk.column else fields[0]  # a composite primary key has no column of its own
    statement = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))}) ON CONFLICT ({conflict}) DO NOTHING "
        f"RETURNING {quote(returned.column)}"
    )
    params = [f.get_db_prep_save(f.pre_save(row, add=True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        inserted = cursor.fetchone()
    if inserted is None:
        return False
    if returned is meta.pk:
        setattr(row, meta.pk.attname, inserted[0])
    row._state.adding, row._state.db = False, connection.alias
    return True


# Task keys --------------------------------------------------------------------------------------------
def set_task_key(
    *, actor: Actor, scope: TaskScope, key: str, value, expiry: Expiry, mode: str = UPSERT
) -> TaskStateStore:
    """Write a key's value and expiry. ``mode``: CREATE (add; an existing key is a Conflict) or UPSERT
    (Airflow's PUT: create or overwrite). Needs ``add`` for a new key, ``change`` for an existing one.
    Writing the value and expiry a key has is not made (``written`` False): with the default retention
    the expiry moves on, so such a write is made."""
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
    new = TaskStateStore(
        dag_run=run,
        dag_id=scope.dag_id,
        run_id=scope.run_id,
        task_id=scope.task_id,
        map_index=scope.map_index,
        key=key,
        value=text,
        updated_at=now,
        expires_at=expires_at,
    )
    may_add = _may(actor, permissions.TASK, "add")
    with audit.change(actor, action, permissions.TASK, scope=scope.as_audit_scope()) as recorder:
        row, created = _locked_or_created(rows, new if may_add else None, _run_gone(scope))
        if row is not None and not created and mode == CREATE:
            raise Conflict(f"The key {key!r} already exists on this task instance; edit it instead.")
        # a row this write created needed ``add`` (checked before inserting); any other needs ``change``
        permissions.require(actor, permissions.TASK, "change" if row and not created else "add")
        if created:
            recorder.record([audit.task_change(row, before=None, after=(text, expires_at), limit=recorder.limit)])
        else:
            if same_value(row.value, text) and row.expires_at == expires_at:
                return _unwritten(row)
            recorder.record(
                [audit.task_change(row, before=_state(row), after=(text, expires_at), limit=recorder.limit)]
            )
            row.value, row.updated_at, row.expires_at = text, now, expires_at
            row.save(update_fields=["value", "updated_at", "expires_at"])
    row.written = True
    return row


def _run_gone(scope: TaskScope) -> NotFound:
    """What a write answers when the key's DAG run was deleted between its checks and its insert."""
    return NotFound(
        f"Task instance not found for dag_id={scope.dag_id!r}, run_id={scope.run_id!r}, "
        f"task_id={scope.task_id!r}, map_index={scope.map_index}"
    )


def patch_task_key(*, actor: Actor, ref: TaskKeyRef, value, seen_updated_at: datetime | None = None) -> TaskStateStore:
    """Replace an existing key's value and keep its expiry (Airflow's PATCH). The key's task instance
    must exist; ``seen_updated_at`` (the dashboard's edit) refuses to overwrite a newer write. The same
    value is not written (``written`` False)."""
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
        if same_value(row.value, text):
            return _unwritten(row)
        recorder.record(
            [audit.task_change(row, before=_state(row), after=(text, row.expires_at), limit=recorder.limit)]
        )
        row.value, row.updated_at = text, timezone.now()
        row.save(update_fields=["value", "updated_at"])
    row.written = True
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


def expire_task_keys(*, actor: Actor, selection: TaskSelection, listed: Listing | None = None) -> Outcome:
    """Set ``expires_at = now``: the next GC removes the keys; until then tasks can still read them. After
    a confirmation, only the keys it ``listed``, as it listed them."""
    permissions.require(actor, permissions.TASK, "change")
    rows, others = selection.queryset(scope_of(actor)), []
    now = timezone.now()
    with audit.change(actor, Action.EXPIRE, permissions.TASK, scope=selection.audit_scope()) as recorder:
        chunks = _locked_chunks(rows, "id") if listed is None else _listed_chunks(rows, "id", listed, others)
        for chunk in chunks:
            recorder.record(
                [audit.task_change(r, before=_state(r), after=(r.value, now), limit=recorder.limit) for r in chunk]
            )
            TaskStateStore.objects.filter(pk__in=[r.pk for r in chunk]).update(expires_at=now)
    return _outcome(recorder, listed, others)


def delete_task_keys(*, actor: Actor, selection: TaskSelection, listed: Listing | None = None) -> Outcome:
    """Delete the selected keys (their rows, then their worker-side objects: ``_delete_objects``); after a
    confirmation, only the keys it ``listed``, as it listed them."""
    return _delete_task_rows(actor, selection, listed, Action.DELETE)


def clear_task_instance(
    *, actor: Actor, scope: TaskScope, all_map_indices: bool = False, listed: Listing | None = None
) -> Outcome:
    """Delete every key of the task instance, or of every map index of the task (404 if there is none);
    after a confirmation, only the keys it ``listed``, as it listed them."""
    selection = TaskSelection.of_instance(scope, all_map_indices)
    return _delete_task_rows(actor, selection, listed, Action.CLEAR)


def _delete_task_rows(actor, selection: TaskSelection, listed: Listing | None, action) -> Outcome:
    permissions.require(actor, permissions.TASK, "delete")
    # The task instance's existence is a condition of the DELETE itself; only when nothing was deleted is it
    # looked up, to answer Airflow's 404 for a missing task instance.
    allowed = scope_of(actor)
    if selection.scope is not None:
        allowed.require_dag(selection.scope.dag_id)
    few = _named_keys_condition(selection) if listed is None else None
    rows, others = (None if few else selection.queryset(allowed, check_instance=False)), []
    details = {"all_map_indices": True} if selection.all_map_indices else {}
    holds_refs = False
    with audit.change(actor, action, permissions.TASK, scope=selection.audit_scope(), details=details) as recorder:
        # Deleted first and recorded next, inside Airflow's transaction: its commit follows the record.
        if listed is None:
            deleted = _deleted_chunks(TaskStateStore, rows, ("id",), few)
        else:
            deleted = (
                part
                for chunk in _listed_chunks(rows, "id", listed, others)
                for part in _deleted_chunks(
                    TaskStateStore, TaskStateStore.objects.filter(pk__in=[r.pk for r in chunk]), ("id",)
                )
            )
        for chunk in deleted:
            recorder.record([audit.task_change(r, before=_state(r), after=None, limit=recorder.limit) for r in chunk])
            holds_refs = holds_refs or _holds_ref(chunk)
    if not recorder.count and not others:
        selection.require_instance()
    return _outcome(recorder, listed, others, _delete_objects(recorder) if holds_refs else None)


# Asset keys -------------------------------------------------------------------------------------------
def _asset_scope(asset: Asset) -> dict:
    return {"asset_id": asset.pk, "asset_name": asset.name, "asset_uri": asset.uri}


def set_asset_key(
    *, actor: Actor, asset_id: int, key: str, value, mode: str = UPSERT, seen_updated_at: datetime | None = None
) -> AssetStateStore:
    """Write an asset key, recorded as written by the API (as Airflow's PUT does). ``mode``: CREATE (add;
    an existing key is a Conflict), UPSERT (Airflow's PUT) or UPDATE (edit; a missing key is NotFound).
    The same value is not written (``written`` False): by an edit, whoever wrote it last; by a PUT, when
    the API wrote it last (otherwise the PUT records the API as its writer)."""
    permissions.require_any(
        actor, permissions.ASSET, {CREATE: ("add",), UPDATE: ("change",)}.get(mode, ("add", "change"))
    )
    key = clean_key(key)
    text = encode_value(value)
    asset = selectors.get_asset(asset_id, scope=scope_of(actor))
    now = timezone.now()
    rows = AssetStateStore.objects.filter(asset_id=asset_id, key=key)
    action = Action.ADD if mode == CREATE else Action.PATCH if mode == UPDATE else Action.SET
    new = AssetStateStore(asset_id=asset_id, key=key, value=text, updated_at=now, **API_WRITER_FIELDS)
    may_add = mode != UPDATE and _may(actor, permissions.ASSET, "add")
    gone = NotFound(f"Asset with id {asset_id} not found")
    with audit.change(actor, action, permissions.ASSET, scope=_asset_scope(asset)) as recorder:
        row, created = _locked_or_created(rows, new if may_add else None, gone)
        if row is not None and not created and mode == CREATE:
            raise Conflict(f"The key {key!r} already exists on this asset; edit it instead.")
        if row is None and mode == UPDATE:
            raise NotFound(f"Asset {asset_id} has no key {key!r}: it may have been deleted.")
        # a row this write created needed ``add`` (checked before inserting); any other needs ``change``
        permissions.require(actor, permissions.ASSET, "change" if row and not created else "add")
        if created:
            before = None
        else:
            _check_unchanged(row, seen_updated_at)
            by_api = all(getattr(row, name) == wanted for name, wanted in API_WRITER_FIELDS.items())
            if same_value(row.value, text) and (mode == UPDATE or by_api):
                return _unwritten(row)
            before = _state(row)
        recorder.record([audit.asset_change(asset_id, key, before=before, after=(text, None), limit=recorder.limit)])
        if not created:
            rows.update(value=text, updated_at=now, **API_WRITER_FIELDS)
    row = selectors.get_asset_key(asset_id, key, scope=scope_of(actor))
    row.written = True
    return row


def asset_selection(asset_id: int, keys: list[str] | None = None) -> QuerySet:
    """An asset's keys, all or those named, by key: what a delete or clear acts on, and its confirmation
    lists."""
    rows = AssetStateStore.objects.filter(asset_id=asset_id)
    return (rows if keys is None else rows.filter(key__in=keys)).order_by("key")


def delete_asset_keys(*, actor: Actor, asset_id: int, keys: list[str], listed: Listing | None = None) -> Outcome:
    """Delete the named keys of an asset (absent ones are not an error, as in Airflow); after a
    confirmation, only the keys it ``listed``, as it listed them."""
    if not keys:
        raise Invalid({"keys": "Select at least one key."})
    return _delete_asset_rows(actor, asset_id, keys, listed, Action.DELETE)


def clear_asset(*, actor: Actor, asset_id: int, listed: Listing | None = None) -> Outcome:
    """Delete every key of an asset (clear its state); after a confirmation, only the keys it ``listed``,
    as it listed them."""
    return _delete_asset_rows(actor, asset_id, None, listed, Action.CLEAR)


def _delete_asset_rows(actor, asset_id: int, keys: list[str] | None, listed: Listing | None, action) -> Outcome:
    permissions.require(actor, permissions.ASSET, "delete")
    asset = selectors.get_asset(asset_id, scope=scope_of(actor))
    rows, others = asset_selection(asset_id, keys), []
    identity = ("asset_id", "key")
    holds_refs = False
    with audit.change(actor, action, permissions.ASSET, scope=_asset_scope(asset)) as recorder:
        if listed is None:
            deleted = _deleted_chunks(AssetStateStore, rows, identity)
        else:
            deleted = (
                part
                for chunk in _listed_chunks(rows, "key", listed, others)
                for part in _deleted_chunks(AssetStateStore, rows.filter(key__in=[r.key for r in chunk]), identity)
            )
        for chunk in deleted:
            recorder.record(
                [audit.asset_change(asset_id, r.key, before=_state(r), after=None, limit=recorder.limit) for r in chunk]
            )
            holds_refs = holds_refs or _holds_ref(chunk)
    return _outcome(recorder, listed, others, _delete_objects(recorder) if holds_refs else None)


# Restore ----------------------------------------------------------------------------------------------
KEEP, OVERWRITE = "keep", "overwrite"
RUNS_A_QUERY = 100  # (dag_id, run_id) pairs looked up in one query


@dataclass
class RestoreOutcome:
    restored: int = 0
    unchanged: int = 0
    kept: list[dict] = field(default_factory=list)  # conflicts the operator chose to keep
    missing: list[dict] = field(default_factory=list)  # DAG run or asset gone: nothing restored for them
    events: list[AuditEvent] = field(default_factory=list)
    dangling: list[str] = field(default_factory=list)  # restored references whose objects no longer exist

    def describe(self) -> str:
        parts = [f"Restored {self.restored} key{'s' if self.restored != 1 else ''}"]
        if self.unchanged:
            parts.append(f"{self.unchanged} already as recorded")
        if self.kept:
            parts.append(f"{len(self.kept)} kept as they are now")
        if self.missing:
            parts.append(f"{len(self.missing)} not restored: {self.missing[0]['reason']}")
        if self.dangling:
            n = len(self.dangling)
            count = f"{n}{' or more' if n >= objects.FAILED_NAMED else ''}"
            parts.append(
                f"{count} restored reference{'s' if n != 1 else ''} point{'s' if n == 1 else ''} at a "
                f"worker-side object that no longer exists (deleted after its row), e.g. {self.dangling[0]}: "
                "tasks read no value there"
            )
        return "; ".join(parts) + "."


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
        reason = {
            Action.GC: "Garbage collection follows Airflow's rules and is not restorable.",
            Action.ORPHANS: "Deleted orphans were objects without rows: there is nothing to restore.",
        }.get(event.action, "This change failed and changed nothing: there is nothing to restore.")
        raise Invalid({"event": reason})
    _require_few_enough(actor, event.key_count, "event", f"--event {event.pk}")
    targets = []
    for key in event.keys.all().iterator(chunk_size=audit.CHUNK):
        if key.truncated:
            raise Invalid({"event": f"The recorded value of {key.key!r} is truncated; it cannot be restored."})
        surrogate = stored_surrogate(key.before_value) if key.before_value is not None else None
        if surrogate:  # restored, it would be a value that no write of the dashboard may make
            raise Invalid(
                {"event": f"The recorded value of {key.key!r} holds {surrogate}; lone surrogates cannot be restored."}
            )
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
    targets = parse_document(document)
    _require_few_enough(actor, len(targets), "file", "FILE")
    return _restore(actor, targets, overwrite, {}, restored_from=None)


def _require_few_enough(actor: Actor, count: int, field: str, argument: str) -> None:
    """A page or an API request restores at most ``RESTORE_MAX_KEYS`` keys, so that one request holds a
    worker (and the rows it locks) for seconds, not minutes; ``state_store_restore``, which no request
    waits for, has no limit."""
    limit = settings.RESTORE_MAX_KEYS
    if actor.is_system or count <= limit:
        return
    raise Invalid(
        {
            field: f"This restore holds {count} keys; a restore from a page or the API holds at most {limit} "
            f"(RESTORE_MAX_KEYS). Nothing was restored: run `manage.py state_store_restore {argument}` on the "
            "server, which has no limit."
        }
    )


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
    scope = scope_of(actor)
    _require_in_scope(scope, targets)
    # Every store is checked before any is changed: a conflict anywhere restores nothing anywhere.
    with transaction.atomic(using=airflow_alias()):
        conflicts = [
            c for store, group in groups.items() for c in _plan(store, group, overwrite, resolutions, scope)[1]
        ]
    _raise_conflicts(conflicts)
    result = RestoreOutcome()
    for store, group in groups.items():
        _restore_store(actor, store, group, overwrite, resolutions, restored_from, scope, result)
    if result.restored:
        result.dangling = objects.missing_objects(t.state[0] for t in targets if t.state is not None)
    return result


def _require_in_scope(allowed: Scope, targets: list[Target]) -> None:
    """Every task key to restore is of a DAG in scope: otherwise nothing is restored. (A DAG is in scope by
    its id, whether it exists or not; an asset out of scope is not restored as if it were missing, so that
    no answer tells it from one that does not exist: ``_reachable_assets``.)"""
    if not allowed.restricted:
        return
    outside = sorted({t.dag_id for t in targets if t.store == permissions.TASK and not allowed.allows_dag(t.dag_id)})
    if outside:
        raise Forbidden(f"Nothing was restored: you do not have access to {', '.join(map(str, outside[:5]))}.")


def _reachable_assets(allowed: Scope, targets: list[Target]) -> set[int]:
    """The ids of the targets' assets that exist and are in scope; the others are reported as missing."""
    wanted = sorted({t.asset_id for t in targets if t.store == permissions.ASSET})
    found: set[int] = set()
    for start in range(0, len(wanted), audit.CHUNK):
        ids = wanted[start : start + audit.CHUNK]
        found.update(selectors.scoped_assets(allowed).filter(pk__in=ids).values_list("pk", flat=True))
    return found


def _raise_conflicts(conflicts: list[dict]) -> None:
    if conflicts:
        raise Conflict(
            f"{len(conflicts)} key{'s were' if len(conflicts) != 1 else ' was'} written again since; "
            "nothing was restored. Choose per key, or overwrite.",
            conflicts,
        )


def _plan(store, targets, overwrite, resolutions, scope: Scope, result: RestoreOutcome | None = None):
    """What a restore would do, with the rows locked (inside Airflow's transaction): the (target, row, current
    state) to write, and the conflicts; missing, unchanged and kept keys are counted in ``result``."""
    result = result or RestoreOutcome()
    conflicts, plan = [], []
    assets = _reachable_assets(scope, targets) if store == permissions.ASSET else set()
    for target, (row, missing) in zip(targets, _locate(store, targets, assets), strict=True):
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


def _restore_store(
    actor, store, targets, overwrite, resolutions, restored_from, scope: Scope, result: RestoreOutcome
) -> None:
    with audit.change(actor, Action.RESTORE, store, restored_from=restored_from) as recorder:
        plan, conflicts = _plan(store, targets, overwrite, resolutions, scope, result)
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


def _locate(store: str, targets: list[Target], assets: set[int]) -> Iterator[tuple[object, str]]:
    """Each target's current row (locked) or None, and why it cannot be restored ("" when it can), in the
    targets' order. ``assets``: the asset ids that exist in the actor's scope; any other reads as no longer
    existing. A few queries a chunk of targets, not one a target."""
    for start in range(0, len(targets), audit.CHUNK):
        chunk = targets[start : start + audit.CHUNK]
        yield from (_locate_tasks(chunk) if store == permissions.TASK else _locate_assets(chunk, assets))


def _locate_tasks(targets: list[Target]) -> list[tuple[object, str]]:
    pairs = sorted({(t.dag_id, t.run_id) for t in targets})
    runs = {}
    for start in range(0, len(pairs), RUNS_A_QUERY):
        wanted = Q()
        for dag_id, run_id in pairs[start : start + RUNS_A_QUERY]:
            wanted |= Q(dag_id=dag_id, run_id=run_id)
        runs.update(((d, r), pk) for d, r, pk in DagRun.objects.filter(wanted).values_list("dag_id", "run_id", "pk"))
    rows = {}
    by_run: dict[int, list[Target]] = {}
    for target in targets:
        target.run_pk = runs.get((target.dag_id, target.run_id))
        if target.run_pk is not None:
            by_run.setdefault(target.run_pk, []).append(target)
    for run_pk, group in by_run.items():
        found = TaskStateStore.objects.select_for_update().filter(
            dag_run_id=run_pk, task_id__in={t.task_id for t in group}, key__in={t.key for t in group}
        )
        rows.update(((run_pk, r.task_id, r.map_index, r.key), r) for r in found.order_by("pk"))
    located = []
    for target in targets:
        if target.run_pk is None:
            located.append((None, f"the DAG run {target.run_id!r} of {target.dag_id!r} no longer exists"))
        else:
            located.append((rows.get((target.run_pk, target.task_id, target.map_index, target.key)), ""))
    return located


def _locate_assets(targets: list[Target], assets: set[int]) -> list[tuple[object, str]]:
    reachable = [t for t in targets if t.asset_id in assets]
    rows = {}
    if reachable:
        found = AssetStateStore.objects.select_for_update().filter(
            asset_id__in={t.asset_id for t in reachable}, key__in={t.key for t in reachable}
        )
        rows = {(r.asset_id, r.key): r for r in found.order_by("asset_id", "key")}
    return [
        (rows.get((t.asset_id, t.key)), "")
        if t.asset_id in assets
        else (None, f"the asset with id {t.asset_id} no longer exists")
        for t in targets
    ]


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
            _insert_restored(
                target,
                TaskStateStore(
                    dag_run_id=target.run_pk,
                    dag_id=target.dag_id,
                    run_id=target.run_id,
                    task_id=target.task_id,
                    map_index=target.map_index,
                    key=target.key,
                    value=target.state[0],
                    updated_at=now,
                    expires_at=target.state[1],
                ),
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
        _insert_restored(
            target,
            AssetStateStore(
                asset_id=target.asset_id, key=target.key, value=target.state[0], updated_at=now, **API_WRITER_FIELDS
            ),
        )
    else:
        rows.update(value=target.state[0], updated_at=now, **API_WRITER_FIELDS)


def _insert_restored(target: Target, new) -> None:
    """Bring back a key that was not there when the restore locked its keys: one that another writer created
    since is a conflict (nothing is restored, the event fails), never overwritten unseen."""
    if not _insert_if_absent(new):
        # the restore reaches this key (it got this far), so its asset counts as existing for the lookup
        ((row, _),) = _locate(target.store, [target], {target.asset_id})
        current = _state(row) if row is not None else None
        _raise_conflicts([{**target.describe(), "current": _state_dict(current), "restore": _state_dict(target.state)}])
