"""Search across task and asset keys: one parser of the parameters (``SearchQuery.from_params``) for the
Search page and the search API, and the queries.

A key search without a DAG filter is one no index can serve, whatever its match (Airflow owns the schema: there
is no trigram index, no index leads with ``key``, and the lookup index leads with ``dag_id``); a substring
(``contains``) search never can. Such a search is a **budgeted scan**:
the table is read by ranges of its primary key (task keys newest id first, asset keys by ascending asset id) in
chunks sized to take a fraction of the budget, until the page is full, the table is read, or the deadline
(``SEARCH_TIME_BUDGET_SECONDS``, 2 s by default, checked between chunks) has passed. A search stopped by the
deadline returns what it found so far with ``cut_short`` and a ``next_cursor`` that resumes where the scan
stopped, so that continuing finds every match exactly once. Searches with a DAG filter, and those without a
key (by status, run or task), are one query.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Max, Min, Q, QuerySet

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore

from .errors import Invalid
from .pagination import MAX_PAGE_SIZE, Page, decode_cursor_for, encode_cursor, paginate
from .scopes import Scope
from .selectors import STATUSES, scoped_asset_keys, scoped_task_keys, status_filter, with_previews

MATCHES = ("contains", "prefix", "exact")

# A budgeted scan's chunks, in ids (task keys) or asset ids (asset keys): the first chunk's size, and the bounds
# of the next ones, sized from the rate measured so far to take 1/CHUNK_SHARE of the budget (at most
# CHUNK_SECONDS) and never more than the time left. Tests make them tiny to cut a search on a few rows.
FIRST_CHUNK = 50_000
MIN_CHUNK = 1_000
MAX_CHUNK = 4_000_000
CHUNK_SHARE = 10
CHUNK_SECONDS = 0.2


@dataclass(frozen=True)
class SearchQuery:
    key: str = ""
    match: str = "contains"
    dag_id: str = ""
    run_id: str = ""
    task_id: str = ""
    status: str = ""
    asset: str = ""

    @classmethod
    def from_params(cls, params) -> SearchQuery:
        """From a query string, the same for the Search page and the API. An unknown ``match`` or ``status``
        is ``Invalid`` naming the parameter (code ``enum``, ``params["choices"]``); empty means the default.
        Ids and the asset text are stripped of surrounding spaces; the key is taken as typed."""
        names = ("key", "match", "dag_id", "run_id", "task_id", "status", "asset")
        values = {name: params.get(name) or "" for name in names}
        errors = {}
        for name, choices in (("match", MATCHES), ("status", tuple(STATUSES))):
            if values[name] and values[name] not in choices:
                typed = repr(values[name]).replace("%", "%%")  # the message is %-formatted with params
                errors[name] = [
                    Invalid(
                        f"Unknown {name} {typed}: use one of {', '.join(choices)}.",
                        code="enum",
                        params={"choices": choices},
                    )
                ]
        if errors:
            raise Invalid(errors)
        return cls(
            key=values["key"],
            match=values["match"] or "contains",
            dag_id=values["dag_id"].strip(),
            run_id=values["run_id"].strip(),
            task_id=values["task_id"].strip(),
            status=values["status"],
            asset=values["asset"].strip(),
        )

    def key_filter(self) -> Q:
        if not self.key:
            return Q()
        lookup = {"contains": "icontains", "prefix": "startswith", "exact": "exact"}[self.match]
        return Q(**{f"key__{lookup}": self.key})

    @property
    def task_only(self) -> bool:
        return bool(self.dag_id or self.run_id or self.task_id or self.status)

    @property
    def budgeted(self) -> bool:
        """A key search of task keys without a DAG filter: no index serves it (any match)."""
        return bool(self.key) and not self.dag_id


@dataclass
class SearchPage(Page):
    """A page of search results. ``cut_short``: the time budget ran out before the page was full; ``items``
    are the matches found so far and ``next_cursor`` resumes the scan. ``scanned_to``: how far the scan got,
    the lowest task key id read (task keys) or the highest asset id read (asset keys)."""

    cut_short: bool = False
    scanned_to: int | None = None
    budget: float = 0.0


def time_budget() -> float:
    """``SEARCH_TIME_BUDGET_SECONDS``: how long a key search no index serves may scan."""
    return max(0.0, float(settings.SEARCH_TIME_BUDGET_SECONDS))


def search_deadline() -> float:
    """A deadline (``time.monotonic()``) for the searches of one request, shared by both stores."""
    return time.monotonic() + time_budget()


def _next_chunk(chunk: int, span: int, took: float, left: float) -> int:
    """The next chunk's size from the rate of the last one: a share of the budget, within the time left."""
    rate = span / max(took, 1e-4)
    aim = min(time_budget() / CHUNK_SHARE, CHUNK_SECONDS, 0.75 * left)  # a margin for a slower next chunk
    return max(MIN_CHUNK, min(MAX_CHUNK, 4 * chunk, int(rate * aim)))


def _bounds(model, column: str) -> tuple[int | None, int | None]:
    """The lowest and highest ``column`` (the first column of the primary key): one index entry each (SQLite
    reads a whole table for ``min`` and ``max`` in one statement)."""
    low = model.objects.aggregate(low=Min(column))["low"]
    return low, model.objects.aggregate(high=Max(column))["high"]


def _scan_task_keys(rows, cursor: str | None, size: int, deadline: float) -> SearchPage:
    """``rows`` (filtered) newest first, by descending ranges of ids, until the page is full, the table is
    read, or ``deadline``. The cursor is an id: the scan goes on below it (a page's last id, or where a scan
    stopped)."""
    size = max(1, min(size, MAX_PAGE_SIZE))
    values = decode_cursor_for(cursor, TaskStateStore, ["-id"])
    used = cursor if values is not None else None
    floor, high = _bounds(TaskStateStore, "id")
    if high is None:
        return SearchPage([], None, used, budget=time_budget())
    top = high + 1 if values is None else min(values[0], high + 1)
    found: list = []
    chunk, hi = FIRST_CHUNK, top
    while hi > floor:
        lo = max(hi - chunk, floor)
        started = time.monotonic()
        found += rows.filter(id__gte=lo, id__lt=hi).order_by("-id")[: size + 1 - len(found)]
        took = time.monotonic() - started
        if len(found) > size:
            return SearchPage(found[:size], encode_cursor([found[size - 1].id]), used, budget=time_budget())
        chunk, hi = _next_chunk(chunk, hi - lo, took, deadline - time.monotonic()), lo
        if hi > floor and time.monotonic() >= deadline:
            return SearchPage(found, encode_cursor([hi]), used, cut_short=True, scanned_to=hi, budget=time_budget())
    return SearchPage(found, None, used, budget=time_budget())


def _scan_asset_keys(rows, cursor: str | None, size: int, deadline: float) -> SearchPage:
    """``rows`` (filtered) by asset id and key, by ascending ranges of asset ids, until the page is full, the
    table is read, or ``deadline``. The cursor is a page's last (asset id, key), or the asset id where a scan
    stopped (it goes on from that asset)."""
    size = max(1, min(size, MAX_PAGE_SIZE))
    after = decode_cursor_for(cursor, AssetStateStore, ["asset_id", "key"])
    resume = None if after is not None else decode_cursor_for(cursor, AssetStateStore, ["asset_id"])
    used = cursor if after is not None or resume is not None else None
    lo, ceiling = _bounds(AssetStateStore, "asset_id")
    if ceiling is None:
        return SearchPage([], None, used, budget=time_budget())
    if after is not None:
        rows = rows.filter(Q(asset_id__gt=after[0]) | Q(asset_id=after[0], key__gt=after[1]))
        lo = max(lo, after[0])
    elif resume is not None:
        lo = max(lo, resume[0])
    found: list = []
    chunk = FIRST_CHUNK
    while lo <= ceiling:
        hi = lo + chunk
        started = time.monotonic()
        found += rows.filter(asset_id__gte=lo, asset_id__lt=hi).order_by("asset_id", "key")[: size + 1 - len(found)]
        took = time.monotonic() - started
        if len(found) > size:
            last = found[size - 1]
            return SearchPage(found[:size], encode_cursor([last.asset_id, last.key]), used, budget=time_budget())
        chunk, lo = _next_chunk(chunk, hi - lo, took, deadline - time.monotonic()), hi
        if lo <= ceiling and time.monotonic() >= deadline:
            return SearchPage(found, encode_cursor([lo]), used, cut_short=True, scanned_to=lo - 1, budget=time_budget())
    return SearchPage(found, None, used, budget=time_budget())


def _unbudgeted(page: Page) -> SearchPage:
    return SearchPage(page.items, page.next_cursor, page.cursor)


def task_key_rows(query: SearchQuery, now: datetime, *, scope: Scope) -> QuerySet:
    """The task keys ``query`` matches in ``scope``, unordered: what the search pages through and an export
    downloads; none (``.none()``) for a DAG out of scope."""
    if query.dag_id and not scope.allows_dag(query.dag_id):
        return TaskStateStore.objects.none()
    rows = TaskStateStore.objects.filter(query.key_filter())
    if not query.dag_id:
        rows = scoped_task_keys(scope, rows)
    for name in ("dag_id", "run_id", "task_id"):
        if getattr(query, name):
            rows = rows.filter(**{name: getattr(query, name)})
    if query.status in STATUSES:
        rows = rows.filter(status_filter(query.status, now))
    return rows


def asset_key_rows(query: SearchQuery, *, scope: Scope) -> QuerySet:
    """The asset keys ``query`` matches in ``scope``, unordered; none for a search with task filters."""
    if query.task_only:
        return AssetStateStore.objects.none()
    rows = scoped_asset_keys(scope, AssetStateStore.objects.filter(query.key_filter()))
    if query.asset:
        rows = rows.filter(Q(asset__name__icontains=query.asset) | Q(asset__uri__icontains=query.asset))
    return rows


def search_task_keys(
    query: SearchQuery,
    now: datetime,
    cursor: str | None = None,
    size: int = 50,
    *,
    scope: Scope,
    deadline: float | None = None,
) -> SearchPage:
    """Task keys, newest first. A key search without a DAG filter is a budgeted scan (``SearchPage``),
    stopped at ``deadline`` (default: ``search_deadline()``)."""
    rows = task_key_rows(query, now, scope=scope)
    if rows.query.is_empty():
        return SearchPage([], None, cursor)
    if query.budgeted:
        return _scan_task_keys(with_previews(rows), cursor, size, search_deadline() if deadline is None else deadline)
    return _unbudgeted(paginate(with_previews(rows), ["-id"], cursor, size))


def search_asset_keys(
    query: SearchQuery, cursor: str | None = None, size: int = 50, *, scope: Scope, deadline: float | None = None
) -> SearchPage:
    """Asset keys by asset and key. A key search is a budgeted scan (``SearchPage``: the primary key leads
    with the asset id), stopped at
    ``deadline`` (default: ``search_deadline()``)."""
    rows = asset_key_rows(query, scope=scope)
    if rows.query.is_empty():
        return SearchPage([], None, None)
    rows = with_previews(rows.select_related("asset")).defer("asset__extra")
    if query.key:
        return _scan_asset_keys(rows, cursor, size, search_deadline() if deadline is None else deadline)
    return _unbudgeted(paginate(rows, ["asset_id", "key"], cursor, size))
