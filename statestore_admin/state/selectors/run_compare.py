"""Two runs of one DAG compared key by key: what run ``b`` added, what it no longer has (removed), what changed
and how many keys are the same.

A key is matched across the runs by its task, index and key, and on Airflow 3.4 inside a dynamic region by its
region's path (``regions.Coordinate``: the loop or mapped node and the iteration and index at each level), since
a region's id differs in every run; where a clear replaced an execution, the current one's key is compared.

Bounded at any size: each page reads at most ``COMPARE_CAP`` keys of each run, in the order of Airflow's unique
key on ``task_state_store`` (``dag_run_id, task_id, [region_id,] map_index, key``: one range of that index per
run). When a run has more, the page compares the keys up to the first position both runs were read to, says so
(``stopped``) and the next page continues after it (``next_cursor``). On 3.4 the keys of one task's regions are
compared all at once: a task with more than ``COMPARE_CAP`` keys in regions in one run stops the comparison
there (``stuck``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Q
from django.utils.translation import gettext as _

from statestore_admin.access.scopes import Scope
from statestore_admin.airflow.models import DagRun, TaskStateStore
from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.core.errors import Invalid, NotFound
from statestore_admin.core.pagination import decode_cursor, encode_cursor
from statestore_admin.state.selectors.key_story import with_values
from statestore_admin.state.selectors.regions import RunRegions, regions_enabled, run_regions

COMPARE_CAP = 1000  # keys read of each run per page
COMPARE_VALUE_CHARS = 16 * 1024  # values up to this are compared and diffed whole; longer ones by size and start


@dataclass
class ComparedKey:
    """One key in either run: ``a`` and ``b`` its rows (None: not in that run); ``kind`` added, removed, changed
    or same; ``where``: its region path on Airflow 3.4 (empty outside any region)."""

    task_id: str
    where: str
    map_index: int
    key: str
    a: TaskStateStore | None
    b: TaskStateStore | None
    kind: str


@dataclass
class RunComparison:
    a: DagRun
    b: DagRun
    added: list[ComparedKey] = field(default_factory=list)
    removed: list[ComparedKey] = field(default_factory=list)
    changed: list[ComparedKey] = field(default_factory=list)
    same: int = 0
    read_a: int = 0
    read_b: int = 0
    cursor: str | None = None
    next_cursor: str | None = None
    stopped: bool = False  # a run has more keys than this page compared
    stuck: bool = False  # one task's keys in regions exceed the cap: the comparison cannot go on
    cap: int = 0  # keys read of each run per page

    @property
    def compared(self) -> int:
        return len(self.added) + len(self.removed) + len(self.changed) + self.same


def _position(row: TaskStateStore) -> tuple:
    """Where ``row`` sits in the index order, for the stopping point: a key outside any region by its task, index
    and key; every key of a task's regions at one position after them (compared all at once)."""
    if row.region_id != SENTINEL_REGION_ID:
        return (row.task_id, 1)
    return (row.task_id, 0, row.map_index, row.key)


def _after(position: tuple) -> Q:
    """The rows after ``position`` in the index order (``task_id, region_id, map_index, key``; the all-zero
    sentinel region sorts first)."""
    task = position[0]
    if len(position) == 2:  # the task's keys in regions come next
        return Q(task_id__gt=task) | Q(task_id=task, region_id__gt=SENTINEL_REGION_ID)
    _, _, map_index, key = position
    return (
        Q(task_id__gt=task)
        | Q(task_id=task, region_id__gt=SENTINEL_REGION_ID)
        | Q(task_id=task, region_id=SENTINEL_REGION_ID, map_index__gt=map_index)
        | Q(task_id=task, region_id=SENTINEL_REGION_ID, map_index=map_index, key__gt=key)
    )


def _decoded(cursor: str | None) -> tuple | None:
    """A cursor's position, when it is one (a cursor is user input: anything else is the first page)."""
    for count in (4, 2):
        values = decode_cursor(cursor, count)
        if values is None or not isinstance(values[0], str):
            continue
        if count == 2 and values[1] == 1:
            return tuple(values)
        if count == 4 and values[1] == 0 and isinstance(values[2], int) and isinstance(values[3], str):
            if not isinstance(values[2], bool):
                return tuple(values)
    return None


def _ordering() -> list[str]:
    return ["task_id", "region_id", "map_index", "key"] if regions_enabled() else ["task_id", "map_index", "key"]


def _read(run: DagRun, after: tuple | None) -> tuple[list[TaskStateStore], bool]:
    rows = TaskStateStore.objects.filter(dag_run=run)
    if after is not None:
        rows = rows.filter(_after(after))
    found = list(with_values(rows, COMPARE_VALUE_CHARS).order_by(*_ordering())[: COMPARE_CAP + 1])
    return found[:COMPARE_CAP], len(found) > COMPARE_CAP


def _identity(row: TaskStateStore, regions: RunRegions) -> tuple[tuple, str]:
    """A key's identity across runs and its region path; keys of a replaced execution are marked apart."""
    if row.region_id == SENTINEL_REGION_ID or not regions:
        return (row.task_id, (), row.map_index, row.key), ""
    coordinate = regions.coordinate(row.region_id, row.map_index)
    path = tuple((step.kind, step.node_id, step.index) for step in coordinate.steps)
    return (row.task_id, path, row.map_index, row.key, coordinate.replaced), coordinate.short_label


def _by_identity(rows: list[TaskStateStore], regions: RunRegions) -> dict[tuple, tuple[TaskStateStore, str]]:
    found = {}
    for row in rows:
        identity, where = _identity(row, regions)
        found[identity] = (row, where)
    # A replaced execution's key is compared only where its coordinate has no current key.
    return {
        identity[:4]: value
        for identity, value in sorted(found.items(), key=lambda item: len(item[0]) == 5 and not item[0][4])
    }


def _same_value(a: TaskStateStore, b: TaskStateStore) -> bool:
    if a.full is not None and b.full is not None:
        return a.full == b.full
    return a.size == b.size and a.preview == b.preview  # too long to compare whole: by size and start


def compare_runs(a: DagRun, b: DagRun, cursor: str | None = None) -> RunComparison:
    """A page of the comparison of runs ``a`` and ``b`` (of one DAG; Invalid otherwise): two queries, and the two
    runs' regions on Airflow 3.4."""
    if a.dag_id != b.dag_id:
        message = _("Runs of different DAGs cannot be compared: %(a)r and %(b)r.")
        raise Invalid(message % {"a": a.dag_id, "b": b.dag_id})
    after = _decoded(cursor)
    rows_a, more_a = _read(a, after)
    rows_b, more_b = _read(b, after)
    comparison = RunComparison(a, b, read_a=len(rows_a), read_b=len(rows_b), cursor=cursor if after else None)
    comparison.cap = COMPARE_CAP
    ends = [_position(rows[-1]) for rows, more in ((rows_a, more_a), (rows_b, more_b)) if more and rows]
    boundary = min(ends) if ends else None

    def inside(row: TaskStateStore) -> bool:
        if boundary is None:
            return True
        position = _position(row)
        return position < boundary or (position == boundary and len(boundary) == 4)

    regional = regions_enabled()
    side_a = _by_identity([r for r in rows_a if inside(r)], run_regions(a) if regional else RunRegions())
    side_b = _by_identity([r for r in rows_b if inside(r)], run_regions(b) if regional else RunRegions())
    for identity in sorted(side_a.keys() | side_b.keys(), key=lambda i: (i[0], i[1], i[2], i[3])):
        row_a, where_a = side_a.get(identity, (None, ""))
        row_b, where_b = side_b.get(identity, (None, ""))
        task_id, _region, map_index, key = identity
        if row_a is None:
            kind = "added"
        elif row_b is None:
            kind = "removed"
        else:
            kind = "same" if _same_value(row_a, row_b) else "changed"
        if kind == "same":
            comparison.same += 1
            continue
        entry = ComparedKey(task_id, where_a or where_b, map_index, key, row_a, row_b, kind)
        getattr(comparison, kind).append(entry)
    if boundary is not None:
        comparison.stopped = True
        if boundary == after:
            comparison.stuck = True
        else:
            comparison.next_cursor = encode_cursor(list(boundary))
    return comparison


def runs_to_compare(dag_id: str, a_run_id: str, b_run_id: str, *, scope: Scope) -> tuple[DagRun, DagRun]:
    """The two runs of ``dag_id`` named by their run ids: Invalid when one is not given, NotFound when one does
    not exist or the DAG is out of ``scope`` (in the same words, as the run page answers)."""
    missing = {name: _("Choose a run to compare.") for name, run_id in (("a", a_run_id), ("b", b_run_id)) if not run_id}
    if missing:
        raise Invalid(missing)
    found = {}
    if scope.allows_dag(dag_id):
        found = {r.run_id: r for r in DagRun.objects.filter(dag_id=dag_id, run_id__in=[a_run_id, b_run_id])}
    for run_id in (a_run_id, b_run_id):
        if run_id not in found:
            message = _("No DAG run %(run_id)r of DAG %(dag_id)r: it may have been deleted.")
            raise NotFound(message % {"run_id": run_id, "dag_id": dag_id})
    return found[a_run_id], found[b_run_id]
