"""Writes to the state store. The pages, the API and the commands all go through these functions.

Every function checks the user's permission first, validates its input (``values``) and raises
``ValidationError`` (field → message), ``PermissionDenied`` or ``Http404`` before changing anything.

Writes follow Airflow's own rules (SPEC §3): ``expires_at`` is computed at write time, a task key
needs its task instance to exist, an asset write records its writer. Actions that a user confirmed
after seeing a list of keys (delete, expire, clear) only touch rows not written since the confirmation
(``updated_at <= confirmed_at``): a key a task wrote in between is kept and reported, never lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from statestore_admin.airflow.models import Asset, AssetStateStore, DagRun, TaskInstance, TaskStateStore
from statestore_admin.airflow.router import airflow_alias

from . import permissions, selectors
from .values import Expiry, clean_key, encode_value, parse_value_text

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
    """What an action did: ``changed`` rows, and ``kept`` rows skipped because they changed meanwhile."""

    changed: int
    kept: int = 0

    def describe(self, verb: str) -> str:
        text = f"{verb} {self.changed} key{'s' if self.changed != 1 else ''}"
        if self.kept:
            text += (
                f"; {self.kept} key{'s' if self.kept != 1 else ''} written since you confirmed "
                f"{'were' if self.kept != 1 else 'was'} kept"
            )
        return text + "."


def _atomic():
    return transaction.atomic(using=airflow_alias())


def _check_unchanged(row, seen_updated_at: datetime | None) -> None:
    if seen_updated_at is not None and row.updated_at != seen_updated_at:
        raise ValidationError(
            {
                "value": f"This key was written at {row.updated_at.isoformat()}, after you opened it. "
                "Reload to see the current value before changing it."
            }
        )


# Task keys ------------------------------------------------------------------------------------------
def update_task_value(user, key_id: int, value_text: str, seen_updated_at: datetime | None = None) -> TaskStateStore:
    """Replace a task key's value and keep its expiry (Airflow's PATCH)."""
    permissions.require(user, permissions.TASK, "change")
    value = parse_value_text(value_text)
    with _atomic():
        row = _lock_task_key(key_id)
        _check_unchanged(row, seen_updated_at)
        row.value, row.updated_at = value, timezone.now()
        row.save(update_fields=["value", "updated_at"])
    return row


def set_task_expiry(user, key_id: int, expiry: Expiry, seen_updated_at: datetime | None = None) -> TaskStateStore:
    """Set when a task key expires: the default retention from now, never, or a given instant."""
    permissions.require(user, permissions.TASK, "change")
    with _atomic():
        row = _lock_task_key(key_id)
        _check_unchanged(row, seen_updated_at)
        row.expires_at = expiry.resolve(timezone.now())
        row.save(update_fields=["expires_at"])
    return row


def _lock_task_key(key_id: int) -> TaskStateStore:
    try:
        return TaskStateStore.objects.select_for_update().get(pk=key_id)
    except TaskStateStore.DoesNotExist:
        raise Http404(f"No task state key with id {key_id}: it may have been deleted.") from None


def add_task_key(
    user, run: DagRun, task_id: str, map_index: int, key: str, value_text: str, expiry: Expiry
) -> TaskStateStore:
    """Create a key on an existing task instance; an existing key is an error, never overwritten."""
    permissions.require(user, permissions.TASK, "add")
    key = clean_key(key)
    value = parse_value_text(value_text)
    if map_index < -1:
        raise ValidationError({"map_index": "map_index is -1 (not mapped) or more."})
    require_task_instance(TaskScope(run.dag_id, run.run_id, task_id, map_index))
    now = timezone.now()
    try:
        with _atomic():
            return TaskStateStore.objects.create(
                dag_run=run,
                dag_id=run.dag_id,
                run_id=run.run_id,
                task_id=task_id,
                map_index=map_index,
                key=key,
                value=value,
                updated_at=now,
                expires_at=expiry.resolve(now),
            )
    except IntegrityError:
        raise ValidationError(
            {"key": f"The key {key!r} already exists on this task instance; edit it instead."}
        ) from None


@dataclass(frozen=True)
class TaskSelection:
    """Task keys chosen by a user: explicit ids, or every key of a task instance (``map_index=None``: all)."""

    ids: tuple[int, ...] = ()
    run: DagRun | None = None
    task_id: str | None = None
    map_index: int | None = None

    def queryset(self) -> QuerySet:
        if self.run is not None:
            return selectors.instance_keys(self.run, self.task_id, self.map_index)
        if not self.ids:
            raise ValidationError({"ids": "Select at least one key."})
        return TaskStateStore.objects.filter(pk__in=self.ids)


def _confirmed(rows: QuerySet, confirmed_at: datetime | None) -> tuple[QuerySet, int]:
    if confirmed_at is None:
        return rows, 0
    return rows.filter(updated_at__lte=confirmed_at), rows.filter(updated_at__gt=confirmed_at).count()


def delete_task_keys(user, selection: TaskSelection, confirmed_at: datetime | None = None) -> Outcome:
    """Delete the selected keys (the database rows; a worker-side object is not reachable from here)."""
    permissions.require(user, permissions.TASK, "delete")
    with _atomic():
        rows, kept = _confirmed(selection.queryset(), confirmed_at)
        deleted, _ = rows.delete()
    return Outcome(deleted, kept)


def expire_task_keys(user, selection: TaskSelection, confirmed_at: datetime | None = None) -> Outcome:
    """Set ``expires_at = now`` so that the next GC removes the keys; until then tasks can still read them."""
    permissions.require(user, permissions.TASK, "change")
    with _atomic():
        rows, kept = _confirmed(selection.queryset(), confirmed_at)
        changed = rows.update(expires_at=timezone.now())
    return Outcome(changed, kept)


# Asset keys -----------------------------------------------------------------------------------------
def _asset(asset_id: int) -> Asset:
    selectors.require_asset(asset_id)
    return Asset(pk=asset_id)


def set_asset_value(
    user, asset_id: int, key: str, value_text: str, *, create: bool, seen_updated_at: datetime | None = None
) -> AssetStateStore:
    """Write an asset key, recorded as written by the API (as Airflow's PUT does).

    ``create=True`` adds a new key (an existing one is an error); ``create=False`` edits an existing one.
    """
    permissions.require(user, permissions.ASSET, "add" if create else "change")
    key = clean_key(key)
    value = parse_value_text(value_text)
    asset = _asset(asset_id)
    now = timezone.now()
    with _atomic():
        if create:
            try:
                with transaction.atomic(using=airflow_alias()):
                    return AssetStateStore.objects.create(
                        asset=asset, key=key, value=value, updated_at=now, **API_WRITER_FIELDS
                    )
            except IntegrityError:
                raise ValidationError(
                    {"key": f"The key {key!r} already exists on this asset; edit it instead."}
                ) from None
        row = AssetStateStore.objects.select_for_update().filter(asset_id=asset_id, key=key).first()
        if row is None:
            raise Http404(f"Asset {asset_id} has no key {key!r}: it may have been deleted.")
        _check_unchanged(row, seen_updated_at)
        AssetStateStore.objects.filter(asset_id=asset_id, key=key).update(
            value=value, updated_at=now, **API_WRITER_FIELDS
        )
    return selectors.get_asset_key(asset_id, key)


def delete_asset_keys(user, asset_id: int, keys: list[str] | None, confirmed_at: datetime | None = None) -> Outcome:
    """Delete the given keys of an asset, or all of them (``keys=None``: clear the asset's state)."""
    permissions.require(user, permissions.ASSET, "delete")
    _asset(asset_id)
    rows = AssetStateStore.objects.filter(asset_id=asset_id)
    if keys is not None:
        if not keys:
            raise ValidationError({"keys": "Select at least one key."})
        rows = rows.filter(key__in=keys)
    with _atomic():
        rows, kept = _confirmed(rows, confirmed_at)
        deleted, _ = rows.delete()
    return Outcome(deleted, kept)


# Airflow's REST semantics (the API face) -------------------------------------------------------------
@dataclass(frozen=True)
class TaskScope:
    """A task instance as Airflow's API addresses it."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1


def require_task_instance(scope: TaskScope, any_map_index: bool = False) -> DagRun:
    """The DAG run of an existing task instance, or Airflow's 404 (writes need the task instance)."""
    instances = TaskInstance.objects.filter(dag_id=scope.dag_id, run_id=scope.run_id, task_id=scope.task_id)
    if not any_map_index:
        instances = instances.filter(map_index=scope.map_index)
    run = DagRun.objects.filter(dag_id=scope.dag_id, run_id=scope.run_id).first()
    if run is None or not instances.exists():
        addressed_by = "all_map_indices=True" if any_map_index else f"map_index={scope.map_index}"
        raise Http404(
            f"Task instance not found for dag_id={scope.dag_id!r}, run_id={scope.run_id!r}, "
            f"task_id={scope.task_id!r}, {addressed_by}"
        )
    return run


def _scope_keys(scope: TaskScope) -> QuerySet:
    return TaskStateStore.objects.filter(
        dag_id=scope.dag_id, run_id=scope.run_id, task_id=scope.task_id, map_index=scope.map_index
    )


def put_task_key(user, scope: TaskScope, key: str, value, expiry: Expiry) -> TaskStateStore:
    """Create or overwrite a key (Airflow's PUT): needs ``add`` for a new key, ``change`` for an existing one."""
    permissions.require(user, permissions.TASK, "view")
    key = clean_key(key)
    text = encode_value(value)
    run = require_task_instance(scope)
    now = timezone.now()
    with _atomic():
        row = _scope_keys(scope).select_for_update().filter(key=key).first()
        permissions.require(user, permissions.TASK, "change" if row else "add")
        if row is None:
            try:
                with transaction.atomic(using=airflow_alias()):
                    return TaskStateStore.objects.create(
                        dag_run=run,
                        dag_id=scope.dag_id,
                        run_id=scope.run_id,
                        task_id=scope.task_id,
                        map_index=scope.map_index,
                        key=key,
                        value=text,
                        updated_at=now,
                        expires_at=expiry.resolve(now),
                    )
            except IntegrityError:  # written by a task meanwhile: overwrite it, as Airflow's upsert does
                row = _scope_keys(scope).select_for_update().get(key=key)
        row.value, row.updated_at, row.expires_at = text, now, expiry.resolve(now)
        row.save(update_fields=["value", "updated_at", "expires_at"])
    return row


def patch_task_key(user, scope: TaskScope, key: str, value) -> TaskStateStore:
    """Replace the value of an existing key and keep its expiry (Airflow's PATCH)."""
    permissions.require(user, permissions.TASK, "change")
    text = encode_value(value)
    require_task_instance(scope)
    with _atomic():
        row = _scope_keys(scope).select_for_update().filter(key=key).first()
        if row is None:
            raise Http404(f"Task state store key {key!r} not found")
        row.value, row.updated_at = text, timezone.now()
        row.save(update_fields=["value", "updated_at"])
    return row


def delete_task_key(user, scope: TaskScope, key: str) -> Outcome:
    """Delete one key; nothing to delete is not an error (Airflow's DELETE)."""
    permissions.require(user, permissions.TASK, "delete")
    require_task_instance(scope)
    deleted, _ = _scope_keys(scope).filter(key=key).delete()
    return Outcome(deleted)


def clear_task_keys(user, scope: TaskScope, all_map_indices: bool = False) -> Outcome:
    """Delete every key of the task instance, or of every map index of the task."""
    permissions.require(user, permissions.TASK, "delete")
    run = require_task_instance(scope, any_map_index=all_map_indices)
    selection = TaskSelection(run=run, task_id=scope.task_id, map_index=None if all_map_indices else scope.map_index)
    return delete_task_keys(user, selection)


def put_asset_key(user, asset_id: int, key: str, value) -> AssetStateStore:
    """Create or overwrite an asset key, recorded as written by the API (Airflow's PUT)."""
    permissions.require(user, permissions.ASSET, "view")
    _asset(asset_id)
    key = clean_key(key)
    text = encode_value(value)
    exists = AssetStateStore.objects.filter(asset_id=asset_id, key=key).exists()
    permissions.require(user, permissions.ASSET, "change" if exists else "add")
    now = timezone.now()
    with _atomic():
        updated = AssetStateStore.objects.filter(asset_id=asset_id, key=key).update(
            value=text, updated_at=now, **API_WRITER_FIELDS
        )
        if not updated:
            try:
                with transaction.atomic(using=airflow_alias()):
                    AssetStateStore.objects.create(
                        asset_id=asset_id, key=key, value=text, updated_at=now, **API_WRITER_FIELDS
                    )
            except IntegrityError:  # created meanwhile: overwrite it
                AssetStateStore.objects.filter(asset_id=asset_id, key=key).update(
                    value=text, updated_at=now, **API_WRITER_FIELDS
                )
    return selectors.get_asset_key(asset_id, key)
