"""The objects under the worker-side base, as the orphans report lists them (``walk``): each with its size,
modification time and the key its path names (``parse``), when the path follows the provider's layout
(``<base>/<dag_id>/<run_id>/[region=<uuid>/]<task_id>/<map_index>/<key>[suffix]`` or
``<base>/assets/<asset name, uri or id>/<key>[suffix]``, segments URL-unquoted).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import unquote
from uuid import UUID

import fsspec.utils
from django.utils.translation import gettext as _

from statestore_admin.access import permissions
from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.core import formatting
from statestore_admin.objects import store as objects
from statestore_admin.objects.report import OrphanReport

KNOWN_SUFFIXES = tuple(f".{suffix}" for suffix in fsspec.utils.compressions)
_MAP_INDEX = re.compile(r"-?[0-9]+\Z")
REGION_SEGMENT = "region="  # Airflow 3.4: <base>/<dag>/<run>/region=<uuid>/<task>/<index>/<key>


@dataclass(frozen=True)
class Parsed:
    """The key an object's path names: ``store`` task or asset, ``scope`` (task: dag_id, run_id, task_id,
    map_index; asset: identifier, the asset's name, URI or id as the worker named it) and the candidate
    ``keys`` (the configured suffix stripped first; the name as it is last)."""

    store: str
    scope: dict
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Obj:
    ref: str
    path: str
    size: int
    modified: datetime | None
    parsed: Parsed | None

    def describe(self) -> dict:
        parsed = self.parsed
        return {
            "ref": self.ref,
            "size": self.size,
            "modified": formatting.iso(self.modified),
            "store": parsed.store if parsed else None,
            "scope": dict(parsed.scope) if parsed else None,
            "key": parsed.keys[0] if parsed else None,
        }


def _candidate_keys(name: str, suffix: str) -> tuple[str, ...]:
    """The keys an object called ``name`` may hold: without the configured suffix, without another known
    compression suffix (an object written before the compression changed), and as it is."""
    names = []
    for ending in (suffix, *KNOWN_SUFFIXES) if suffix else KNOWN_SUFFIXES:
        if ending and name.endswith(ending) and len(name) > len(ending):
            names.append(name[: -len(ending)])
    names.append(name)
    keys = [unquote(n) for n in names]
    return tuple(k for k in dict.fromkeys(keys) if k not in ("", ".", ".."))


def parse(store: objects.Storage, ref: str) -> Parsed | None:
    """The key an object's reference belongs to, when it follows the provider's layout; else None."""
    if not store.contains(ref):
        return None
    segments = ref[len(store.base) + 1 :].split("/")
    region_id = SENTINEL_REGION_ID
    if len(segments) == 6 and segments[2].startswith(REGION_SEGMENT):  # Airflow 3.4: a key in a region
        try:
            region_id = UUID(segments[2][len(REGION_SEGMENT) :])
        except ValueError:
            return None
        del segments[2]
        if not region_id.int:
            return None  # the provider never writes the sentinel region
    if len(segments) == 5:
        dag_id, run_id, task_id, map_index, name = segments
        if not _MAP_INDEX.match(map_index) or str(int(map_index)) != map_index:
            return None
        keys = _candidate_keys(name, store.suffix)
        scope = {
            "dag_id": unquote(dag_id),
            "run_id": unquote(run_id),
            "task_id": unquote(task_id),
            "map_index": int(map_index),
        }
        if region_id.int:
            scope["region_id"] = str(region_id)
        return Parsed(permissions.TASK, scope, keys) if keys else None
    if len(segments) == 3 and segments[0] == "assets":
        keys = _candidate_keys(segments[2], store.suffix)
        return Parsed(permissions.ASSET, {"identifier": unquote(segments[1])}, keys) if keys else None
    return None


def modified(info: dict) -> datetime | None:
    """When an object was last written, from a listing's entry (local ``mtime``, S3 ``LastModified``,
    GCS ``updated``, Azure ``last_modified``); None when the listing does not say."""
    for name in ("mtime", "LastModified", "last_modified", "updated", "mtime_ns"):
        value = info.get(name)
        if value is None:
            continue
        try:
            if isinstance(value, datetime):
                return value if value.tzinfo else value.replace(tzinfo=UTC)
            if isinstance(value, (int, float)):
                return datetime.fromtimestamp(value / (1e9 if name == "mtime_ns" else 1), tz=UTC)
            if isinstance(value, str):
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
                return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        except (ValueError, OverflowError, OSError):
            continue
    return None


def walk(fs, store: objects.Storage, report: OrphanReport) -> Iterator[Obj]:
    """Every object under the base, one directory's listing at a time."""
    base_path = store.path(store.base + "/x")[: -len("/x")]

    def on_error(exc: BaseException) -> None:
        if not isinstance(exc, FileNotFoundError):  # a directory deleted meanwhile, or no object yet
            report.error(_("Listing failed: %(error)s") % {"error": f"{type(exc).__name__}: {exc}"})

    for _root, _dirs, files in fs.walk(base_path, detail=True, on_error=on_error):
        for name, info in sorted(files.items()):
            path = info.get("name") or f"{_root.rstrip('/')}/{name}"
            if info.get("type", "file") != "file" or not path.startswith(base_path + "/"):
                continue
            ref = store.base + path[len(base_path) :]
            yield Obj(ref, path, int(info.get("size") or 0), modified(info), parse(store, ref))
