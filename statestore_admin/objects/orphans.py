"""The orphans report: worker-side objects no row references, and rows whose object is missing.

A worker-side backend (common.io's ``StateStoreObjectStorageBackend``, ``objects.store``) keeps a value as an
object under ``[common.io] state_store_objectstorage_path`` (the base) and its reference in the row. Objects
outlive their rows: Airflow's GC deletes rows only, and an object delete that fails after its row was
deleted leaves the object behind. ``report`` finds them, in two streamed passes of bounded memory:

1. **Rows** holding a reference (value starting with ``JsonValueMixin.REF_PREFIX``), read in keyset pages
   of ``CHUNK`` (by ``id`` for task rows, by ``(asset_id, key)`` for asset rows). Each reference is
   classified (``objects.classify``): an object reference whose object is missing is *dangling* (one
   ``fs.info`` per reference); a URL outside the base, or any URL when no base is configured, is *outside*;
   a reference that is not its key's deterministic path is an orphan *risk* (``Reference.risk``: nothing
   overwrites it once its row is gone). After ``CHECK_ERRORS_MAX`` storage errors (an unreachable storage)
   the remaining references are counted as unchecked rather than each waiting for its own error.
2. **Objects** under the base, walked directory by directory (``listing.walk``, through ``fs.walk``: one
   directory's listing at a time, never the whole tree) and checked in chunks of ``CHUNK``. An object is
   referenced iff some row's reference equals its reference exactly. Its path is parsed back into the key it belongs to
   (``<base>/<dag_id>/<run_id>/<task_id>/<map_index>/<key>[suffix]`` or
   ``<base>/assets/<asset name, uri or id>/<key>[suffix]``, segments URL-unquoted, the configured
   compression suffix or another known one stripped) and the candidate rows are read in one query per
   store and chunk, by Airflow's lookup index (task rows) or primary key (asset rows). A row may also
   reference an object that is not its own deterministic path (a risk): the references of such rows,
   collected in pass 1, count too (up to ``RISKY_IN_MEMORY`` of them; past that, and for objects whose
   path does not parse at all, one query per chunk compares the stored value text exactly:
   ``value IN (…)`` has no index, so that query is a scan of both tables).

``delete=True`` deletes the orphans last modified more than ``older_than`` ago (the command's default: one
day). A worker writes its object *before* its row, so a young unreferenced object may be a write in flight;
and a row may have been written since the object was found unreferenced: right before deleting, each
chunk of candidates is checked again (the key lookup and the exact-text scan, both fresh) and each object's
modification time is read again (a worker may be writing the same key again: object first, row next); only
what is still unreferenced and old is deleted. One audit event (action ``orphans``) records the run: pending before the
first delete, done at the end with the counts, ``older_than``, the first ``DELETED_NAMED`` deleted
references and the failures. A failed delete is counted and reported, never raised.

Access: the report spans every DAG and asset (its samples name keys of all of them): viewing needs view on
both stores and no scope; deleting needs delete on both stores as well. Commands act as the system.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import SimpleNamespace

from django.db import DatabaseError
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.access import permissions
from statestore_admin.access.actors import Actor
from statestore_admin.access.policies import allows, require_store_wide, sees_store_wide
from statestore_admin.airflow.config import AirflowConfigError
from statestore_admin.airflow.models import AssetStateStore, JsonValueMixin, TaskStateStore, worker_ref_of
from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.audit import events as audit
from statestore_admin.core.pagination import keyset_chunks
from statestore_admin.objects import store as objects
from statestore_admin.objects.listing import Obj, Parsed, modified, walk
from statestore_admin.objects.report import Deletion, OrphanReport

CHUNK = 500  # objects checked, rows read, at a time
SAMPLE_MAX = 1_000  # the largest sample a caller may ask for
DEFAULT_SAMPLE = 20
DELETED_NAMED = 100  # deleted references named in the audit event (all are counted)
CHECK_ERRORS_MAX = 20  # storage errors after which the dangling check stops (unreachable storage: no long wait per row)
RISKY_IN_MEMORY = 100_000  # references of non-deterministic rows kept for the object pass


# Access -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OrphansAccess:
    view: bool
    delete: bool


def access(user) -> OrphansAccess:
    """What ``user`` may do with the report: see it (view on both stores, no scope), delete orphans (delete
    on both stores too)."""
    stores = tuple(permissions.STORES)
    if not sees_store_wide(user, stores):
        return OrphansAccess(False, False)
    return OrphansAccess(True, all(allows(user, s, "delete_object") for s in stores))


def in_menu(user) -> bool:
    """The Orphans page is offered (the menu) to who may view it, when Airflow's configuration names a
    worker-side backend or object storage: without either no object can be orphaned (the page stays
    reachable by its address, and then shows the references no storage holds)."""
    if not access(user).view:
        return False
    try:
        return objects.storage() is not None or objects.backend_is_object_storage()
    except AirflowConfigError:  # an invalid configuration: the page names the error
        return True


def require_view(who) -> None:
    """``who``: a user or an ``Actor`` (a command acting as the system may do everything)."""
    require_store_wide(who, _("The orphans report"), tuple(permissions.STORES))


def require_delete(who) -> None:
    require_view(who)
    for store in permissions.STORES:
        permissions.require(who, store, "delete")


def _chunks(items: Iterable, size: int = CHUNK) -> Iterator[list]:
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _task_lookup(parsed: list[Parsed]) -> Q | None:
    """Rows of the parsed task keys: one condition per task instance, by Airflow's lookup index
    ``(dag_id, run_id, task_id, map_index)`` and the key."""
    groups: dict[tuple, set[str]] = {}
    for p in parsed:
        s = p.scope
        region_id = s.get("region_id", SENTINEL_REGION_ID)
        groups.setdefault((s["dag_id"], s["run_id"], s["task_id"], s["map_index"], region_id), set()).update(p.keys)
    condition = None
    for (dag_id, run_id, task_id, map_index, region_id), keys in groups.items():
        one = Q(
            dag_id=dag_id,
            run_id=run_id,
            task_id=task_id,
            map_index=map_index,
            region_id=region_id,
            key__in=sorted(keys),
        )
        condition = one if condition is None else condition | one
    return condition


def _asset_lookup(parsed: list[Parsed]) -> Q | None:
    """Rows of the parsed asset keys: the assets named by name, URI or id, and the keys (the primary key
    ``(asset_id, key)``)."""
    identifiers = {p.scope["identifier"] for p in parsed}
    if not identifiers:
        return None
    keys = sorted({k for p in parsed for k in p.keys})
    ids = [int(i) for i in identifiers if i.isascii() and i.isdigit() and len(i) < 10]
    assets = Q(asset__name__in=sorted(identifiers)) | Q(asset__uri__in=sorted(identifiers))
    if ids:
        assets |= Q(asset_id__in=ids)
    return assets & Q(key__in=keys)


def _ref_texts(refs: Iterable[str]) -> list[str]:
    """The stored value texts of these references: as Airflow's API server writes them (``json.dumps``,
    ASCII-escaped) and unescaped."""
    texts = set()
    for ref in refs:
        marker = {JsonValueMixin.REF_KEY: ref}
        texts.add(json.dumps(marker))
        texts.add(json.dumps(marker, ensure_ascii=False))
    return sorted(texts)


def _referenced_by_key(objs: list[Obj]) -> set[str]:
    """The references among ``objs`` that the rows of their own keys hold (one query per store)."""
    wanted = {o.ref for o in objs}
    found = set()
    lookups = (
        (TaskStateStore, _task_lookup([o.parsed for o in objs if o.parsed and o.parsed.store == permissions.TASK])),
        (AssetStateStore, _asset_lookup([o.parsed for o in objs if o.parsed and o.parsed.store == permissions.ASSET])),
    )
    for model, condition in lookups:
        if condition is None:
            continue
        rows = model.objects.filter(condition, value__startswith=JsonValueMixin.REF_PREFIX)
        for value in rows.values_list("value", flat=True).iterator(chunk_size=CHUNK):
            ref = worker_ref_of(value)
            if ref in wanted:
                found.add(ref)
    return found


def _referenced_by_text(objs: list[Obj]) -> set[str]:
    """The references among ``objs`` that any row holds, by the exact stored text: a scan of both tables
    (the value column has no index); used for objects outside the layout and for the final check before a
    delete."""
    if not objs:
        return set()
    texts = _ref_texts(o.ref for o in objs)
    found = set()
    for model in (TaskStateStore, AssetStateStore):
        for value in model.objects.filter(value__in=texts).values_list("value", flat=True):
            ref = worker_ref_of(value)
            if ref is not None:
                found.add(ref)
    return found


def _unreferenced(objs: list[Obj], risky: set[str] | None) -> list[Obj]:
    """The objects of ``objs`` no row references. ``risky``: the references of rows whose reference is not
    their own key's path (None: too many were found to keep, every candidate is checked by text)."""
    referenced = _referenced_by_key(objs)
    candidates = [o for o in objs if o.ref not in referenced]
    if risky is not None:
        by_text = [o for o in candidates if o.parsed is None and o.ref not in risky]
        candidates = [o for o in candidates if o.ref not in risky]
    else:
        by_text = candidates
    referenced |= _referenced_by_text(by_text)
    return [o for o in candidates if o.ref not in referenced]


def still_unreferenced(objs: list[Obj]) -> list[Obj]:
    """The check right before a delete: fresh, by key and by text."""
    referenced = _referenced_by_key(objs) | _referenced_by_text(objs)
    return [o for o in objs if o.ref not in referenced]


def _written_since(fs, obj: Obj, cutoff: datetime) -> bool:
    """Whether the object was written again after ``cutoff`` (a worker's write in flight: its row comes next)."""
    written = modified(fs.info(obj.path))
    return written is None or written > cutoff


def delete_orphans(fs, candidates: list[Obj], deletion: Deletion) -> None:
    """Delete the objects of ``candidates`` that no row references now and that were not written again since
    ``deletion.older_than`` ago (both checked again here: a row, or a worker's new write of the same key, may
    have come since they were listed). Failures are recorded in ``deletion``, never raised."""
    orphans = still_unreferenced(candidates)
    deletion.kept += len(candidates) - len(orphans)
    cutoff = timezone.now() - deletion.older_than
    for obj in orphans:
        try:
            if _written_since(fs, obj, cutoff):
                deletion.kept += 1
                continue
            fs.rm_file(obj.path)
        except FileNotFoundError:
            deletion.missing += 1
            continue
        except Exception as exc:  # the storage's own errors: permissions, network, …
            deletion.fail(obj.ref, f"{type(exc).__name__}: {exc}")
            continue
        deletion.deleted += 1
        if len(deletion.deleted_refs) < DELETED_NAMED:
            deletion.deleted_refs.append(obj.ref)


# Rows -------------------------------------------------------------------------------------------------
def _task_rows() -> Iterator[tuple[str, SimpleNamespace]]:
    fields = ("id", "dag_id", "run_id", "task_id", "map_index", "region_id", "key", "value")
    rows = TaskStateStore.objects.filter(value__startswith=JsonValueMixin.REF_PREFIX)
    for chunk in keyset_chunks(rows, ("id",), CHUNK, fields=fields):
        for row in chunk:
            yield permissions.TASK, SimpleNamespace(**row._asdict())


def _asset_rows() -> Iterator[tuple[str, SimpleNamespace]]:
    fields = ("asset_id", "key", "value", "asset__name", "asset__uri")
    rows = AssetStateStore.objects.filter(value__startswith=JsonValueMixin.REF_PREFIX)
    for chunk in keyset_chunks(rows, ("asset_id", "key"), CHUNK, fields=fields):
        for row in chunk:
            yield permissions.ASSET, SimpleNamespace(**row._asdict())


def _row_scope(store: str, row) -> dict:
    if store == permissions.TASK:
        location = {"dag_id": row.dag_id, "run_id": row.run_id, "task_id": row.task_id, "map_index": row.map_index}
        if row.region_id.int:
            location["region_id"] = str(row.region_id)
        return location
    return {"asset_id": row.asset_id, "asset_name": row.asset__name, "asset_uri": row.asset__uri}


def _reference(store: str, row, storage: objects.Storage | None) -> objects.Reference | None:
    if store == permissions.TASK:
        return objects.reference_of_task_row(row, storage)
    return objects.reference_of_asset_row(row, storage, name=row.asset__name or "", uri=row.asset__uri or "")


def _exists(fs, storage: objects.Storage, ref: str) -> bool:
    try:
        fs.info(storage.path(ref))
    except FileNotFoundError:
        return False
    return True


def _scan_rows(storage: objects.Storage | None, fs, report: OrphanReport) -> set[str] | None:
    """Pass 1: count the rows holding references; dangling, outside and risky ones. Returns the references
    of rows that do not hold their own key's path (None past ``RISKY_IN_MEMORY`` of them)."""
    risky: set[str] | None = set()
    check_errors = 0
    for store, rows in ((permissions.TASK, _task_rows()), (permissions.ASSET, _asset_rows())):
        for _text, row in rows:
            reference = _reference(store, row, storage)
            if reference is None:
                continue
            report.rows_with_refs += 1
            if reference.kind == objects.INLINE:
                report.inline_refs += 1
                continue

            def item(reference=reference, row=row, store=store) -> dict:
                return {"ref": reference.ref, "store": store, "key": row.key, "scope": _row_scope(store, row)}

            if reference.kind in (objects.OUTSIDE, objects.UNCONFIGURED):
                report.outside.add(lambda i=item, r=reference: {**i(), "reason": r.explanation})
                continue
            if reference.ref not in reference.expected:
                if risky is not None:
                    risky.add(reference.ref)
                    if len(risky) > RISKY_IN_MEMORY:
                        risky = None
                if reference.risk:
                    report.risks.add(
                        lambda i=item, r=reference: {**i(), "expected": list(r.expected), "reason": r.risk}
                    )
            if fs is None:
                continue
            if check_errors >= CHECK_ERRORS_MAX:
                report.unchecked += 1
                continue
            try:
                exists = _exists(fs, storage, reference.ref)
            except Exception as exc:  # the storage's own errors: the reference is not counted
                check_errors += 1
                report.unchecked += 1
                failure = {"ref": reference.ref, "error": f"{type(exc).__name__}: {exc}"}
                report.error(_("Checking %(ref)s failed: %(error)s") % failure)
                continue
            if not exists:
                report.dangling.add(item)
    return risky


# The report -------------------------------------------------------------------------------------------
def _configured() -> tuple[objects.Storage | None, str]:
    try:
        storage = objects.Storage.from_config()
        if storage is not None:
            storage.suffix  # noqa: B018 (an unsupported compression is a configuration error)
    except (AirflowConfigError, objects.StorageError) as exc:
        return None, str(exc)
    return storage, ""


def report(
    *,
    sample: int = DEFAULT_SAMPLE,
    older_than: timedelta | None = None,
    delete: bool = False,
    actor: Actor,
    now: datetime | None = None,
) -> OrphanReport:
    """The orphans report (module docstring). ``older_than``: orphans last modified less than this long ago
    are counted as young (and never deleted); ``delete`` deletes the others (``older_than`` required),
    audited as ``actor`` (who asked for the report, through which face). ``Forbidden`` when ``actor`` may not;
    ``objects.StorageError`` when deleting is asked of a dashboard without a usable storage configuration."""
    started = time.monotonic()
    if delete:
        require_delete(actor)
        if older_than is None:
            raise ValueError("Deleting orphans needs older_than.")
    else:
        require_view(actor)
    now = now or timezone.now()
    result = OrphanReport(sample=max(0, min(sample, SAMPLE_MAX)), older_than=older_than)
    storage, result.config_error = _configured()
    result.storage = storage
    if delete and storage is None:
        raise objects.StorageError(
            result.config_error or _("No [common.io] state_store_objectstorage_path is configured: nothing to delete.")
        )
    fs = None
    if storage is not None:
        try:
            fs = storage.filesystem()
        except objects.StorageError as exc:
            result.error(str(exc))
    risky = _scan_rows(storage, fs, result)
    if fs is not None:
        _scan_objects(fs, storage, result, risky, now=now, delete=delete, actor=actor)
    result.seconds = time.monotonic() - started
    return result


def _scan_objects(fs, storage, result: OrphanReport, risky, *, now, delete: bool, actor) -> None:
    """Pass 2: the objects; with ``delete``, the old orphans go, chunk by chunk, in one audited run."""
    cutoff = now - result.older_than if result.older_than is not None else None
    deletion = Deletion(result.older_than) if delete else None
    event = None
    if deletion is not None:
        result.deletion = deletion
        event = audit.orphans_started(
            actor, {"base": storage.base, "older_than_seconds": result.older_than.total_seconds()}
        )
        deletion.event_id = event.pk
    error = None
    try:
        for chunk in _chunks(walk(fs, storage, result)):
            for obj in chunk:
                result.objects += 1
                result.object_bytes += obj.size
            old = []
            for obj in _unreferenced(chunk, risky):
                result.orphans.add(obj.describe, obj.size)
                if cutoff is not None:
                    if obj.modified is None or obj.modified > cutoff:
                        result.young += 1
                    else:
                        old.append(obj)
            if deletion is not None and old:
                delete_orphans(fs, old, deletion)
    except DatabaseError as exc:  # the faces answer for the database (the API and the pages: 503)
        error = exc
        raise
    except Exception as exc:  # the storage's own errors while listing: the report says so
        error = exc
        result.error(_("Listing failed: %(error)s") % {"error": f"{type(exc).__name__}: {exc}"})
    except BaseException as exc:  # interrupted: the audit event says so
        error = exc
        raise
    finally:
        if deletion is not None:
            deletion.young = result.young
            details = {name: value for name, value in deletion.as_dict().items() if name != "audit_event_id"}
            audit.orphans_finished(event, deletion=details, deleted_refs=deletion.deleted_refs, error=error)
