"""Search across task and asset keys: one parser of the parameters (``SearchQuery.from_params``) for the
Search page and the search API, and the queries.

The filters: ``key`` (contains, prefix or exact), ``value`` (contains, in the value's JSON text), ``dag_id``
(contained in the id, ignoring case, as on the DAG list: ``selectors.dags_containing``; ``dag_match=prefix``
for the ids starting with it, ``dag_match=exact`` for one DAG, as the DAG list's links ask), ``run_id`` and
``task_id`` (exact), ``status``, ``asset`` (in its name or URI), and on Airflow 3.4 ``iteration`` (a loop
iteration, from 0 as Airflow numbers them: keys in that iteration of any loop, at any depth, or of the loop
``loop`` names; ``selectors.in_iteration_q``).
DAG, run, task and status filters select task keys only (asset keys have none of them), and the asset filter
asset keys only (task keys have no asset): a search with a filter of one store finds nothing in the other.

A key or value search without a DAG filter is one no index can serve, whatever its match (Airflow owns the
schema: there is no trigram index, no index leads with ``key``, and the lookup index leads with ``dag_id``); a
substring (``contains``) search never can. Such a search is a **budgeted scan**:
the table is read by ranges of its primary key (task keys newest id first, asset keys by ascending asset id) in
chunks sized to take a fraction of the budget, until the page is full, the table is read, or the deadline
(``SEARCH_TIME_BUDGET_SECONDS``, 2 s by default, checked between chunks) has passed. A search stopped by the
deadline returns what it found so far with ``cut_short`` and a cursor that resumes where the scan
stopped, so that continuing finds every match exactly once. Searches with a DAG filter, and those without a
key or value (by status, run or task), are one query.

Pages go both ways: ``next_cursor`` continues after a page, ``prev_cursor`` (passed as ``before``) reads the
page before it, backwards, with the same budget; a search cut short going backwards resumes backwards.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict, Unpack

from django.conf import settings
from django.db.models import Max, Min, Q, QuerySet
from django.utils.translation import gettext as _

from statestore_admin.access.scopes import Scope
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.core.counting import COUNT_CAP, Figure, capped_count
from statestore_admin.core.errors import Invalid
from statestore_admin.core.pagination import (
    MAX_PAGE_SIZE,
    Page,
    decode_cursor_for,
    encode_cursor,
    paginate,
    paginate_before,
)
from statestore_admin.state.selectors import (
    STATUSES,
    dag_prefix_q,
    dags_containing,
    in_iteration_q,
    scoped_asset_keys,
    scoped_dag_ids,
    status_filter,
    with_previews,
    with_writer_coordinates,
)

MATCHES = ("contains", "prefix", "exact")
DAG_MATCHES = ("contains", "prefix", "exact")

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
    value: str = ""
    dag_match: str = "contains"
    iteration: int | None = None
    loop: str = ""

    @classmethod
    def from_params(cls, params) -> SearchQuery:
        """From a query string, the same for the Search page and the API. An unknown ``match`` or ``status``
        is ``Invalid`` naming the parameter (code ``enum``, ``params["choices"]``); empty means the default.
        Ids and the asset text are stripped of surrounding spaces; the key and the value are taken as typed."""
        names = ("key", "match", "dag_id", "run_id", "task_id", "status", "asset", "value", "dag_match")
        values = {name: params.get(name) or "" for name in names}
        errors = {}
        for name, choices in (("match", MATCHES), ("status", tuple(STATUSES)), ("dag_match", DAG_MATCHES)):
            if values[name] and values[name] not in choices:
                message = _("Unknown %(name)s %(typed)s: use one of %(choices)s.") % {
                    "name": name,
                    "typed": repr(values[name]),
                    "choices": ", ".join(choices),
                }
                # Invalid %-formats its message with its params: a % typed stays one.
                errors[name] = [Invalid(message.replace("%", "%%"), code="enum", params={"choices": choices})]
        iteration, raw = None, (params.get("iteration") or "").strip()
        if raw:
            iteration = int(raw) if raw.isdigit() and int(raw) < 2**31 else None
            if iteration is None:
                typed = repr(raw[:40]).replace("%", "%%")
                message = _("iteration %(typed)s is a loop iteration: a whole number from 0.")
                errors["iteration"] = [Invalid(message % {"typed": typed})]
        if errors:
            raise Invalid(errors)
        return cls(
            iteration=iteration,
            loop=(params.get("loop") or "").strip() if iteration is not None else "",
            key=values["key"],
            match=values["match"] or "contains",
            dag_id=values["dag_id"].strip(),
            run_id=values["run_id"].strip(),
            task_id=values["task_id"].strip(),
            status=values["status"],
            asset=values["asset"].strip(),
            value=values["value"],
            dag_match=values["dag_match"] or "contains",
        )

    def key_filter(self) -> Q:
        if not self.key:
            return Q()
        lookup = {"contains": "icontains", "prefix": "startswith", "exact": "exact"}[self.match]
        return Q(**{f"key__{lookup}": self.key})

    def value_filter(self) -> Q:
        """The value's JSON text contains the text, ignoring case: as typed, or as JSON writes it in a string
        (quotes and backslashes escaped; non-ASCII as itself or as ``\\u`` escapes, as ``json.dumps`` writes
        it by default). Escapes hide the case of non-ASCII letters from the database: those match as typed, all
        lower case or all upper case."""
        if not self.value:
            return Q()
        forms = {self.value}
        for text in (self.value, self.value.lower(), self.value.upper()):
            forms |= {json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
        condition = Q()
        for form in sorted(forms):
            condition |= Q(value__icontains=form)
        return condition

    def text_filter(self) -> Q:
        return self.key_filter() & self.value_filter()

    @property
    def searches_text(self) -> bool:
        """A key or value search (no index serves one without a DAG filter)."""
        return bool(self.key or self.value)

    @property
    def task_only(self) -> bool:
        """A filter that asset keys do not have: they are left out."""
        return bool(self.dag_id or self.run_id or self.task_id or self.status or self.iteration is not None)

    @property
    def asset_only(self) -> bool:
        """A filter that task keys do not have: they are left out."""
        return bool(self.asset)


@dataclass
class SearchPage(Page):
    """A page of search results. ``cut_short``: the time budget ran out before the page was full; ``items``
    are the matches found so far, and ``next_cursor`` (or, for a page read ``backward``, ``prev_cursor``)
    resumes the scan. ``scanned_to``: how far the scan got, the last task key id or asset id read."""

    cut_short: bool = False
    scanned_to: int | None = None
    budget: float = 0.0
    backward: bool = False
    total: Figure | None = None  # how many match, when asked (``count=True``): see ``_counted``


def _counted(page: SearchPage, rows: QuerySet, indexed: bool) -> SearchPage:
    """``page`` with ``total``: exact when the page holds every match (the only page, read to the end); else a
    capped count (``COUNT_CAP``) of a search an index serves; else None, not counted: a budgeted scan's count
    would read every key again, which is what its time budget is there to avoid."""
    whole = not (page.cursor or page.next_cursor or page.prev_cursor or page.cut_short)
    if whole:
        page.total = Figure(len(page.items))
    elif indexed:
        page.total = capped_count(rows, COUNT_CAP)
    return page


def time_budget() -> float:
    """``SEARCH_TIME_BUDGET_SECONDS``: how long a key or value search no index serves may scan."""
    return max(0.0, float(settings.SEARCH_TIME_BUDGET_SECONDS))


SCAN_SHARE = 0.9  # of the budget, for the scans; the rest is for the answer around them (its queries, rendering)


def search_deadline() -> float:
    """A deadline (``time.monotonic()``) for the searches of one request, shared by both stores: the scans
    stop at ``SCAN_SHARE`` of the budget, so that the whole answer comes within it."""
    return time.monotonic() + SCAN_SHARE * time_budget()


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


def _scan(rows: QuerySet, column: str, order: list[str], start: int, end: int, up: bool, size: int, deadline: float):
    """``rows`` read by ranges of the integer ``column``, each in ``order``: upwards over [start, end], or
    downwards over [end, start), until ``size`` + 1 are found, the range is read, or ``deadline``. Returns the rows
    found, in scan order, and where a scan stopped by the deadline resumes (None otherwise): upwards the lowest
    position not read, downwards the highest + 1."""
    found: list = []
    chunk, position = FIRST_CHUNK, start

    def unread(at: int) -> bool:
        return at <= end if up else at > end

    while unread(position):
        lo, hi = (position, position + chunk) if up else (max(position - chunk, end), position)
        started = time.monotonic()
        found += rows.filter(**{f"{column}__gte": lo, f"{column}__lt": hi}).order_by(*order)[: size + 1 - len(found)]
        took = time.monotonic() - started
        if len(found) > size:
            return found, None
        chunk, position = _next_chunk(chunk, hi - lo, took, deadline - time.monotonic()), hi if up else lo
        if unread(position) and time.monotonic() >= deadline:
            return found, position
    return found, None


def _scan_task_keys(rows, cursor: str | None, before: str | None, size: int, deadline: float) -> SearchPage:
    """``rows`` (filtered) newest first, by ranges of ids, until the page is full, the table is read, or
    ``deadline``. ``cursor`` is an id: the page goes on below it (a page's last id, or where a scan stopped);
    ``before`` is an id: the page is the one above it, read upwards (a page's first id, or where a backward
    scan stopped, minus one)."""
    size = max(1, min(size, MAX_PAGE_SIZE))
    budget = time_budget()
    floor, high = _bounds(TaskStateStore, "id")
    back = decode_cursor_for(before, TaskStateStore, ["id"])
    if back is not None and high is not None:
        found, resume = _scan(rows, "id", ["id"], back[0] + 1, high, True, size, deadline)
        items = found[:size][::-1]
        forward = encode_cursor([found[0].id if found else back[0] + 1])
        if resume is not None:
            return SearchPage(
                items, forward, before, encode_cursor([resume - 1]), True, resume - 1, budget, backward=True
            )
        if len(found) > size:
            return SearchPage(items, forward, before, encode_cursor([items[0].id]), budget=budget, backward=True)
        if found:  # the start: the first page as it is now (shorter than a page if keys came or went meanwhile)
            return SearchPage(items, forward, None, budget=budget, backward=True)
        cursor = None  # nothing before it any more: the first page
    values = decode_cursor_for(cursor, TaskStateStore, ["-id"])
    used = cursor if values is not None else None
    if high is None:
        return SearchPage([], None, used, budget=budget)
    top = high + 1 if values is None else min(values[0], high + 1)
    found, resume = _scan(rows, "id", ["-id"], top, floor, False, size, deadline)
    items = found[:size]
    prev = None if values is None else encode_cursor([items[0].id if items else top - 1])
    if resume is not None:
        return SearchPage(items, encode_cursor([resume]), used, prev, True, resume, budget)
    more = encode_cursor([items[-1].id]) if len(found) > size else None
    return SearchPage(items, more, used, prev, budget=budget)


def _scan_asset_keys(rows, cursor: str | None, before: str | None, size: int, deadline: float) -> SearchPage:
    """``rows`` (filtered) by asset id and key, by ranges of asset ids, until the page is full, the table is
    read, or ``deadline``. ``cursor``: a page's last (asset id, key), or the asset id where a scan stopped (it
    goes on from that asset); ``before``: a page's first (asset id, key), or the asset id below which a
    backward scan goes on."""
    size = max(1, min(size, MAX_PAGE_SIZE))
    budget = time_budget()
    lo, ceiling = _bounds(AssetStateStore, "asset_id")
    back = decode_cursor_for(before, AssetStateStore, ["asset_id", "key"])
    below = None if back is not None else decode_cursor_for(before, AssetStateStore, ["asset_id"])
    if (back is not None or below is not None) and ceiling is not None:
        if back is not None:
            rows = rows.filter(Q(asset_id__lt=back[0]) | Q(asset_id=back[0], key__lt=back[1]))
        start = min((back[0] + 1) if back is not None else below[0], ceiling + 1)
        found, resume = _scan(rows, "asset_id", ["-asset_id", "-key"], start, lo, False, size, deadline)
        items = found[:size][::-1]
        edge = back[0] if back is not None else below[0]  # nothing found: from that asset on
        forward = encode_cursor([found[0].asset_id, found[0].key] if found else [edge])
        if resume is not None:
            return SearchPage(items, forward, before, encode_cursor([resume]), True, resume, budget, backward=True)
        if len(found) > size:
            first = encode_cursor([items[0].asset_id, items[0].key])
            return SearchPage(items, forward, before, first, budget=budget, backward=True)
        if found:  # the start: the first page as it is now (shorter than a page if keys came or went meanwhile)
            return SearchPage(items, forward, None, budget=budget, backward=True)
        cursor = None  # nothing before it any more: the first page
    after = decode_cursor_for(cursor, AssetStateStore, ["asset_id", "key"])
    resume_at = None if after is not None else decode_cursor_for(cursor, AssetStateStore, ["asset_id"])
    used = cursor if after is not None or resume_at is not None else None
    if ceiling is None:
        return SearchPage([], None, used, budget=budget)
    if after is not None:
        rows = rows.filter(Q(asset_id__gt=after[0]) | Q(asset_id=after[0], key__gt=after[1]))
        lo = max(lo, after[0])
    elif resume_at is not None:
        lo = max(lo, resume_at[0])
    found, resume = _scan(rows, "asset_id", ["asset_id", "key"], lo, ceiling, True, size, deadline)
    items = found[:size]
    prev = None
    if used is not None:
        prev = encode_cursor([items[0].asset_id, items[0].key] if items else [lo + (after is not None)])
    if resume is not None:
        return SearchPage(items, encode_cursor([resume]), used, prev, True, resume - 1, budget)
    more = encode_cursor([items[-1].asset_id, items[-1].key]) if len(found) > size else None
    return SearchPage(items, more, used, prev, budget=budget)


def _unbudgeted(page: Page) -> SearchPage:
    return SearchPage(page.items, page.next_cursor, page.cursor, page.prev_cursor)


def _page(rows: QuerySet, ordering: list[str], cursor: str | None, before: str | None, size: int) -> SearchPage:
    """A page of a search an index serves: after ``cursor``, or before ``before``."""
    if before:
        return _unbudgeted(paginate_before(rows, ordering, before, size))
    return _unbudgeted(paginate(rows, ordering, cursor, size))


def _task_rows(query: SearchQuery, now: datetime, scope: Scope) -> tuple[QuerySet, bool]:
    """The task keys that ``query`` selects in ``scope``, and whether an index serves it (a DAG filter on a
    column sorted by code point, or no key or value to find)."""
    rows = TaskStateStore.objects.filter(query.text_filter())
    indexed = not query.searches_text
    exact = query.dag_match == "exact"
    if query.dag_id and query.dag_match == "contains":  # the DAGs named (in scope), then their keys by the index
        rows, indexed = rows.filter(dag_id__in=dags_containing(query.dag_id, scope=scope)), True
    else:
        if query.dag_id:
            condition, ranged = (Q(dag_id=query.dag_id), True) if exact else dag_prefix_q(query.dag_id)
            rows, indexed = rows.filter(condition), indexed or ranged
        allowed = scoped_dag_ids(scope)
        if allowed is not None:  # a scoped user: their DAGs (with the filter), by the lookup index
            wanted = [
                d for d in allowed if (d == query.dag_id if exact and query.dag_id else d.startswith(query.dag_id))
            ]
            rows = rows.filter(dag_id__in=wanted)
    for name in ("run_id", "task_id"):
        if getattr(query, name):
            rows = rows.filter(**{name: getattr(query, name)})
    if query.status in STATUSES:
        rows = rows.filter(status_filter(query.status, now))
    if query.iteration is not None:  # the loops read are those of the run or DAG searched, when one is named
        rows = rows.filter(
            in_iteration_q(
                query.iteration,
                query.loop,
                dag_ids=[query.dag_id] if query.dag_id and exact else None,
                run_ids=[query.run_id] if query.run_id else None,
            )
        )
    return rows, indexed


def task_key_rows(query: SearchQuery, now: datetime, *, scope: Scope) -> QuerySet:
    """Every task key ``query`` finds in ``scope``, unordered and without a time budget: what an export of the
    results downloads."""
    if query.asset_only:
        return TaskStateStore.objects.none()
    return _task_rows(query, now, scope)[0]


def asset_key_rows(query: SearchQuery, *, scope: Scope) -> QuerySet:
    """Every asset key ``query`` finds in ``scope``, unordered: what the search pages through and an export of
    the results downloads. None for a DAG, run, task or status filter."""
    if query.task_only:
        return AssetStateStore.objects.none()
    rows = scoped_asset_keys(scope, AssetStateStore.objects.filter(query.text_filter()))
    if query.asset:
        rows = rows.filter(Q(asset__name__icontains=query.asset) | Q(asset__uri__icontains=query.asset))
    return rows


class PageOptions(TypedDict, total=False):
    """More of the page a search answers: the page before ``before`` (instead of after the cursor); a scan stops
    at ``deadline`` (default: ``search_deadline()``); ``count``: with how many match (``SearchPage.total``)."""

    before: str | None
    deadline: float | None
    count: bool


def search_task_keys(
    query: SearchQuery,
    now: datetime,
    cursor: str | None = None,
    size: int = 50,
    *,
    scope: Scope,
    **more: Unpack[PageOptions],
) -> SearchPage:
    """Task keys, newest first: the page after ``cursor`` (``PageOptions``). A key or value search without a DAG
    filter is a budgeted scan (``SearchPage``). An asset filter finds none (task keys have no asset)."""
    if query.asset_only:
        return SearchPage([], None, None, total=Figure(0) if more.get("count") else None)
    rows, indexed = _task_rows(query, now, scope)
    shown, before = with_previews(rows), more.get("before")
    if indexed:
        page = _page(shown, ["-id"], cursor, before, size)
    else:
        page = _scan_task_keys(shown, cursor, before, size, _deadline(more))
    return _counted(page, rows, indexed) if more.get("count") else page


def search_asset_keys(
    query: SearchQuery, cursor: str | None = None, size: int = 50, *, scope: Scope, **more: Unpack[PageOptions]
) -> SearchPage:
    """Asset keys by asset and key: the page after ``cursor`` (``PageOptions``). A key or value search is a
    budgeted scan (``SearchPage``: the primary key leads with the asset id). A DAG, run, task or status filter
    finds none (asset keys have none)."""
    if query.task_only:
        return SearchPage([], None, None, total=Figure(0) if more.get("count") else None)
    rows = asset_key_rows(query, scope=scope)
    shown, before = with_previews(rows.select_related("asset")).defer("asset__extra"), more.get("before")
    if query.searches_text:
        page = _scan_asset_keys(shown, cursor, before, size, _deadline(more))
    else:
        page = _page(shown, ["asset_id", "key"], cursor, before, size)
    page.items = with_writer_coordinates(page.items)  # the writer's loop iteration, as pages show it
    return _counted(page, rows, not query.searches_text) if more.get("count") else page


def _deadline(more: PageOptions) -> float:
    deadline = more.get("deadline")
    return search_deadline() if deadline is None else deadline
