"""Keyset (cursor) pagination: no OFFSET, no ``COUNT(*)``; one extra row tells whether there is more.
A page is read after a cursor (``paginate``: the next page) or before one (``paginate_before``: the previous).

A cursor is the ordering values of the last row shown, as URL-safe base64 JSON, so a page link can
be shared. An invalid cursor is the first page (it is user input): one that does not decode, or whose
values do not fit the ordering fields (a string for an integer, an integer beyond 64 bits, a list, null,
a naive date, text with NUL), since the database could not compare them.

Reading every row, not a page (``keyset_chunks``: downloads, writes of many keys, the orphan scan), is
the same keyset walk a chunk at a time: each chunk one short query after the last row read.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import connections, models, router
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from statestore_admin.airflow.models import column_of
from statestore_admin.airflow.versions import schema_of

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
MIN_INT, MAX_INT = -(2**63), 2**63 - 1  # what any integer column can be compared with


@dataclass
class Page:
    """``next_cursor``: the rows after this page (None at the end); ``prev_cursor``: the rows before it, for
    ``paginate_before`` (None on the first page); ``cursor``: the one this page was read from (None: the first)."""

    items: list
    next_cursor: str | None
    cursor: str | None
    prev_cursor: str | None = None

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None


def encode_cursor(values: list[Any]) -> str:
    plain = [{"dt": v.isoformat()} if isinstance(v, datetime) else v for v in values]
    return base64.urlsafe_b64encode(json.dumps(plain).encode()).decode().rstrip("=")


def _restore(value: Any) -> Any:
    """A cursor value as the database can take it: a JSON scalar, or ``{"dt": …}`` for an aware datetime."""
    if isinstance(value, dict):
        parsed = parse_datetime(value.get("dt") or "") if isinstance(value.get("dt"), str) else None
        if parsed is None or timezone.is_naive(parsed):
            raise ValueError("bad datetime in cursor")
        return parsed
    if isinstance(value, bool) or value is None or isinstance(value, (list, float)):
        raise ValueError("not a value of an ordering column")
    if isinstance(value, int) and not MIN_INT <= value <= MAX_INT:
        raise ValueError("integer out of range")
    if isinstance(value, str) and "\x00" in value:
        raise ValueError("NUL in a cursor")
    return value


def _fits(field: models.Field | None, value: Any) -> bool:
    """Whether ``value`` has the type of the ordering column ``field`` (None: not a model field; any goes)."""
    if field is None:
        return True
    if isinstance(field, models.ForeignKey):
        field = field.target_field
    if isinstance(field, models.DateTimeField):
        return isinstance(value, datetime)
    if isinstance(field, (models.IntegerField, models.AutoField)):
        return isinstance(value, int)
    if isinstance(field, (models.CharField, models.TextField)):
        return isinstance(value, str)
    return not isinstance(value, datetime)


def _field(model, name: str) -> models.Field | None:
    try:
        return model._meta.get_field(name)
    except FieldDoesNotExist:
        return None


def decode_cursor(cursor: str | None, count: int) -> list[Any] | None:
    if not cursor:
        return None
    try:
        values = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, RecursionError, binascii.Error, UnicodeDecodeError):
        return None
    if not isinstance(values, list) or len(values) != count:
        return None
    try:
        return [_restore(v) for v in values]
    except ValueError:
        return None


def decode_cursor_for(cursor: str | None, model, ordering: list[str]) -> list[Any] | None:
    """The cursor's values when each fits its ordering field of ``model``; else None (the first page)."""
    values = decode_cursor(cursor, len(ordering))
    if values is None:
        return None
    fields = [_field(model, name.lstrip("-")) for name in ordering]
    return values if all(_fits(f, v) for f, v in zip(fields, values, strict=True)) else None


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
    values = decode_cursor_for(cursor, queryset.model, ordering)
    rows = queryset.order_by(*ordering)
    if values is not None:
        rows = rows.filter(_after(ordering, values))
    items = list(rows[: size + 1])
    read = value_of or (lambda row, field: row[field] if isinstance(row, dict) else getattr(row, field))
    next_cursor = None
    if len(items) > size:
        items = items[:size]
        next_cursor = encode_cursor([read(items[-1], f.lstrip("-")) for f in ordering])
    prev_cursor = encode_cursor([read(items[0], f.lstrip("-")) for f in ordering]) if values and items else None
    return Page(items, next_cursor, cursor if values is not None else None, prev_cursor)


def paginate_before(queryset: QuerySet, ordering: list[str], cursor: str | None, size: int = DEFAULT_PAGE_SIZE) -> Page:
    """The page before ``cursor`` (a page's ``prev_cursor``: its first row), shown in ``ordering``: read
    backwards. A page that reaches the start is the first page (``cursor`` and ``prev_cursor`` None); an invalid
    cursor is the first page."""
    size = max(1, min(size, MAX_PAGE_SIZE))
    values = decode_cursor_for(cursor, queryset.model, ordering)
    if values is None:
        return paginate(queryset, ordering, None, size)
    backwards = [field[1:] if field.startswith("-") else f"-{field}" for field in ordering]
    rows = list(queryset.order_by(*backwards).filter(_after(backwards, values))[: size + 1])
    if not rows:  # nothing before it any more: the first page
        return paginate(queryset, ordering, None, size)
    more = len(rows) > size
    items = rows[:size][::-1]

    def encoded(row) -> str:
        return encode_cursor([getattr(row, field.lstrip("-")) for field in ordering])

    # Without more rows before, this is the first page (shorter than a page if rows came or went meanwhile).
    return Page(items, encoded(items[-1]), cursor if more else None, encoded(items[0]) if more else None)


# Reading every row in keyset chunks ----------------------------------------------------------------------------
def _row_after(rows: QuerySet, names: list[str], values: list, descending: bool):
    """Rows after ``values`` in the order of ``names``: one comparison, of a row value for several columns
    (which an index on those columns serves as a range, where an OR of column comparisons is a filter)."""
    if len(names) == 1:
        return Q(**{f"{names[0]}__{'lt' if descending else 'gt'}": values[0]})
    model = rows.model
    connection = connections[rows.db or router.db_for_read(model)]
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    columns = ", ".join(f"{table}.{quote(_column(model, name, connection))}" for name in names)
    marks = ", ".join(["%s"] * len(values))
    return RawSQL(f"({columns}) {'<' if descending else '>'} ({marks})", values, output_field=BooleanField())


def _column(model, name: str, connection) -> str:
    field = model._meta.get_field(name)
    if field.model._meta.app_label != "airflow":
        return field.column
    return column_of(field, schema_of(connection)) or field.column


def keyset_chunks(
    rows: QuerySet, ordering: tuple[str, ...], size: int, fields: tuple[str, ...] | None = None, lock: bool = False
) -> Iterator[list]:
    """``rows`` in ``ordering`` (unique; all ascending, or all descending with ``-``), ``size`` rows a query,
    each query starting after the last row read: memory holds one chunk, no cursor outlives a query. With
    ``fields`` (the ordering's among them), rows are named tuples of those, not model instances (a third
    of the time). With ``lock``, each chunk's rows are locked as it is read (``SELECT … FOR UPDATE``: call
    inside the transaction that writes them). The one keyset iterator of the domain: downloads, writes of
    many keys, and the orphan scan read through it."""
    descending = ordering[0].startswith("-")
    names = [name.lstrip("-") for name in ordering]
    attnames = [rows.model._meta.get_field(name).attname for name in names]
    ordered = (rows.select_for_update() if lock else rows).order_by(*ordering)
    last = None
    while True:
        page = ordered if last is None else ordered.filter(_row_after(rows, names, last, descending))
        chunk = list((page.values_list(*fields, named=True) if fields else page)[:size])
        if chunk:
            yield chunk
        if len(chunk) < size:
            return
        last = [getattr(chunk[-1], name) for name in attnames]
