"""Keys as a JSON document: what a confirmation offers to download before a delete, what every list
exports, and what a restore accepts as an upload (``services.restore_document``).

    {"format": "statestore-admin/keys", "version": 1, "exported_at": "...",
     "keys": [{"store": "task", "dag_id", "run_id", "task_id", "map_index", "key", "value",
               "expires_at", "updated_at"},
              {"store": "asset", "asset_id", "asset_name", "asset_uri", "key", "value", "updated_at"}]}

``value`` is the decoded JSON value. When re-encoding it would not give back the stored text exactly
(text not written by ``json.dumps``), ``value_json`` carries the exact text too, and a restore uses it.
Documents are written as a stream (``iter_document``): memory stays bounded whatever the number of keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import UTC

from django.db.models import QuerySet
from django.utils import timezone

from . import permissions
from .errors import Invalid
from .values import clean_key, decode_json_text, encode_value, parse_datetime_aware

FORMAT, VERSION = "statestore-admin/keys", 1
ID_LENGTH = 250  # dag_id, run_id and task_id columns
MAX_INT = 2**31 - 1  # integer columns (map_index, asset id)
STREAM_CHUNK = 500


def _iso(value):
    return value.astimezone(UTC).isoformat() if value else None


def _value_fields(text: str) -> dict:
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes: the exact text
        return {"value": None, "value_json": text}
    fields = {"value": decoded}
    if json.dumps(decoded) != text:
        fields["value_json"] = text
    return fields


def task_entry(row) -> dict:
    return {
        "store": permissions.TASK,
        "dag_id": row.dag_id,
        "run_id": row.run_id,
        "task_id": row.task_id,
        "map_index": row.map_index,
        "key": row.key,
        **_value_fields(row.value),
        "expires_at": _iso(row.expires_at),
        "updated_at": _iso(row.updated_at),
    }


def asset_entry(row) -> dict:
    return {
        "store": permissions.ASSET,
        "asset_id": row.asset_id,
        "asset_name": row.asset.name,
        "asset_uri": row.asset.uri,
        "key": row.key,
        **_value_fields(row.value),
        "updated_at": _iso(row.updated_at),
    }


def iter_document(task_rows: QuerySet | None = None, asset_rows: QuerySet | None = None) -> Iterator[str]:
    """The document as text pieces, rows read ``STREAM_CHUNK`` at a time."""
    head = {"format": FORMAT, "version": VERSION, "exported_at": _iso(timezone.now())}
    yield json.dumps(head)[:-1] + ', "keys": ['
    first = True
    sources: list[tuple[Iterable, callable]] = []
    if task_rows is not None:
        sources.append((task_rows.order_by("id").iterator(chunk_size=STREAM_CHUNK), task_entry))
    if asset_rows is not None:
        ordered = asset_rows.select_related("asset").defer("asset__extra").order_by("asset_id", "key")
        sources.append((ordered.iterator(chunk_size=STREAM_CHUNK), asset_entry))
    for rows, entry in sources:
        for row in rows:
            yield ("\n" if first else ",\n") + json.dumps(entry(row))
            first = False
    yield "\n]}\n"


def parse_document(document) -> list:
    """The restore targets of a document; ``Invalid`` naming the first bad entry, before anything changes."""
    from .services import Target

    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise Invalid({"file": f'Not a statestore-admin export: expected {{"format": "{FORMAT}", ...}}.'})
    if document.get("version") != VERSION:
        raise Invalid({"file": f"Unsupported export version {document.get('version')!r}; this version reads 1."})
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise Invalid({"file": '"keys" must be a list.'})
    return [_target(Target, index, entry) for index, entry in enumerate(entries)]


def _target(Target, index: int, entry):
    where = f"keys[{index}]"
    if not isinstance(entry, dict):
        raise Invalid({"file": f"{where} is not an object."})
    store = entry.get("store")
    if store not in (permissions.TASK, permissions.ASSET):
        raise Invalid({"file": f'{where}: "store" must be "task" or "asset".'})
    try:
        key = clean_key(entry.get("key"))
        if "value_json" in entry:
            text = entry["value_json"]
            if not isinstance(text, str):
                raise Invalid({"value": '"value_json" must be a string.'})
            encode_value(decode_json_text(text))  # the same limits as any write
        else:
            text = encode_value(entry.get("value"))
        if store == permissions.TASK:
            for name in ("dag_id", "run_id", "task_id"):
                given = entry.get(name)
                if not isinstance(given, str) or not given or len(given) > ID_LENGTH or "\x00" in given:
                    raise Invalid({name: f'"{name}" must be a string of 1 to {ID_LENGTH} characters, without NUL.'})
            map_index = entry.get("map_index", -1)
            if not isinstance(map_index, int) or isinstance(map_index, bool) or not -1 <= map_index <= MAX_INT:
                raise Invalid({"map_index": f'"map_index" must be an integer from -1 to {MAX_INT}.'})
            raw_expiry = entry.get("expires_at")
            expires_at = parse_datetime_aware(raw_expiry, "expires_at") if raw_expiry is not None else None
            return Target(
                store=store,
                key=key,
                state=(text, expires_at),
                dag_id=entry["dag_id"],
                run_id=entry["run_id"],
                task_id=entry["task_id"],
                map_index=map_index,
                ident=str(index),
            )
        asset_id = entry.get("asset_id")
        if not isinstance(asset_id, int) or isinstance(asset_id, bool) or not 1 <= asset_id <= MAX_INT:
            raise Invalid({"asset_id": '"asset_id" must be an integer.'})
        return Target(store=store, key=key, state=(text, None), asset_id=asset_id, ident=str(index))
    except (Invalid, ValueError) as exc:
        message = "; ".join(m for ms in exc.message_dict.values() for m in ms) if isinstance(exc, Invalid) else str(exc)
        raise Invalid({"file": f"{where}: {message}"}) from None
