"""Airflow 3.4's dynamic regions of a DAG run as operators think of them: ``run_regions(run)`` reads the run's
``dynamic_region`` rows (3.4 only; on 3.3 it reads nothing and every coordinate is plain) and tells, for each
coordinate ``(region_id, index)`` a key or task instance sits at, its path from the outermost region in
(``Coordinate``: "loop refine · iteration 2 › map 1", or "iteration 2 › map 1" beside the task's name), whether
that execution is current or was replaced by a clear (a fork whose ``resumes_from_index`` covers it, at any
level), and a loop iteration's decision reason (the ``_airflow_loop_decision_reason`` XCom the loop's gate
task writes). A region is a loop when a gate task (``LoopGateOperator``) runs in it, a mapped task's expansion
when its node is the task itself, and a mapped task group's expansion otherwise. Iterations and map positions
are numbered from 0, as Airflow stores them and as Airflow's own UI shows them ("Iteration 0"), so a number
here is the one typed into Airflow's ``?iteration=`` filter and API; an execution's iterations are listed
oldest first, newest last, and a replaced execution before the one that replaced it.

A loop may run hundreds of iterations: the run page lists a long loop's first and last iterations and those of
the keys it shows, the others as gaps (``IterationGap``) that ``loop_iterations`` opens a page at a time, with
bounded reads of Airflow 3.4's indexes (never the run's every region or task instance).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import ClassVar
from uuid import UUID

from django.db import connections
from django.db.models import Exists, OuterRef, Q
from django.utils.translation import gettext as _

from statestore_admin.airflow import rest
from statestore_admin.airflow.models import DagRun, DynamicRegion, TaskInstance, TaskStateStore
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.versions import SENTINEL_REGION_ID, schema_of
from statestore_admin.core.errors import NotFound

# Airflow 3.4's names (airflow.models.task_coordinates.LOOP_GATE_OPERATOR, dynamic_region.LOOP_DECISION_REASON_KEY)
LOOP_GATE_OPERATOR = "LoopGateOperator"
LOOP_DECISION_REASON_KEY = "_airflow_loop_decision_reason"
LOOP, MAP, GROUP = "loop", "map", "group"
_MAX_REGION_INDEX = 2**31 - 1
# A loop of up to ITERATIONS_LISTED iterations is listed whole; a longer one lists its first and last
# EDGE_ITERATIONS, the iterations of the keys the page shows (up to KEYED_ITERATIONS) and gaps between them, which
# open ITERATIONS_PAGE iterations at a time: a loop of any length costs the run page about the same.
ITERATIONS_LISTED = 20
EDGE_ITERATIONS = 3
KEYED_ITERATIONS = 10
ITERATIONS_PAGE = 50


@dataclass(frozen=True)
class Region:
    """One ``dynamic_region`` row: one execution of a loop (``kind`` LOOP), of a mapped task (MAP) or of a
    mapped task group (GROUP)."""

    id: UUID
    node_id: str
    kind: str
    parent_id: UUID | None
    parent_index: int | None
    forked_from: UUID | None
    family_root: UUID
    path: bytes
    resumes_from: int
    created_at: datetime


@dataclass(frozen=True)
class Step:
    """One level of a coordinate's path: the ``index`` inside region ``region_id`` (a loop's iteration, a
    mapped task's map position, a mapped group's expansion); ``decision``: the reason the loop's gate recorded
    at that iteration, if any."""

    kind: str
    node_id: str
    index: int
    region_id: UUID
    decision: str | None = None

    @property
    def short(self) -> str:
        words = {LOOP: _("iteration %(index)s"), MAP: _("map %(index)s"), GROUP: _("expansion %(index)s")}
        return words.get(self.kind, _("index %(index)s")) % {"index": self.index}

    @property
    def label(self) -> str:
        if self.kind == MAP:
            return self.short
        words = {"node": self.node_id, "step": self.short}
        if self.kind == LOOP:
            return _("loop %(node)s · %(step)s") % words
        if self.kind == GROUP:
            return _("group %(node)s · %(step)s") % words
        return _("region %(node)s · %(step)s") % words


@dataclass(frozen=True)
class Coordinate:
    """Where a key or task instance sits: ``region_id`` (the sentinel outside any region) and ``index`` in it.
    ``steps``: its path, outermost first (empty outside any region); ``replaced``: a clear re-created that
    execution (its keys are the replaced execution's); ``order`` sorts coordinates newest last."""

    region_id: UUID
    index: int
    steps: tuple[Step, ...] = ()
    replaced: bool = False
    order: tuple = ()

    @property
    def in_region(self) -> bool:
        return self.region_id != SENTINEL_REGION_ID

    @property
    def label(self) -> str:
        """The whole path: "loop refine · iteration 2 › map 1"."""
        return " › ".join(step.label for step in self.steps)

    @property
    def short_label(self) -> str:
        """The path without the regions' names: "iteration 2 › map 1"."""
        return " › ".join(step.short for step in self.steps)

    @property
    def decision(self) -> str | None:
        """The loop's decision reason at this iteration, for a coordinate directly in a loop (a region nested in
        the iteration does not repeat it: the run page's Loops list shows it once)."""
        return self.steps[-1].decision if self.steps and self.steps[-1].kind == LOOP else None

    @property
    def public_map_index(self) -> int:
        """The map index Airflow shows for it: the index in a mapped task's or group's expansion, -1 directly
        in a loop (``TaskCoordinateResolver.public_map_index``)."""
        if not self.steps:
            return self.index
        return self.index if self.steps[-1].kind in (MAP, GROUP) else -1

    @property
    def iteration(self) -> int | None:
        """The innermost loop iteration this coordinate sits in (None: in no loop)."""
        return next((s.index for s in reversed(self.steps) if s.kind == LOOP), None)


@dataclass(frozen=True)
class Iteration:
    index: int
    region_id: UUID
    replaced: bool
    decision: str | None
    is_gap: ClassVar[bool] = False


@dataclass(frozen=True)
class IterationGap:
    """Iterations a long loop's list leaves out, from index ``first`` to ``last`` (None: to the loop's end), for
    ``loop_iterations`` to read when asked."""

    first: int
    last: int | None
    is_gap: ClassVar[bool] = True


@dataclass(frozen=True)
class LoopRun:
    """One loop's executions in a run, at one place (its ``parent`` coordinate's label; '' at the top):
    its iterations oldest first, newest last, replaced ones before those that replaced them. ``root``: the
    family's root region (the loop's id in ``loop_iterations``); ``listed``: what its list shows, the
    iterations and, in a long loop, the gaps between those shown (``_listed``)."""

    node_id: str
    parent: str
    iterations: list[Iteration]
    root: UUID | None = None
    listed: list[Iteration | IterationGap] = field(default_factory=list)


@dataclass(frozen=True)
class IterationsPage:
    """A page of one loop's iterations (``loop_iterations``): ``loop`` with those whose index is from ``first``
    to ``last`` (the last listed, or the page's end if none is); ``more``: the gap after them, if the loop has
    iterations there; ``previous``: the index the page before starts at (None on the first)."""

    loop: LoopRun
    first: int
    last: int
    more: IterationGap | None
    previous: int | None

    @property
    def entries(self) -> list[Iteration | IterationGap]:
        """What the page lists: its iterations, then the gap after them."""
        return [*self.loop.listed, self.more] if self.more else list(self.loop.listed)


def _listed(iterations: list[Iteration], keyed: set[int]) -> list[Iteration | IterationGap]:
    """A loop's list: every iteration of a short loop; of a long one the first and last ``EDGE_ITERATIONS``
    indexes and up to ``KEYED_ITERATIONS`` of ``keyed`` (each with all its executions), a gap for each run of
    indexes between them (a lone index is shown rather than made a gap)."""
    if len(iterations) <= ITERATIONS_LISTED:
        return list(iterations)
    by_index: dict[int, list[Iteration]] = {}
    for iteration in iterations:
        by_index.setdefault(iteration.index, []).append(iteration)
    indexes = sorted(by_index)
    kept = {
        *indexes[:EDGE_ITERATIONS],
        *indexes[-EDGE_ITERATIONS:],
        *sorted(keyed & by_index.keys())[:KEYED_ITERATIONS],
    }
    listed: list[Iteration | IterationGap] = []
    hidden: list[int] = []

    def close_gap():
        if len(hidden) == 1:
            listed.extend(by_index[hidden[0]])
        elif hidden:
            listed.append(IterationGap(hidden[0], hidden[-1]))
        hidden.clear()

    for index in indexes:
        if index in kept:
            close_gap()
            listed.extend(by_index[index])
        else:
            hidden.append(index)
    close_gap()
    return listed


@dataclass
class RunRegions:
    """A DAG run's regions (empty on 3.3 and for a run without any), read once a page."""

    regions: dict[UUID, Region] = field(default_factory=dict)
    decisions: dict[tuple[UUID, int], str] = field(default_factory=dict)
    iterations_seen: dict[UUID, set[int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.regions)

    @cached_property
    def _successors(self) -> dict[UUID, Region]:
        return {r.forked_from: r for r in self.regions.values() if r.forked_from is not None}

    def forks_after(self, region_id: UUID):
        """The successive forks of a region, oldest first (``forked_from_region_id`` is unique: a chain)."""
        seen = set()
        while region_id in self._successors and region_id not in seen:
            seen.add(region_id)
            region_id = self._successors[region_id].id
            yield self.regions[region_id]

    def superseded(self, region_id: UUID, index: int) -> bool:
        """Airflow's ``DynamicRegion.is_coordinate_superseded``: a fork of the region (or of one it sits in)
        resumes at or before the index."""
        seen = set()
        while region_id in self.regions and region_id not in seen:
            seen.add(region_id)
            if any(fork.resumes_from <= index for fork in self.forks_after(region_id)):
                return True
            region = self.regions[region_id]
            if region.parent_id is None or region.parent_index is None:
                break
            region_id, index = region.parent_id, region.parent_index
        return False

    def coordinate(self, region_id: UUID, index: int) -> Coordinate:
        if region_id == SENTINEL_REGION_ID:
            return Coordinate(region_id, index, order=((0, "", index),))
        steps: list[Step] = []
        order: list[tuple] = []
        current, at, seen = region_id, index, set()
        while current is not None and current not in seen:
            seen.add(current)
            region = self.regions.get(current)
            if region is None:  # a key whose region row is gone: still its own coordinate
                steps.append(Step("", str(current)[:8], at, current))
                order.append((1, str(current), at, ""))
                break
            steps.append(Step(region.kind, region.node_id, at, current, self.decisions.get((current, at))))
            root = self.regions.get(region.family_root, region)
            order.append((1, root.created_at.isoformat(), at, region.created_at.isoformat()))
            current, at = region.parent_id, region.parent_index
        steps.reverse()
        order.reverse()
        return Coordinate(region_id, index, tuple(steps), self.superseded(region_id, index), tuple(order))

    @cached_property
    def _families(self) -> dict[UUID, list[Region]]:
        """Each loop execution (a family: the original and the forks a clear made of it), oldest first."""
        families: dict[UUID, list[Region]] = {}
        for region in sorted(self.regions.values(), key=lambda r: r.created_at):
            if region.kind == LOOP:
                families.setdefault(region.family_root, []).append(region)
        return families

    def _loop(self, root: UUID, keyed: set[int] | None = None) -> tuple[tuple, LoopRun]:
        """The loop execution of family ``root`` with its place among the run's (a sort key); its ``listed``
        iterations every one, or with ``keyed`` (the indexes of keys shown) a long loop's list (``_listed``)."""
        members = self._families[root]
        first, created = members[0], {m.id: n for n, m in enumerate(members)}
        parent = None if first.parent_id is None else self.coordinate(first.parent_id, first.parent_index)
        iterations = [
            Iteration(index, m.id, self.superseded(m.id, index), self.decisions.get((m.id, index)))
            for m in members
            for index in self.iterations_seen.get(m.id, ())
        ]
        iterations.sort(key=lambda it: (it.index, created[it.region_id]))
        place = (parent.order if parent else (), first.created_at.isoformat())
        listed = list(iterations) if keyed is None else _listed(iterations, keyed)
        return place, LoopRun(first.node_id, parent.label if parent else "", iterations, root, listed)

    def loops(self, shown=()) -> list[LoopRun]:
        """Each loop execution of the run with the iterations that have task instances, ordered as the run page
        lists them. ``shown``: the coordinates of the keys the page shows; a long loop keeps their iterations in
        its list (``_listed``)."""
        keyed: dict[UUID, set[int]] = {}
        for coordinate in shown:
            for step in coordinate.steps if coordinate is not None else ():
                region = self.regions.get(step.region_id)
                if step.kind == LOOP and region is not None:
                    keyed.setdefault(region.family_root, set()).add(step.index)
        found = [self._loop(root, keyed.get(root, set())) for root in self._families]
        return [loop for _, loop in sorted(found, key=lambda pair: pair[0])]


def regions_enabled() -> bool:
    return schema_of(connections[airflow_alias()]).regions


def _decoded(value) -> str:
    """The reason as the gate wrote it: a JSON string (``serialize=False`` stores the text as JSON)."""
    if isinstance(value, (bytes, memoryview)):
        value = bytes(value).decode(errors="replace")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return value if isinstance(value, str) else json.dumps(value)


def _decisions(gates: list[tuple]) -> dict[tuple[UUID, int], str]:
    """The decision reasons the gates recorded, by the gate's coordinate (the loop region and iteration)."""
    if not gates:
        return {}
    connection = connections[airflow_alias()]
    prep = TaskInstance._meta.get_field("id").get_db_prep_value
    by_id = {UUID(str(ti_id)): (region_id, index) for ti_id, region_id, index in gates}
    marks = ", ".join(["%s"] * len(by_id))
    sql = (
        f"SELECT task_instance_id, value FROM xcom_v2 WHERE {connection.ops.quote_name('key')} = %s "
        f"AND task_instance_id IN ({marks})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [LOOP_DECISION_REASON_KEY, *(prep(i, connection) for i in by_id)])
        rows = cursor.fetchall()
    found = {}
    for ti_id, value in rows:
        coordinate = by_id.get(ti_id if isinstance(ti_id, UUID) else UUID(str(ti_id)))
        if coordinate is not None and value is not None:
            found[coordinate] = _decoded(value)
    return found


def _region(row: DynamicRegion, kind: str) -> Region:
    return Region(
        row.id,
        row.node_id,
        kind,
        row.parent_region_id,
        row.parent_region_index,
        row.forked_from_region_id,
        row.family_root_id,
        bytes(row.path),
        row.resumes_from_index,
        row.created_at,
    )


def run_regions(run: DagRun) -> RunRegions:
    """The regions of ``run``: three or four short queries on 3.4 (none on 3.3, or none beyond the first for a
    run without regions)."""
    return _regions_of(run.dag_id, run.run_id)


def _regions_of(dag_id: str, run_id: str) -> RunRegions:
    if not regions_enabled():
        return RunRegions()
    rows = list(DynamicRegion.objects.filter(dag_id=dag_id, run_id=run_id))
    if not rows:
        return RunRegions()
    gates = list(
        TaskInstance.objects.filter(dag_id=dag_id, run_id=run_id, operator=LOOP_GATE_OPERATOR).values_list(
            "id", "region_id", "map_index"
        )
    )
    loop_regions = {region_id for _, region_id, _ in gates}
    loop_nodes = {r.node_id for r in rows if r.id in loop_regions}
    node_ids = {r.node_id for r in rows}
    mapped_tasks = set(
        TaskInstance.objects.filter(dag_id=dag_id, run_id=run_id, task_id__in=node_ids)
        .values_list("task_id", flat=True)
        .distinct()
    )
    regions = {}
    for r in rows:
        regions[r.id] = _region(r, LOOP if r.node_id in loop_nodes else MAP if r.node_id in mapped_tasks else GROUP)
    seen: dict[UUID, set[int]] = {}
    for _gate, region_id, index in gates:
        seen.setdefault(region_id, set()).add(index)
    for region in regions.values():  # an iteration holds a nested region, or the loop's own task instances
        if region.parent_id in regions and regions[region.parent_id].kind == LOOP:
            seen.setdefault(region.parent_id, set()).add(region.parent_index)
    return RunRegions(regions, _decisions(gates), seen)


# task_instance's indexes that hold region_id all start (dag_id, task_id, …) (task_instance_try_key: dag_id,
# task_id, run_id, region_id, region_index): a page of a loop's iterations names the DAG's task ids, found by a
# loose index scan (one probe a task), so that each of its reads is a range of that index, not the run's rows.
_DAG_TASKS = """
WITH RECURSIVE tasks(task_id, n) AS (
    SELECT MIN(task_id), 1 FROM task_instance WHERE dag_id = %s
    UNION ALL
    SELECT (SELECT MIN(t.task_id) FROM task_instance t WHERE t.dag_id = %s AND t.task_id > tasks.task_id), n + 1
    FROM tasks WHERE tasks.task_id IS NOT NULL AND n < %s
)
SELECT task_id FROM tasks WHERE task_id IS NOT NULL
"""
DAG_TASKS_MAX = 5_000
_MAX_DEPTH = 32  # regions nested deeper than any DAG nests them: a cycle in hand-edited rows ends here


def _dag_tasks(dag_id: str) -> list[str]:
    with connections[airflow_alias()].cursor() as db:
        db.execute(_DAG_TASKS, [dag_id, dag_id, DAG_TASKS_MAX])
        return [row[0] for row in db.fetchall()]


def _loop_not_found(run: DagRun, root: UUID) -> NotFound:
    return NotFound(_("No loop %(loop)s in DAG run %(run_id)r.") % {"loop": root, "run_id": run.run_id})


def loop_iterations(
    run: DagRun, root: UUID, first: int = 0, last: int | None = None, size: int = ITERATIONS_PAGE
) -> IterationsPage:
    """The iterations of the loop ``root`` (its family's root region) in ``run`` whose index is from ``first``
    up to ``last`` (None: the loop's end), at most ``size`` indexes: what a gap of the run page's list opens.
    Bounded reads whatever the loop's length: the loop's executions and the regions it sits in (by
    ``family_root_id`` and id), the gates and nested regions of the page's indexes (task_instance_try_key,
    with the DAG's task ids; ``parent_region_id``), their decisions, and whether any iteration follows."""
    if not regions_enabled():
        raise _loop_not_found(run, root)
    around = DynamicRegion.objects.filter(dag_id=run.dag_id, run_id=run.run_id)
    members = list(around.filter(family_root_id=root))
    if not members:
        raise _loop_not_found(run, root)
    rows = {r.id: r for r in members}
    parent_id = members[0].parent_region_id
    for _depth in range(_MAX_DEPTH):  # the regions it sits in, with their forks (a clear of an outer iteration)
        parent = around.filter(pk=parent_id).first() if parent_id is not None and parent_id not in rows else None
        if parent is None:
            break
        rows.update((r.id, r) for r in around.filter(family_root_id=parent.family_root_id))
        parent_id = parent.parent_region_id
    gates = TaskInstance.objects.filter(
        dag_id=run.dag_id, run_id=run.run_id, task_id__in=_dag_tasks(run.dag_id), operator=LOOP_GATE_OPERATOR
    )
    kinds = {}
    for node in {r.node_id for r in rows.values()}:
        ids = [r.id for r in rows.values() if r.node_id == node]
        if gates.filter(region_id__in=ids).exists():
            kinds[node] = LOOP
        else:
            mapped = TaskInstance.objects.filter(dag_id=run.dag_id, run_id=run.run_id, task_id=node).exists()
            kinds[node] = MAP if mapped else GROUP
    if kinds[members[0].node_id] != LOOP:
        raise _loop_not_found(run, root)
    first = max(0, min(first, _MAX_REGION_INDEX))
    stop = _MAX_REGION_INDEX if last is None else max(-1, min(last, _MAX_REGION_INDEX))
    end = min(first + size - 1, stop)
    ids = [m.id for m in members]
    in_page = gates.filter(region_id__in=ids, map_index__gte=first, map_index__lte=end)
    page_gates = list(in_page.values_list("id", "region_id", "map_index"))
    nested = around.filter(parent_region_id__in=ids, parent_region_index__gte=first, parent_region_index__lte=end)
    seen: dict[UUID, set[int]] = {}
    for _gate, region_id, index in page_gates:
        seen.setdefault(region_id, set()).add(index)
    for region_id, index in nested.values_list("parent_region_id", "parent_region_index").distinct():
        seen.setdefault(region_id, set()).add(index)
    regions = RunRegions({r.id: _region(r, kinds[r.node_id]) for r in rows.values()}, _decisions(page_gates), seen)
    _place, loop = regions._loop(root)
    later = end < stop and (
        gates.filter(region_id__in=ids, map_index__gt=end, map_index__lte=stop).exists()
        or around.filter(parent_region_id__in=ids, parent_region_index__gt=end, parent_region_index__lte=stop).exists()
    )
    more = IterationGap(end + 1, None if last is None else stop) if later else None
    shown_last = loop.iterations[-1].index if loop.iterations else end  # the loop may end before the page does
    return IterationsPage(loop, first, shown_last, more, max(0, first - size) if first > 0 else None)


def coordinates_at(points) -> dict[tuple, Coordinate]:
    """The ``Coordinate`` of each point ``(dag_id, run_id, region_id, index)`` in a region (others are left out:
    outside any region, or on 3.3), for pages naming task instances by their place, as the task instance page
    does ("loop refine · iteration 2 › map 1"). Each run's regions are read once (``run_regions``)."""
    found: dict[tuple, Coordinate] = {}
    points = [p for p in points if p[2] is not None and p[2] != SENTINEL_REGION_ID and p[3] is not None]
    if not points or rest.api_mode() or not regions_enabled():  # Airflow's API does not give the regions' tree
        return found
    runs: dict[tuple[str, str], RunRegions] = {}
    for point in points:
        dag_id, run_id, region_id, index = point
        if (dag_id, run_id) not in runs:
            runs[dag_id, run_id] = _regions_of(dag_id, run_id)
        found[point] = runs[dag_id, run_id].coordinate(region_id, index)
    return found


def _writer(row) -> tuple | None:
    if row.last_updated_by_kind != "task" or not regions_enabled():
        return None
    return (
        row.last_updated_by_dag_id,
        row.last_updated_by_run_id,
        row.last_updated_by_region_id,
        row.last_updated_by_region_index,
    )


def with_writer_coordinates(rows):
    """Asset keys (``rows``, read once) with ``writer_coordinate``: where the task that last wrote each one sat on
    Airflow 3.4 (the ``Coordinate`` of its ``last_updated_by_region_id`` and ``_region_index`` in its run, with
    its ``label`` and ``iteration``), or None (another writer, a task outside any region, 3.3). Every face that
    names a writer shows it (templates/includes/_writer.html, our search API), as the task instance page does."""
    rows = list(rows)
    writers = {id(row): _writer(row) for row in rows} if rows else {}
    found = coordinates_at(w for w in writers.values() if w)
    for row in rows:
        row.writer_coordinate = found.get(writers[id(row)])
    return rows


def with_coordinates(rows):
    """Audit events or keys (``rows``: ``dag_id``, ``run_id``, ``region_id``, and ``map_index``, the index in
    the region) with ``coordinate``: the place of their task instance in a region (None outside any)."""
    rows = list(rows)
    found = coordinates_at((r.dag_id, r.run_id, r.region_id, r.map_index) for r in rows)
    for row in rows:
        row.coordinate = found.get((row.dag_id, row.run_id, row.region_id, row.map_index))
    return rows


def _pack(index: int) -> bytes:
    return struct.pack(">I", index)


def in_iteration_q(iteration: int, loop: str = "", dag_ids=None, run_ids=None) -> Q:
    """Task state rows in loop iteration ``iteration`` (of any loop, or of the loop named ``loop``), at any depth:
    directly in a loop's region at that index, or in a region nested under that iteration (Airflow's ``path``
    encoding: the loop family's root id and the iteration follow the loop's own path). ``dag_ids``/``run_ids``
    narrow the loops read. Nothing on 3.3."""
    if not regions_enabled() or not 0 <= iteration <= _MAX_REGION_INDEX:
        return Q(pk__in=[])
    gate = TaskInstance.objects.filter(
        dag_id=OuterRef("dag_id"), run_id=OuterRef("run_id"), region_id=OuterRef("id"), operator=LOOP_GATE_OPERATOR
    )
    loops = DynamicRegion.objects.filter(Exists(gate))
    if loop:
        loops = loops.filter(node_id=loop)
    if dag_ids is not None:
        loops = loops.filter(dag_id__in=dag_ids)
    if run_ids is not None:
        loops = loops.filter(run_id__in=run_ids)
    condition = Q(region_id__in=loops.values("id"), map_index=iteration)
    families = {(r.family_root_id, bytes(r.path)) for r in loops.only("family_root_id", "path")}
    nested = Q()
    for root, path in families:
        prefix = path + root.bytes
        nested |= Q(path__gte=prefix + _pack(iteration), path__lt=prefix + _pack(iteration + 1))
    if families:
        condition |= Q(region_id__in=DynamicRegion.objects.filter(nested).values("id"))
    return condition


def key_coordinate(key: TaskStateStore) -> Coordinate | None:
    """A task key's coordinate with its path (None on 3.3, and outside any region)."""
    if key.region_id == SENTINEL_REGION_ID or not regions_enabled():
        return None
    return run_regions(key.dag_run).coordinate(key.region_id, key.map_index)
