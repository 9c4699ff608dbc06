"""Model instances from one plain SQL statement, for the few reads every API request makes (its token and
the token's owner, a key or a page of keys).

Building a simple query costs Django's ORM several times what the database spends answering it (the
profile in docs/benchmarks/api-load.md: on a loaded two-core machine 0.8 ms of Python for a token lookup
that SQLite answers in 0.05 ms). These reads name their columns once (``columns``) and turn the row back
into what the ORM would have returned (``instance``): each value through the converters the ORM applies
(SQLite's times are text, its booleans integers), then ``Model.from_db``, so that a saved instance, its
``_state`` and its fields are as a queryset's.
"""

from __future__ import annotations

from django.db import models


def columns(model: type[models.Model], connection, table: str) -> str:
    """``model``'s concrete columns in field order, each qualified by ``table`` (the statement's alias of
    its table), for a SELECT whose rows ``instance`` reads."""
    known = _COLUMNS.get((model, connection.vendor, table))
    if known is None:
        quote = connection.ops.quote_name
        known = ", ".join(f"{quote(table)}.{quote(f.column)}" for f in model._meta.concrete_fields)
        _COLUMNS[(model, connection.vendor, table)] = known
    return known


_COLUMNS: dict[tuple, str] = {}


def instance(model: type[models.Model], connection, values) -> models.Model:
    """The instance a queryset of ``model`` on ``connection`` would give for ``values``: the columns of
    ``model._meta.concrete_fields``, in that order (``columns``, or ``airflow.models.select_list``)."""
    converted = []
    for value, converters in zip(values, _converters(model, connection), strict=True):
        for convert, expression in converters:
            value = convert(value, expression, connection)
        converted.append(value)
    return model.from_db(connection.alias, None, converted)


_CONVERTERS: dict[tuple, list[list]] = {}


def _converters(model, connection) -> list[list]:
    """Per concrete field, the ORM's converters of its values on this database vendor, with the expression each
    is called with: the backend's, then the field's own (``SQLCompiler.get_converters``'s order)."""
    known = _CONVERTERS.get((model, connection.vendor))
    if known is None:
        known = []
        for field in model._meta.concrete_fields:
            col = field.get_col(model._meta.db_table)
            found = [*connection.ops.get_db_converters(col), *field.get_db_converters(connection)]
            known.append([(convert, col) for convert in found])
        _CONVERTERS[(model, connection.vendor)] = known
    return known
