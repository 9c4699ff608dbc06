"""Counting rows without counting a large table: how a figure was obtained, the capped count, a table's
size and the planner's estimate of a query's rows.

On PostgreSQL an estimate says which statistics it comes from (``table_statistics``: ``pg_class.reltuples``
and ``pg_stat_user_tables``' last ANALYZE and rows changed since; ``Figure.basis`` beside the figure), and
when those are stale (never analysed, or much changed since), when an estimate can be off by an order of
magnitude, the figure is first counted exactly within a time budget (``count_within``: a
``statement_timeout`` for that one statement) and said to be counted."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.db.models import IntegerField, QuerySet
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from statestore_admin.airflow.availability import query_timeout
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.core import formatting

ESTIMATE_ABOVE = 100_000  # rows; above this the overview shows PostgreSQL's estimate

# How a figure was obtained. Exact counts are cheap on small tables only: above ESTIMATE_ABOVE rows a
# table's figures are PostgreSQL's planner estimates (pg_class.reltuples, EXPLAIN's row estimate of each
# status: planning only, no row read), a count stopped at a cap (a LIMIT-ed subquery) or the latest
# statistics snapshot's exact figures (``state_store_stats``), shown with its age.
EXACT, ESTIMATED, CAPPED, SNAPSHOT = "exact", "estimated", "capped", "snapshot"
COUNT_CAP = 10_000  # a count on a large table stops here ("more than 10,000"): ~2 ms of index entries


# An estimate is from stale statistics when the rows changed since the last ANALYZE are more than this share
# of the rows it counted (autovacuum's own default threshold is 10 %, plus 50 rows).
STALE_SHARE = 0.2


@dataclass(frozen=True)
class Statistics:
    """The planner statistics an estimate comes from: when the table was last analysed (by ANALYZE or
    autovacuum; None: never), the rows it then counted (``reltuples``; -1: never) and the rows inserted,
    updated or deleted since (``n_mod_since_analyze``)."""

    analysed_at: datetime | None
    rows: int
    modified_since: int

    @property
    def never(self) -> bool:
        return self.rows < 0  # PostgreSQL's reltuples before the first ANALYZE (or VACUUM)

    @property
    def stale(self) -> bool:
        return self.never or self.modified_since > STALE_SHARE * max(self.rows, 1)

    def basis(self, now: datetime | None = None) -> str:
        """Where an estimate comes from, for people: "from statistics last refreshed 3 days ago", "… never
        refreshed (the table was never analysed): it may be far off"."""
        if self.never:
            return _("from statistics never refreshed (the table was never analysed): it may be far off")
        age = None
        if self.analysed_at is not None:
            age = formatting.age(max(((now or timezone.now()) - self.analysed_at).total_seconds(), 0))
        if not self.stale and age:
            return _("from statistics last refreshed %(age)s ago") % {"age": age}
        if not self.stale:
            return _("from the planner's statistics")
        words = {"age": age, "count": formatting.count(self.modified_since)}
        if age:
            return (
                ngettext(
                    "from statistics last refreshed %(age)s ago, %(count)s row changed since: it may be far off",
                    "from statistics last refreshed %(age)s ago, %(count)s rows changed since: it may be far off",
                    self.modified_since,
                )
                % words
            )
        return (
            ngettext(
                "from the planner's statistics, %(count)s row changed since: it may be far off",
                "from the planner's statistics, %(count)s rows changed since: it may be far off",
                self.modified_since,
            )
            % words
        )


def table_statistics(table: str, using: str | None = None) -> Statistics | None:
    """The planner statistics of an Airflow ``table`` (PostgreSQL); None elsewhere or when unreadable."""
    connection = connections[using or airflow_alias()]
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT GREATEST(s.last_analyze, s.last_autoanalyze), c.reltuples::bigint, s.n_mod_since_analyze "
            "FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = %s::regclass",
            [table],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return Statistics(row[0], int(row[1]), int(row[2] or 0))


def count_within(rows: QuerySet, seconds: float | None = None) -> int | None:
    """The exact count of ``rows`` if PostgreSQL finishes it within ``seconds`` (``COUNT_BUDGET_SECONDS``),
    else None (the statement is cancelled by its ``statement_timeout`` and nothing else is affected: it runs
    in a savepoint of its own). None on other databases, which have no such budget, and for a budget of 0
    (not tried)."""
    alias = rows.db
    budget = settings.COUNT_BUDGET_SECONDS if seconds is None else seconds
    if connections[alias].vendor != "postgresql" or budget <= 0:
        return None
    try:
        with transaction.atomic(using=alias), query_timeout(budget, using=alias):
            return rows.order_by().count()
    except DatabaseError:
        return None


def _short(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1_000:.0f}k"
    return formatting.count(n)


@dataclass(frozen=True)
class Figure:
    """One count: ``how`` it was obtained (``EXACT``; ``ESTIMATED``: the planner's; ``CAPPED``: the count
    stopped at ``value``, there are more; ``SNAPSHOT``: exact as of the latest snapshot). ``value`` None:
    hidden from this user (a store they may not view), not counted."""

    value: int | None
    how: str = EXACT
    statistics: Statistics | None = None  # ESTIMATED: the statistics the estimate comes from
    counted_in_budget: bool = False  # EXACT on a large table: counted within the time budget

    @property
    def basis(self) -> str:
        """How the figure was obtained, when that is not plain: "counted exactly", or where an estimate
        comes from (``Statistics.basis``)."""
        if self.value is None:
            return ""
        if self.how == EXACT and self.counted_in_budget:
            return _("counted exactly")
        if self.how == ESTIMATED and self.statistics is not None:
            return self.statistics.basis()
        return ""

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
            return _("≈ %(count)s") % {"count": _short(self.value)}
        if self.how == CAPPED:
            return _("more than %(count)s") % {"count": formatting.count(self.value)}
        return formatting.count(self.value)


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
            return Figure(int(row[0]), ESTIMATED, table_statistics(model._meta.db_table))
    return capped_count(model.objects.all(), ESTIMATE_ABOVE)


def estimate(rows: QuerySet) -> Figure:
    """The count of ``rows`` on a large table: PostgreSQL's row estimate of their query (``EXPLAIN``, planning
    only), labelled with the table's statistics; when those are stale (``Statistics.stale``) an exact count
    is tried first, within the time budget (``count_within``). An estimate of few rows is checked by a capped
    count (then exact if there are at most ``COUNT_CAP``). On another database the capped count alone."""
    if connections[rows.db].vendor == "postgresql":
        statistics = table_statistics(rows.model._meta.db_table, rows.db)
        if statistics is None or statistics.stale:
            exact = count_within(rows)
            if exact is not None:
                return Figure(exact, EXACT, counted_in_budget=True)
        plan = json.loads(rows.values("pk").explain(format="json"))
        estimate = int(plan[0]["Plan"]["Plan Rows"])
        if estimate > COUNT_CAP:
            return Figure(estimate, ESTIMATED, statistics)
        counted = capped_count(rows, COUNT_CAP)
        return counted if counted.how == EXACT else Figure(max(estimate, COUNT_CAP), ESTIMATED, statistics)
    return capped_count(rows, COUNT_CAP)
