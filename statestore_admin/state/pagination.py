"""Keyset (cursor) pagination: no OFFSET, no ``COUNT(*)``; one extra row tells whether there is more.

A cursor is the ordering values of the last row shown, as URL-safe base64 JSON, so a page link can
be shared. An invalid cursor is the first page (it is user input).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200


@dataclass
class Page:
    items: list
    next_cursor: str | None
    cursor: str | None

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None


def encode_cursor(values: list[Any]) -> str:
    plain = [{"dt": v.isoformat()} if isinstance(v, datetime) else v for v in values]
    return base64.urlsafe_b64encode(json.dumps(plain).encode()).decode().rstrip("=")


def _restore(value: Any) -> Any:
    if isinstance(value, dict):
        parsed = parse_datetime(value.get("dt") or "") if isinstance(value.get("dt"), str) else None
        if parsed is None:
            raise ValueError("bad datetime in cursor")
        return parsed
    return value


def decode_cursor(cursor: str | None, count: int) -> list[Any] | None:
    if not cursor:
        return None
    try:
        values = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    if not isinstance(values, list) or len(values) != count:
        return None
    try:
        return [_restore(v) for v in values]
    except ValueError:
        return None


def _after(fields: list[str], values: list[Any]) -> Q:
    """Rows strictly after ``values`` in the order of ``fields`` (``-name`` = descending)."""
    condition = Q()
    for index, field in enumerate(fields):
        step = Q(**{f"{field.lstrip('-')}__{'lt' if field.startswith('-') else 'gt'}": values[index]})
        for previous, previous_value in zip(fields[:index], values[:index], strict=True):
            step &= Q(**{previous.lstrip("-"): previous_value})
        condition |= step
    return condition


def paginate(
    queryset: QuerySet, ordering: list[str], cursor: str | None, size: int = DEFAULT_PAGE_SIZE, value_of=None
) -> Page:
    """The page after ``cursor``. ``ordering`` must be unique (end with a key). ``value_of(row, field)``
    reads ordering values from rows that are not model instances."""
    size = max(1, min(size, MAX_PAGE_SIZE))
    values = decode_cursor(cursor, len(ordering))
    rows = queryset.order_by(*ordering)
    if values is not None:
        rows = rows.filter(_after(ordering, values))
    items = list(rows[: size + 1])
    read = value_of or (lambda row, field: row[field] if isinstance(row, dict) else getattr(row, field))
    next_cursor = None
    if len(items) > size:
        items = items[:size]
        next_cursor = encode_cursor([read(items[-1], f.lstrip("-")) for f in ordering])
    return Page(items, next_cursor, cursor if values is not None else None)
