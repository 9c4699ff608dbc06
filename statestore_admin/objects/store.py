"""Worker-side objects: the values a worker-side backend keeps outside Airflow's database.

With ``[workers] state_store_backend`` set, a worker stores ``{"__airflow_state_ref__": "<ref>"}`` in the row.
Airflow's own backend, common.io's ``StateStoreObjectStorageBackend``, makes ``<ref>`` either

- the path of an object under ``[common.io] state_store_objectstorage_path`` (the base):
  ``<base>/<dag_id>/<run_id>/<task_id>/<map_index>/<key>[suffix]`` for a task key (on Airflow 3.4, a key in a
  dynamic region has ``region=<region_id>/`` after the run: ``<base>/<dag_id>/<run_id>/region=<uuid>/<task_id>/
  <region_index>/<key>[suffix]``, as common.io 1.11 writes it with task SDK 1.4) and
  ``<base>/assets/<asset name, else uri>/<key>[suffix]`` for an asset key, each segment URL-quoted, the suffix
  that of ``state_store_objectstorage_compression`` (``.gz`` for gzip); or
- when the value's JSON is shorter than ``state_store_objectstorage_threshold`` bytes, the JSON text itself
  (the value is inline, wrapped like a reference).

The paths are deterministic in (scope, key): a later write of the same key overwrites the object. This module
classifies references, reads objects for display (opt-in, ``WORKER_BACKEND_READ``), deletes them after their
rows (the rule "row first, commit, then the object" is applied by the services) and never opens a
reference outside the base path. See docs/worker-backends.md.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache, cached_property
from urllib.parse import quote, urlsplit
from uuid import UUID

import fsspec
import fsspec.utils
from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from statestore_admin.airflow.config import OBJECT_STORAGE_BACKEND, AirflowConfigError, airflow_config
from statestore_admin.airflow.models import JsonValueMixin, worker_ref_of
from statestore_admin.core import formatting
from statestore_admin.objects import sizes

PROVIDER_BACKEND = OBJECT_STORAGE_BACKEND
REF_MARKER = json.dumps(JsonValueMixin.REF_KEY)  # in the text of every stored reference, whatever its spacing

# What a reference is.
INLINE = "inline"  # the value's JSON text itself (under the threshold): no object
OBJECT = "object"  # an object under the configured base path
OUTSIDE = "outside"  # a URL outside the configured base path: never opened
UNCONFIGURED = "unconfigured"  # a URL, but the dashboard's Airflow configuration names no base path

FAILED_NAMED = 20  # failed object deletes named in an audit event (all are counted)

RISK_REASON = gettext_lazy(
    "This reference does not follow the deterministic layout (%(expected)s). Airflow deletes the row first and the "
    "object second; when the second step fails (or GC deletes only the row), a deterministic path is recovered by "
    "the next write of the same key, which overwrites it. This object never is: once its row is gone it stays "
    "orphaned until someone deletes it (state_store_orphans --delete)."
)


class StorageError(Exception):
    """The object storage is misconfigured, or an object could not be read."""


def _segment(text: str) -> str | None:
    """A path segment as the backend writes it; None for what it refuses (empty, ``.``, ``..``)."""
    if not text or text in (".", ".."):
        return None
    return quote(text, safe="")


@dataclass(frozen=True)
class Storage:
    """The configured object storage: its base as references print it (``scheme://[conn_id@]host/path``, no
    trailing slash), its compression and threshold."""

    base: str
    compression: str = ""
    threshold: int = 0

    @classmethod
    def from_config(cls, config=None) -> Storage | None:
        config = config or airflow_config()
        path = config.objectstorage_path
        if not path:
            return None
        return cls(
            base=_normalised_base(path),
            compression=config.objectstorage_compression,
            threshold=config.objectstorage_threshold,
        )

    @cached_property
    def _split(self):
        return urlsplit(self.base)

    @property
    def scheme(self) -> str:
        return self._split.scheme

    @property
    def conn_id(self) -> str | None:
        """Airflow's connection id in ``scheme://conn_id@bucket/…``: the dashboard maps it to its own credentials
        (``WORKER_BACKEND_STORAGE_OPTIONS``), it has no Airflow connections."""
        return self._split.username

    @cached_property
    def suffix(self) -> str:
        if not self.compression:
            return ""
        for suffix, name in fsspec.utils.compressions.items():
            if name == self.compression:
                return f".{suffix}"
        raise StorageError(_("Compression %(compression)r is not supported.") % {"compression": self.compression})

    # Deterministic references -------------------------------------------------------------------------
    def task_ref(
        self, dag_id: str, run_id: str, task_id: str, map_index: int, key: str, region_id: UUID | None = None
    ) -> str | None:
        region = [f"region={region_id}"] if region_id is not None and region_id.int else []
        parts = [_segment(dag_id), _segment(run_id), *region, _segment(task_id), str(map_index), _segment(key)]
        if None in parts:
            return None
        return "/".join([self.base, *parts]) + self.suffix

    def asset_ref(self, identifier: str, key: str) -> str | None:
        parts = [_segment(identifier), _segment(key)]
        if None in parts:
            return None
        return "/".join([self.base, "assets", *parts]) + self.suffix

    def contains(self, ref: str) -> bool:
        """Whether ``ref`` names an object under the base path (never ``..`` out of it)."""
        if not ref.startswith(self.base + "/"):
            return False
        rest = ref[len(self.base) + 1 :]
        segments = rest.split("/")
        return bool(rest) and all(s not in ("", ".", "..") for s in segments) and "\\" not in rest

    # Access ---------------------------------------------------------------------------------------------
    def filesystem(self):
        options = settings.WORKER_BACKEND_STORAGE_OPTIONS
        chosen = options.get(self.conn_id or "", options.get(self.scheme, options.get("*", {})))
        try:
            return fsspec.filesystem(self.scheme, **chosen)
        except (ImportError, ValueError) as exc:
            message = _(
                "Cannot open %(scheme)s:// storage: %(error)s. Install the matching fsspec package (README, "
                "Worker-side backends)."
            )
            raise StorageError(message % {"scheme": self.scheme, "error": exc}) from exc

    def path(self, ref: str) -> str:
        """The filesystem's path of a reference under the base (its conn_id left out)."""
        split = urlsplit(ref)
        return self.filesystem()._strip_protocol(f"{split.scheme}://{split.hostname or ''}{split.path}")

    def ref_of(self, path: str) -> str:
        """The reference of an object listed by the filesystem (the inverse of ``path``)."""
        base_path = self.path(self.base + "/x")[: -len("/x")]
        return self.base + path[len(base_path) :]


def _normalised_base(path: str) -> str:
    text = path.strip().rstrip("/")
    if "://" not in text:  # a plain local path, as ObjectStoragePath reads it
        text = "file://" + text
    return text


def storage() -> Storage | None:
    """The object storage the dashboard's Airflow configuration names, or None (also when those options are
    invalid: the overview names the error, and references are then reported as unreachable)."""
    try:
        return Storage.from_config()
    except AirflowConfigError:
        return None


def backend_is_object_storage(config=None) -> bool:
    config = config or airflow_config()
    return config.worker_backend == PROVIDER_BACKEND


# References -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Reference:
    """A stored reference: its text and what it is; ``expected`` the deterministic reference(s) of its key
    (empty when unknown), ``risk`` why it would stay orphaned when it does not follow the layout."""

    ref: str
    kind: str
    expected: tuple[str, ...] = ()

    @property
    def is_object(self) -> bool:
        return self.kind == OBJECT

    @property
    def risk(self) -> str | None:
        if self.kind != OBJECT or not self.expected or self.ref in self.expected:
            return None
        return RISK_REASON % {"expected": " or ".join(self.expected)}

    @property
    def explanation(self) -> str:
        return {
            INLINE: _("The value is short enough to stay in the row: the reference holds its JSON text, no object."),
            OBJECT: _("The value is an object in the worker-side storage; the row holds its path."),
            OUTSIDE: _(
                "This reference is outside the configured state_store_objectstorage_path: the dashboard never opens "
                "or deletes it."
            ),
            UNCONFIGURED: _(
                "The dashboard's Airflow configuration has no [common.io] state_store_objectstorage_path: it cannot "
                "read or delete this object."
            ),
        }[self.kind]


def classify(ref: str, store: Storage | None, expected: Iterable[str | None] = ()) -> Reference:
    """What ``ref`` is, as common.io's backend decides it: a URL under the base is an object, anything without
    a URL scheme is inline JSON text."""
    wanted = tuple(e for e in expected if e)
    if not urlsplit(ref).scheme:
        return Reference(ref, INLINE)
    if store is None:
        return Reference(ref, UNCONFIGURED)
    return Reference(ref, OBJECT if store.contains(ref) else OUTSIDE, wanted)


def _expected(build) -> list[str | None]:
    """The deterministic reference(s) ``build`` makes, none when the storage's compression is unsupported
    (the workers cannot write then either; the system check says so)."""
    try:
        return build()
    except StorageError:
        return []


def reference_of_task_row(row, store: Storage | None) -> Reference | None:
    ref = worker_ref_of(row.value)
    if not isinstance(ref, str):
        return None
    if store is None:
        return classify(ref, store)
    expected = _expected(
        lambda: [store.task_ref(row.dag_id, row.run_id, row.task_id, row.map_index, row.key, row.region_id)]
    )
    return classify(ref, store, expected)


def reference_of_asset_row(row, store: Storage | None, *, name: str = "", uri: str = "") -> Reference | None:
    ref = worker_ref_of(row.value)
    if not isinstance(ref, str):
        return None
    if store is None:
        return classify(ref, store)
    return classify(ref, store, _expected(lambda: [store.asset_ref(i, row.key) for i in (name, uri) if i]))


# Reading --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Resolved:
    """The value behind a reference: ``text`` its JSON text, or ``error`` why it is not shown; ``object_size``
    the object's bytes in the storage when it was read (also when too large or not JSON), else None."""

    reference: Reference
    text: str | None = None
    error: str | None = None
    object_size: int | None = None


def read_enabled() -> bool:
    return settings.WORKER_BACKEND_READ


def resolve(reference: Reference, store: Storage | None) -> Resolved:
    """The real value behind ``reference``: inline text as it is, an object read (decompressed) when
    ``WORKER_BACKEND_READ`` is on, at most ``WORKER_BACKEND_READ_MAX_BYTES``. Never opens anything outside
    the base path."""
    if reference.kind == INLINE:
        try:
            json.loads(reference.ref)
        except ValueError:
            return Resolved(reference, error=_("The inline reference is not JSON text."))
        return Resolved(reference, text=reference.ref)
    if reference.kind != OBJECT:
        return Resolved(reference, error=reference.explanation)
    if not read_enabled():
        return Resolved(reference, error=_("Reading worker-side objects is off (WORKER_BACKEND_READ=1 turns it on)."))
    limit, seconds = settings.WORKER_BACKEND_READ_MAX_BYTES, settings.WORKER_BACKEND_READ_TIMEOUT
    try:
        # In a thread of its own with a deadline: storage that stops answering must not hang the page.
        data, size = _readers().submit(_read_sized, store, reference.ref, limit + 1).result(timeout=seconds or None)
    except concurrent.futures.TimeoutError:
        return Resolved(
            reference, error=_("The storage did not answer within %(seconds)s s.") % {"seconds": f"{seconds:g}"}
        )
    except FileNotFoundError:
        sizes.forget([reference.ref])
        return Resolved(reference, error=_("The object is missing: this is a dangling reference."))
    except Exception as exc:  # the storage's own errors (permissions, network, corrupt compression)
        return Resolved(
            reference, error=_("The object could not be read: %(error)s") % {"error": f"{type(exc).__name__}: {exc}"}
        )
    if len(data) > limit:
        return Resolved(
            reference,
            error=_("The value is larger than %(limit)s bytes: too large to show here.")
            % {"limit": formatting.count(limit)},
            object_size=size,
        )
    try:
        text = data.decode("utf-8")
        json.loads(text)
    except ValueError:
        return Resolved(reference, error=_("The object does not hold UTF-8 JSON text."), object_size=size)
    return Resolved(reference, text=text, object_size=size)


@cache
def _readers() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="object-read")


def _read_sized(store: Storage, ref: str, limit: int) -> tuple[bytes, int]:
    """``read_object``, and the object's size in the storage (its stored bytes: compressed when it is)."""
    data = read_object(store, ref, limit)
    return data, store.filesystem().size(store.path(ref))


def write_object(store: Storage, ref: str, data: bytes, place: sizes.Place) -> str:
    """Write ``data`` (the value's JSON bytes) at ``ref`` as common.io's backend does (parents created,
    compressed by the configured compression) and record its size for ``place``'s key. Returns ``ref``. The
    dashboard writes objects only for the demo's data; workers write the others."""
    if not store.contains(ref):
        raise StorageError(_("The reference is outside the configured base path."))
    fs, path = store.filesystem(), store.path(ref)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(path, "wb", compression=store.compression or None) as f:
        f.write(data)
    sizes.record(ref, fs.size(path), place)
    return ref


def read_object(store: Storage, ref: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the object's content, decompressed by its suffix. On local storage a
    symbolic link out of the base path is refused like a reference outside it."""
    if not store.contains(ref):
        raise StorageError(_("The reference is outside the configured base path."))
    path = store.path(ref)
    if store.scheme in ("file", "local"):
        base = os.path.realpath(store.path(store.base + "/x")[: -len("/x")])
        if not os.path.realpath(path).startswith(base + os.sep):
            raise StorageError(_("The object is a link out of the configured base path."))
    with store.filesystem().open(path, "rb", compression="infer") as f:
        return f.read(limit)


# Deleting -------------------------------------------------------------------------------------------
@dataclass
class ObjectDeletes:
    """What deleting the objects of deleted rows did. ``failed`` names the first ``FAILED_NAMED`` failures,
    ``failed_count`` counts them all; a failed object is an orphan."""

    deleted: int = 0
    missing: int = 0
    failed_count: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)

    def fail(self, ref: str, error: str) -> None:
        self.failed_count += 1
        if len(self.failed) < FAILED_NAMED:
            self.failed.append((ref, error))

    @property
    def attempted(self) -> int:
        return self.deleted + self.missing + self.failed_count

    def details(self) -> dict:
        return {
            "deleted": self.deleted,
            "missing": self.missing,
            "failed": self.failed_count,
            "failures": [{"ref": ref, "error": error} for ref, error in self.failed],
        }

    def summary(self) -> str:
        """The counts in one sentence (GC's page and command)."""
        return _(
            "Worker-side objects: %(deleted)s deleted, %(missing)s already missing, %(failed)s could not be deleted."
        ) % {
            "deleted": formatting.count(self.deleted),
            "missing": formatting.count(self.missing),
            "failed": formatting.count(self.failed_count),
        }

    def describe(self) -> str:
        if not self.failed_count:
            return ""
        ref, error = self.failed[0]
        first = _("%(ref)s: %(error)s") % {"ref": ref, "error": error}
        if self.failed_count > 1:
            more = formatting.count(self.failed_count - 1)
            first = _("%(first)s and %(count)s more") % {"first": first, "count": more}
        sentence = ngettext(
            "%(count)s worker-side object could not be deleted and is now orphaned (%(first)s); the rows stay "
            "deleted. See the Orphans page.",
            "%(count)s worker-side objects could not be deleted and are now orphaned (%(first)s); the rows stay "
            "deleted. See the Orphans page.",
            self.failed_count,
        ) % {"count": formatting.count(self.failed_count), "first": first}
        return " " + sentence


def refs_to_delete(values: Iterable[str | None], store: Storage | None) -> list[Reference]:
    """The references among deleted rows' values whose objects must go: objects, and URLs the dashboard
    cannot reach (they fail, and are reported); inline ones have no object."""
    found = []
    for value in values:
        ref = worker_ref_of(value)
        if isinstance(ref, str):
            reference = classify(ref, store)
            if reference.kind != INLINE:
                found.append(reference)
    return found


def delete_objects(references: Iterable[Reference], store: Storage | None, into: ObjectDeletes | None = None):
    """Delete the objects of rows already deleted and committed. A failure is recorded, never raised: the
    row stays deleted and the object is an orphan (a later write of the same key overwrites it)."""
    result = into or ObjectDeletes()
    fs, gone = None, []
    for reference in references:
        if reference.kind != OBJECT:
            result.fail(reference.ref, reference.explanation)
            continue
        try:
            fs = fs or store.filesystem()
            fs.rm_file(store.path(reference.ref))
            result.deleted += 1
            gone.append(reference.ref)
        except FileNotFoundError:
            result.missing += 1
            gone.append(reference.ref)
        except Exception as exc:  # the storage's own errors: permissions, network, …
            result.fail(reference.ref, f"{type(exc).__name__}: {exc}")
    sizes.forget(gone)  # their sizes are no longer known (a later write of the key is a new object)
    return result


# What the pages and the API show -----------------------------------------------------------------------
def resolve_task_row(row) -> Resolved | None:
    """The value behind a task key's reference (None when its value is no reference)."""
    store = storage()
    reference = reference_of_task_row(row, store)
    return None if reference is None else _resolve_and_record(reference, store, sizes.Place.of_task_row(row))


def resolve_asset_row(row, asset) -> Resolved | None:
    """The value behind an asset key's reference (None when its value is no reference); ``asset`` gives the
    name and URI its deterministic paths use."""
    store = storage()
    reference = reference_of_asset_row(row, store, name=asset.name, uri=asset.uri)
    return None if reference is None else _resolve_and_record(reference, store, sizes.Place.of_asset_row(row))


def _resolve_and_record(reference: Reference, store: Storage | None, place: sizes.Place) -> Resolved:
    """``resolve``, the object's size recorded when it was read (what the key costs: ``objects.sizes``)."""
    resolved = resolve(reference, store)
    if resolved.object_size is not None:
        sizes.record(reference.ref, resolved.object_size, place)
    return resolved


def missing_objects(values: Iterable[str], limit: int = FAILED_NAMED) -> list[str]:
    """The object references among ``values`` (stored value texts) whose objects do not exist, the first
    ``limit``: a restored row whose object was deleted after it is a dangling reference. Unreachable
    storage checks nothing."""
    store = storage()
    if store is None:
        return []
    missing = []
    try:
        fs = store.filesystem()
        for value in values:
            ref = worker_ref_of(value)
            if isinstance(ref, str) and classify(ref, store).is_object and not fs.exists(store.path(ref)):
                missing.append(ref)
                if len(missing) >= limit:
                    break
    except Exception:  # the storage's own errors: the restore itself is done, this is a courtesy check
        return missing
    return missing
