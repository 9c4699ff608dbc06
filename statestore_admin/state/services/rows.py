"""Rows of the state store under a write: locked a chunk at a time, inserted if absent (``INSERT … ON
CONFLICT`` on the ``NATURAL_KEYS``, so that parallel writers of a new key each record the value they
replaced), deleted a chunk at a time (``DELETE … RETURNING``), and the worker-side objects of deleted rows
deleted after them. Call these inside Airflow's transaction (``audit.change``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from itertools import islice
from types import SimpleNamespace

from django.db import IntegrityError, connections
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from statestore_admin.access import policies
from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore, column_of, select_list, stored_fields
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.versions import schema_of
from statestore_admin.audit import events as audit
from statestore_admin.core.errors import Conflict, Invalid, NotFound
from statestore_admin.core.pagination import keyset_chunks
from statestore_admin.objects import store as objects
from statestore_admin.records.models import AuditEvent, AuditKey

API_WRITER = "api"
# What Airflow's API records as the writer of an asset key: kind "api", no task.
API_WRITER_FIELDS = {
    "last_updated_by_kind": API_WRITER,
    "last_updated_by_dag_id": None,
    "last_updated_by_run_id": None,
    "last_updated_by_task_id": None,
    "last_updated_by_map_index": None,
    # Airflow 3.4's task writer identity (no such columns on 3.3: nothing is written there).
    "last_updated_by_task_instance_id": None,
    "last_updated_by_region_id": None,
    "last_updated_by_region_index": None,
    "last_updated_by_try_number": None,
}


def holds_ref(rows) -> bool:
    return any(r.value and objects.REF_MARKER in r.value for r in rows)


def require_object_delete(actor: Actor, store: str, text: str) -> None:
    """An edit that also deletes the object of the reference it replaces (``delete_objects_of`` once the row
    is written): a delete, so it needs ``delete``; and the new value must not be a reference itself (it could
    name the same object)."""
    policies.require(actor, store, "delete_object")
    if objects.REF_MARKER in text:
        raise Invalid(
            {
                "value": _(
                    "The new value is a worker-side reference itself: its object is not deleted. Untick "
                    "“Also delete the worker-side object”, or save an inline value."
                )
            }
        )


def delete_objects_of(recorder) -> objects.ObjectDeletes | None:
    """Airflow's order for worker-side values: the rows are deleted (or, by an edit, their references
    replaced) and committed (the caller's ``audit.change`` has finished), then their objects. The references
    are read back from the change's own audit keys, a chunk at a time (memory stays bounded however many rows
    went). A failed object delete never brings a row back:
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


def locked_chunks(rows: QuerySet, ordering: str) -> Iterator[list]:
    """The rows, locked, ``audit.CHUNK`` at a time in ``ordering`` (keyset, no open cursor); call inside
    Airflow's transaction. Yields lists of rows."""
    return keyset_chunks(rows, (ordering,), audit.CHUNK, lock=True)


def deleted_chunks(
    model, rows: QuerySet | None, identity: tuple[str, ...], few: tuple[str, list] | None = None
) -> Iterator[list]:
    """Delete the rows ``audit.CHUNK`` at a time inside Airflow's transaction, each chunk one
    ``DELETE … RETURNING`` statement; yields the deleted rows (what they held, for the audit). ``few``: the
    condition (SQL, params) of rows known to be at most a chunk, deleted by one plain statement."""
    alias = airflow_alias()
    quote = connections[alias].ops.quote_name
    columns, column_params = select_list(model, connections[alias])
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
            chunk = list(model.objects.db_manager(alias).raw(statement, [*params, *column_params]))
        else:  # a composite primary key (asset keys) cannot be a raw query's model: their fields, converted
            with connections[alias].cursor() as cursor:
                cursor.execute(statement, [*params, *column_params])
                chunk = [_namespace(model, connections[alias], values) for values in cursor.fetchall()]
        if chunk:
            yield chunk
        if few or len(chunk) < audit.CHUNK:
            return


def _namespace(model, connection, values) -> SimpleNamespace:
    """A row read by a raw cursor (``select_list``'s columns, in ``model``'s field order) as its fields' Python
    values, converted as the ORM converts them (SQLite's times are text)."""
    fields = {}
    for f, value in zip(model._meta.concrete_fields, values, strict=True):
        col = f.get_col(model._meta.db_table)
        for convert in [*connection.ops.get_db_converters(col), *f.get_db_converters(connection)]:
            value = convert(value, col, connection)
        fields[f.attname] = value
    return SimpleNamespace(**fields)


def check_unchanged(row, seen_updated_at: datetime | None) -> None:
    """An edit opened on the version ``seen_updated_at`` is refused when the key was written since; the
    Conflict carries the current version (value and ``updated_at``) to offer instead."""
    if seen_updated_at is not None and row.updated_at != seen_updated_at:
        raise Conflict(
            _("This key was written after you opened it; nothing was saved."),
            [{"key": row.key, "current": row.value, "updated_at": row.updated_at}],
        )


def unwritten(row):
    """A write that would change nothing is not made: no row is touched and no event recorded (the
    event's ``audit.change`` records nothing), and the row says so."""
    row.written = False
    return row


def state_of(row) -> audit.KeyState:
    return (row.value, getattr(row, "expires_at", None))


# The natural key of a row: what ``ON CONFLICT`` names (Airflow's unique constraint, or primary key). On
# Airflow 3.4 a task key's region is part of it: two iterations of a loop hold separate keys.
NATURAL_KEYS = {
    TaskStateStore: ("dag_run", "task_id", "region_id", "map_index", "key"),
    AssetStateStore: ("asset", "key"),
}


def natural_key(model, schema) -> list[str]:
    """The columns of ``model``'s natural key in the database of ``schema``."""
    columns = (column_of(model._meta.get_field(name), schema) for name in NATURAL_KEYS[model])
    return [c for c in columns if c is not None]


CREATE_ATTEMPTS = 5  # a new key that other writers keep creating and deleting meanwhile: then a Conflict


def locked_or_created(rows: QuerySet, new, gone: NotFound):
    """The key's row, locked, and whether this transaction created it: ``new`` (an unsaved row holding what
    to write) is inserted when there is no row, unless it is None (then the row is None). Call inside
    Airflow's transaction, before recording the change.

    ``SELECT … FOR UPDATE`` locks nothing where no row exists yet: two writers of a new key would both find
    none, and the second would overwrite the first's row believing it created the key. Here the insert
    itself decides (``insert_if_absent``); when another writer created the key first, its committed row is
    locked and read, so a write's *before* is always the value it replaces. ``gone``: raised when the row's
    DAG run or asset was deleted since the caller checked it."""
    for _attempt in range(CREATE_ATTEMPTS):
        row = rows.select_for_update().first()
        if row is not None or new is None:
            return row, False
        try:
            if insert_if_absent(new):
                return new, True
        except IntegrityError:  # the foreign key: its DAG run or asset is gone (nothing was inserted)
            raise gone from None
    message = _("Other writers created and deleted the key %(key)r meanwhile; nothing was written. Try again.")
    raise Conflict(message % {"key": new.key})


def insert_if_absent(row) -> bool:
    """``INSERT … ON CONFLICT DO NOTHING`` of the new ``row``: True when this statement created it (no other
    transaction can see or write it until Airflow's transaction commits), False when the key exists. On
    PostgreSQL the statement waits for a concurrent insert of the same key to commit or roll back, so after
    False the row is there to lock; on SQLite, writers take turns (``BEGIN IMMEDIATE``, docs/writes.md)."""
    meta = type(row)._meta
    connection = connections[airflow_alias()]
    quote, schema = connection.ops.quote_name, schema_of(connection)
    fields = [f for f in stored_fields(type(row), schema) if not f.primary_key]
    for f in meta.concrete_fields:
        if f not in fields and not f.primary_key:
            f.for_write(schema, [f.pre_save(row, add=True)])  # refuses a value this series cannot hold
    conflict = ", ".join(quote(c) for c in natural_key(type(row), schema))
    returned = meta.pk if meta.pk.column else fields[0]  # a composite primary key has no column of its own
    statement = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(column_of(f, schema)) for f in fields)}) "
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
