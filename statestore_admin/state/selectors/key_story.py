"""A key's story across runs: the same key of the same task instance in every run of its DAG, newest run first.

"The same key" is the same ``task_id``, index (``map_index``, 3.4's ``region_index``) and ``key``; on Airflow 3.4 a
key in a dynamic region is followed by its region's *slot*: the same loop or mapped node at the same iteration
and index path from the outermost region in (a region's id differs in every run), and where a clear forked an
execution, the newest execution of that slot. A key outside any region is followed outside any region.

Bounded at any size: a page reads at most ``RUN_WINDOW`` runs of the DAG (``dag_run`` by its primary key,
newest first) and probes each for the key through Airflow's unique key ``(dag_run_id, task_id, [region_id,]
map_index, key)``: one index probe per run, never a scan of the DAG's keys. A window that ends before a page is
full says so (``stopped``) and the next page continues after it. Values are read whole only up to
``FULL_VALUE_CHARS`` (for the diff and the line); longer ones only as previews.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC
from uuid import UUID

from django.db.models import Case, QuerySet, TextField, Value, When
from django.utils.dateparse import parse_datetime

from statestore_admin.access.scopes import Scope
from statestore_admin.airflow.models import DagRun, DynamicRegion, TaskStateStore
from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.core.pagination import decode_cursor, encode_cursor
from statestore_admin.state.selectors.asset_keys import with_previews
from statestore_admin.state.selectors.regions import regions_enabled

STORY_PAGE = 25  # runs with the key shown per page
RUN_WINDOW = 500  # runs of the DAG looked at per page, at most
REGION_RUN_WINDOW = 100  # the same for a key in a region (each run's regions of the slot are read too)
FULL_VALUE_CHARS = 64 * 1024  # values up to this are read whole (diff, line); longer ones as previews
MAX_SERIES = 3  # lines drawn: the value itself, or the numeric leaves of an object found most often
_LEAF_DEPTH = 3


@dataclass
class StoryEntry:
    """The key in one run: ``value`` (the whole text; None when longer than ``FULL_VALUE_CHARS``) and, for the
    diff, ``previous`` (the text of the entry of the run before it that has the key; None: none read)."""

    run: DagRun
    row: TaskStateStore
    value: str | None
    previous: str | None = None
    has_previous: bool = False


@dataclass
class Series:
    """A line over runs (oldest first): ``name`` ("value", or a JSON path "stats.rows"), ``kind`` "number" or
    "time", and one point per entry (None: the entry has no such leaf, or one that cannot be drawn). ``listed``:
    the entries (by index) whose leaf is an integer too large for a float (10**400): listed, not charted."""

    name: str
    kind: str
    points: list[float | None]
    listed: dict[int, int] = field(default_factory=dict)


@dataclass
class KeyStory:
    origin: TaskStateStore
    slot: str  # how the key is followed: "" outside a region, else its region path ("loop refine · iteration 2")
    entries: list[StoryEntry]
    cursor: str | None
    next_cursor: str | None
    runs_read: int  # runs of the DAG looked at for this page
    stopped: bool  # the window of runs ended before the page was full: more runs may have the key
    window: int = 0  # runs looked at a page, at most
    series: list[Series] = field(default_factory=list)

    @property
    def oldest_first(self) -> list[StoryEntry]:
        return self.entries[::-1]


def _after_run(cursor: str | None) -> int | None:
    values = decode_cursor(cursor, 1)
    return values[0] if values and isinstance(values[0], int) and not isinstance(values[0], bool) else None


def _window(dag_id: str, after: int | None, size: int) -> list[tuple[int, str]]:
    runs = DagRun.objects.filter(dag_id=dag_id)
    if after is not None:
        runs = runs.filter(id__lt=after)
    return list(runs.order_by("-id").values_list("id", "run_id")[:size])


def _slot_of(region_id: UUID, regions: dict[UUID, DynamicRegion]) -> tuple | None:
    """A region's slot: its node and the (node, index) path of the regions it sits in, outermost first."""
    path, current, seen = [], regions.get(region_id), set()
    while current is not None:
        if current.id in seen:
            return None
        seen.add(current.id)
        path.append((current.node_id, current.parent_region_index))
        if current.parent_region_id is None:
            return tuple(reversed(path))
        current = regions.get(current.parent_region_id)
    return None  # a parent row is missing: no slot to follow


def _slot_regions(origin: TaskStateStore, run_ids: list[str]) -> tuple[list[UUID], tuple | None]:
    """The region of the origin key's slot in each of ``run_ids`` (the newest execution where a clear forked
    one): reads those runs' regions of the slot's nodes only."""
    own = {r.id: r for r in DynamicRegion.objects.filter(dag_id=origin.dag_id, run_id=origin.run_id)}
    slot = _slot_of(origin.region_id, own)
    if slot is None:
        return [origin.region_id], None
    nodes = {node for node, _ in slot}
    rows = list(DynamicRegion.objects.filter(dag_id=origin.dag_id, run_id__in=run_ids, node_id__in=nodes))
    by_id = {r.id: r for r in rows}
    newest: dict[str, DynamicRegion] = {}
    for region in rows:
        if region.node_id == slot[-1][0] and _slot_of(region.id, by_id) == slot:
            kept = newest.get(region.run_id)
            if kept is None or region.created_at > kept.created_at:
                newest[region.run_id] = region
    return [r.id for r in newest.values()], slot


def with_values(rows: QuerySet, limit: int = FULL_VALUE_CHARS) -> QuerySet:
    """Previews (``with_previews``), and ``full``: the whole value where it is at most ``limit`` characters, to
    diff and draw (else NULL: a longer value is never read whole)."""
    return with_previews(rows).annotate(
        full=Case(When(size__lte=limit, then="value"), default=Value(None), output_field=TextField())
    )


def key_story(origin: TaskStateStore, cursor: str | None = None, size: int | None = None, *, scope: Scope) -> KeyStory:
    """A page of ``origin``'s story (its DAG must be in ``scope``): two queries (three or four on 3.4 for a key in a
    region), whatever the number of runs and keys."""
    scope.require_dag(origin.dag_id)
    size = STORY_PAGE if size is None else max(1, min(size, STORY_PAGE))
    in_region = regions_enabled() and origin.region_id != SENTINEL_REGION_ID
    limit = REGION_RUN_WINDOW if in_region else RUN_WINDOW
    window = _window(origin.dag_id, _after_run(cursor), limit)
    full_window = len(window) == limit
    rows = TaskStateStore.objects.filter(
        dag_run_id__in=[pk for pk, _ in window], task_id=origin.task_id, map_index=origin.map_index, key=origin.key
    )
    slot_label = ""
    if in_region:
        region_ids, slot = _slot_regions(origin, [run_id for _, run_id in window])
        rows = rows.filter(region_id__in=region_ids)
        slot_label = " › ".join(f"{node} {index}" if index is not None else node for node, index in slot or ())
    else:
        rows = rows.filter(region_id=SENTINEL_REGION_ID)
    found = list(with_values(rows).select_related("dag_run").order_by("-dag_run_id")[: size + 1])
    entries = [StoryEntry(row.dag_run, row, row.full) for row in found[:size]]
    for entry, older in zip(entries, found[1:], strict=False):
        entry.previous, entry.has_previous = older.full, True
    if len(found) > size:
        next_cursor = encode_cursor([found[size - 1].dag_run_id])
    elif full_window and window:
        next_cursor = encode_cursor([window[-1][0]])
    else:
        next_cursor = None
    stopped = full_window and len(found) <= size
    story = KeyStory(
        origin, slot_label, entries, cursor if _after_run(cursor) else None, next_cursor, len(window), stopped
    )
    story.series = numeric_series([e.value for e in story.oldest_first])
    return story


# Lines over runs ------------------------------------------------------------------------------------------------
def _as_point(value) -> tuple[str, float | int] | None:
    """A JSON value as a point: a number, or an ISO 8601 time (with a date and a time) as epoch seconds. A JSON
    integer has no bound; one too large for a float stays an int (to be listed, as no line can reach it)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        try:
            return "number", float(value)
        except OverflowError:
            return "number", value
    if isinstance(value, float):
        return ("number", value) if math.isfinite(value) else None
    if isinstance(value, str) and len(value) >= 16 and value[4:5] == "-":
        try:
            parsed = parse_datetime(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed is not None:
            try:  # naive: UTC; one whose offset carries it out of years 1 to 9999 is no time to draw
                return "time", (parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
            except OverflowError:
                return None
    return None


def _leaves(value, prefix: str = "", depth: int = 0):
    """(path, kind, point) of the numeric and time leaves of a JSON value, objects followed ``_LEAF_DEPTH`` deep."""
    point = _as_point(value)
    if point is not None:
        yield prefix or "value", *point
    elif isinstance(value, dict) and depth < _LEAF_DEPTH:
        for name, item in value.items():
            yield from _leaves(item, f"{prefix}.{name}" if prefix else str(name), depth + 1)


def numeric_series(values: list[str | None]) -> list[Series]:
    """The lines worth drawing for ``values`` (oldest first, JSON text or None): the leaves (or the value itself)
    that are numbers or times in at least two of them, those found most often first, ``MAX_SERIES`` at most."""
    found: dict[tuple[str, str], Series] = {}
    for n, text in enumerate(values):
        if text is None:
            continue
        try:
            decoded = json.loads(text)
        except (ValueError, RecursionError):
            continue
        for path, kind, point in _leaves(decoded):
            series = found.setdefault((path, kind), Series(path, kind, [None] * len(values)))
            if isinstance(point, int):
                series.listed[n] = point
            else:
                series.points[n] = point
    drawn = [series for series in found.values() if sum(p is not None for p in series.points) >= 2]
    drawn.sort(key=lambda series: (-sum(p is not None for p in series.points), series.name, series.kind))
    return drawn[:MAX_SERIES]
