"""Counting rows without counting a large table: how a figure was obtained, the capped count, a table's
size and the planner's estimate of a query's rows."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import connections
from django.db.models import IntegerField, QuerySet
from django.db.models.expressions import RawSQL

from statestore_admin.airflow.router import airflow_alias

ESTIMATE_ABOVE = 100_000  # rows; above this the overview shows PostgreSQL's estimate

# How a figure was obtained. Exact counts are cheap on small tables only: above ESTIMATE_ABOVE rows a
# table's figures are PostgreSQL's planner estimates (pg_class.reltuples, EXPLAIN's row estimate of each
# status: planning only, no row read), a count stopped at a cap (a LIMIT-ed subquery) or the latest
# statistics snapshot's exact figures (``state_store_stats``), shown with its age.
EXACT, ESTIMATED, CAPPED, SNAPSHOT = "exact", "estimated", "capped", "snapshot"
COUNT_CAP = 10_000  # a count on a large table stops here ("more than 10,000"): ~2 ms of index entries


def _short(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1_000:.0f}k"
    return f"{n:,}"


@dataclass(frozen=True)
class Figure:
    """One count: ``how`` it was obtained (``EXACT``; ``ESTIMATED``: the planner's; ``CAPPED``: the count
    stopped at ``value``, there are more; ``SNAPSHOT``: exact as of the latest snapshot). ``value`` None:
    hidden from this user (a store they may not view), not counted."""

    value: int | None
    how: str = EXACT

    @property
    def estimated(self) -> bool | None:
        return None if self.value is None else self.how in (ESTIMATED, CAPPED)

    @property
    def capped(self) -> bool | None:
        return None if self.value is None else self.how == CAPPED

    @property
    def text(self) -> str:
        if self.value is None:
            return ""
        if self.how == ESTIMATED:
            return f"≈ {_short(self.value)}"
        if self.how == CAPPED:
            return f"more than {self.value:,}"
        return f"{self.value:,}"


def count_up_to(rows: QuerySet, limit: int) -> int:
    """``SELECT count(*) FROM (SELECT 1 … LIMIT limit)``: at most ``limit`` rows are read. The inner query
    selects a constant, not a column, so that PostgreSQL can answer it from an index alone (an index-only
    scan of the index its condition uses, e.g. ``expires_at``'s for the expired rows)."""
    # RawSQL, not Value(1): Django drops a constant Value from a sliced count's subquery ("SELECT FROM").
    return rows.annotate(counted=RawSQL("1", (), output_field=IntegerField())).values("counted")[:limit].count()


def capped_count(rows: QuerySet, cap: int) -> Figure:
    """Exact up to ``cap``, else "more than ``cap``" (``count_up_to(rows, cap + 1)``)."""
    n = count_up_to(rows, cap + 1)
    return Figure(n) if n <= cap else Figure(cap, CAPPED)


def row_count(model) -> Figure:
    """A state table's size: exact below ``ESTIMATE_ABOVE`` rows (a count of at most that many index
    entries); above, PostgreSQL's estimate (``pg_class.reltuples``, as of the table's last ANALYZE), or on
    another database (or a never-analyzed table) "more than ``ESTIMATE_ABOVE``"."""
    connection = connections[airflow_alias()]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass", [model._meta.db_table])
            row = cursor.fetchone()
        if row and row[0] >= ESTIMATE_ABOVE:
            return Figure(int(row[0]), ESTIMATED)
    return capped_count(model.objects.all(), ESTIMATE_ABOVE)


def estimate(rows: QuerySet) -> Figure:
    """The count of ``rows`` on a large table: PostgreSQL's row estimate of their query (``EXPLAIN``, planning
    only), checked by a capped count when the planner expects few (then exact if there are at most
    ``COUNT_CAP``); on another database the capped count alone."""
    if connections[rows.db].vendor == "postgresql":
        plan = json.loads(rows.values("pk").explain(format="json"))
        estimate = int(plan[0]["Plan"]["Plan Rows"])
        if estimate > COUNT_CAP:
            return Figure(estimate, ESTIMATED)
        counted = capped_count(rows, COUNT_CAP)
        return counted if counted.how == EXACT else Figure(max(estimate, COUNT_CAP), ESTIMATED)
    return capped_count(rows, COUNT_CAP)
