"""What a key's value costs: the bytes of its row in Airflow's database and, for a worker-side reference, the
bytes of its object in the worker-side storage.

A reference row holds a few hundred bytes while its object may hold megabytes, so a size read from the row
alone ranks such a key far below what it costs. The dashboard cannot ask the storage for every row (lists
never touch it), so it records an object's size whenever it reads or writes that object (``ObjectSize``, in
its own database) and shows both sizes, labelled. An object it never saw has an unknown size: shown as
unknown, counted as nothing, never as 0 bytes.

The rule, here once: a key's *stored size* is its row's bytes plus its object's recorded bytes where known
(``StoredSize.stored``); the largest values are ranked by it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.db import DatabaseError, IntegrityError, router, transaction
from django.db.models import Q
from django.utils import timezone

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore, worker_ref_of
from statestore_admin.records.models import ObjectSize

TASK, ASSET = "task", "asset"


@dataclass(frozen=True)
class Place:
    """The key an object was seen under: a task key's coordinates, or an asset's id and the key."""

    store: str
    key: str
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    map_index: int | None = None
    asset_id: int | None = None

    @classmethod
    def of_task_row(cls, row) -> Place:
        return cls(TASK, row.key, dag_id=row.dag_id, run_id=row.run_id, task_id=row.task_id, map_index=row.map_index)

    @classmethod
    def of_asset_row(cls, row) -> Place:
        return cls(ASSET, row.key, asset_id=row.asset_id)


@dataclass(frozen=True)
class StoredSize:
    """A key's sizes. ``db_bytes``: its row's value in Airflow's database (UTF-8 bytes of the JSON text);
    ``is_object``: the value is a reference to a worker-side object; ``object_bytes``: that object's size as
    the dashboard last saw it (at ``seen_at``), None when it never did (unknown, not 0)."""

    db_bytes: int
    is_object: bool = False
    object_bytes: int | None = None
    seen_at: datetime | None = None

    @property
    def object_known(self) -> bool:
        return self.object_bytes is not None

    @property
    def object_unknown(self) -> bool:
        return self.is_object and self.object_bytes is None

    @property
    def stored(self) -> int:
        """What the operator pays for: the row plus the object where its size is known."""
        return self.db_bytes + (self.object_bytes or 0)


def ref_hash(ref: str) -> str:
    return hashlib.sha256(ref.encode()).hexdigest()


def record(ref: str, size: int, place: Place) -> None:
    """Remember ``ref``'s object size as seen now. Never fails the read or write it accompanies: a database
    error only leaves the size unknown."""
    fields = {
        "ref": ref,
        "size": size,
        "seen_at": timezone.now(),
        "store": place.store,
        "key": place.key,
        "dag_id": place.dag_id,
        "run_id": place.run_id,
        "task_id": place.task_id,
        "map_index": place.map_index,
        "asset_id": place.asset_id,
    }
    try:
        with transaction.atomic(using=_alias()):
            ObjectSize.objects.update_or_create(ref_hash=ref_hash(ref), defaults=fields)
    except IntegrityError:  # another request recorded it at the same moment: its size is as good
        pass
    except DatabaseError:
        pass


def forget(refs: Iterable[str]) -> None:
    """The objects of ``refs`` are gone (deleted, or found missing): their sizes are unknown again."""
    hashes = [ref_hash(r) for r in refs]
    if hashes:
        try:
            ObjectSize.objects.filter(ref_hash__in=hashes).delete()
        except DatabaseError:
            pass


def recorded(refs: Iterable[str]) -> dict[str, ObjectSize]:
    """The recorded sizes of ``refs`` (those never seen are absent), in one query."""
    by_hash = {ref_hash(r): r for r in refs}
    if not by_hash:
        return {}
    return {by_hash[o.ref_hash]: o for o in ObjectSize.objects.filter(ref_hash__in=list(by_hash))}


def largest_recorded(limit: int) -> list[ObjectSize]:
    """The ``limit`` largest objects the dashboard has seen, largest first (their rows may have changed since:
    callers check that a row still holds the reference)."""
    return list(ObjectSize.objects.order_by("-size", "id")[:limit])


def stored_size(value: str, recorded_sizes: dict[str, ObjectSize] | None = None) -> StoredSize:
    """The sizes of a key whose stored value text is ``value``: its object's recorded size looked up (one
    query) unless ``recorded_sizes`` (of ``recorded``) is given."""
    db_bytes = len(value.encode())
    ref = worker_ref_of(value)
    if not isinstance(ref, str) or not _is_url(ref):
        return StoredSize(db_bytes)
    found = (recorded([ref]) if recorded_sizes is None else recorded_sizes).get(ref)
    if found is None:
        return StoredSize(db_bytes, is_object=True)
    return StoredSize(db_bytes, is_object=True, object_bytes=found.size, seen_at=found.seen_at)


def of_listed(rows, store: str) -> list:
    """A list page's rows (``state.selectors.with_previews``: ``size`` and ``is_ref``, no value loaded), each
    with ``sizes`` set (a ``StoredSize``: a reference's object size where recorded). At most two queries
    whatever the page: the references' own texts (a few hundred bytes each) and their recorded sizes."""
    rows = list(rows)
    refs = [r for r in rows if getattr(r, "is_ref", False)]
    values = {}
    if refs and store == TASK:
        values = dict(TaskStateStore.objects.filter(pk__in=[r.pk for r in refs]).values_list("pk", "value"))
    elif refs:
        wanted = Q(pk__in=[])
        for r in refs:
            wanted |= Q(asset_id=r.asset_id, key=r.key)
        found = AssetStateStore.objects.filter(wanted).values_list("asset_id", "key", "value")
        values = {(asset_id, key): value for asset_id, key, value in found}
    seen = recorded(ref for ref in map(worker_ref_of, values.values()) if isinstance(ref, str))
    for row in rows:
        value = values.get(row.pk if store == TASK else (row.asset_id, row.key))
        row.sizes = StoredSize(row.size) if value is None else stored_size(value, seen)
    return rows


def _is_url(ref: str) -> bool:
    """An object's reference is a URL; an inline one (JSON text under the threshold, no scheme) has no object:
    common.io's rule, as ``store.classify`` applies it."""
    return bool(urlsplit(ref).scheme)


def _alias() -> str:
    return router.db_for_write(ObjectSize)
