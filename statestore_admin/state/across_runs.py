"""A task key across the runs of its DAG, and two runs compared key by key, read through a ``state.sources``
source: the same from Airflow's database and over its REST API (managed Airflow), where the database pages'
readers (``selectors.key_story``, ``selectors.run_compare``: bounded range scans of Airflow's unique key) cannot
go. Each run is read by Airflow's names, so both are bounded by requests: a story page reads ``STORY_RUNS`` runs
(one request each), a comparison at most ``COMPARE_INSTANCES`` task instances of each run and ``COMPARE_KEYS``
keys in all, and says where it stopped.

On Airflow 3.4 a key in a dynamic region is matched across runs by its task, its index and the order of its
task's regions in the run (by region id, which Airflow makes from time: the first region created is first);
a region's id differs in every run. The database pages match regions by their path in the DAG, which only the
database records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.translation import gettext as _

from statestore_admin.core.errors import Invalid, NotFound
from statestore_admin.state.addresses import TaskAddress
from statestore_admin.state.listing import Listing, RunItem

STORY_RUNS = 25
COMPARE_INSTANCES = 500
COMPARE_KEYS = 20_000
PAGE = 100


@dataclass
class StoryEntry:
    run: RunItem
    row: object | None  # the key in this run (a task key row), None when that run has none


def key_across_runs(source, address: TaskAddress, key: str, offset: int, *, scope) -> tuple[list[StoryEntry], Listing]:
    """``key`` of ``address``'s task, at its index, in the DAG's runs newest first, ``STORY_RUNS`` runs a page
    from ``offset``. A key in a region is looked for in the same place of each run (``_slots``)."""
    runs = source.dag_runs(address.dag_id, offset, STORY_RUNS, scope=scope)
    place = None
    if address.in_region:
        origin = _slots(source.run_instances(address.dag_id, address.run_id, scope=scope), address.task_id)
        place = origin.get(address.region_id)
    entries = []
    for run in runs.items:
        where = _same_place(source, address, run, place, scope) if address.in_region else _moved(address, run.run_id)
        row = None
        if where is not None:
            try:
                row = source.task_key(where, key, scope=scope)
            except NotFound:  # no such key in this run (or no such task instance)
                row = None
        entries.append(StoryEntry(run, row))
    return entries, runs


def _moved(address: TaskAddress, run_id: str) -> TaskAddress:
    return TaskAddress(address.dag_id, run_id, address.task_id, address.map_index, address.region_id)


def _slots(instances, task_id: str) -> dict:
    """The place of each region of ``task_id`` in a run: the order of its region ids."""
    regions = sorted({i.address.region_id for i in instances if i.task_id == task_id and i.in_region}, key=str)
    return {region: number for number, region in enumerate(regions)}


def _same_place(source, address: TaskAddress, run: RunItem, place: int | None, scope) -> TaskAddress | None:
    """The task instance of ``run`` at the same place as ``address`` (its region's order ``place``)."""
    slots = _slots(source.run_instances(run.dag_id, run.run_id, scope=scope), address.task_id)
    region = {number: region for region, number in slots.items()}.get(place)
    return None if region is None else TaskAddress(run.dag_id, run.run_id, address.task_id, address.map_index, region)


@dataclass
class Compared:
    """One key in both runs, by its place: task, region's order (None outside regions), index, key."""

    task_id: str
    slot: int | None
    index: int
    key: str
    a: object | None  # its row in run a, None when a has no such key
    b: object | None
    diff: dict | None = None  # the faces' short diff of a changed value


@dataclass
class Comparison:
    added: list[Compared] = field(default_factory=list)
    removed: list[Compared] = field(default_factory=list)
    changed: list[Compared] = field(default_factory=list)
    same: int = 0
    stopped: str = ""  # why it stopped before the end, "" when it compared everything


def _keys_of_run(source, run: RunItem, scope, budget: list[int]) -> tuple[dict, str]:
    """Every key of ``run`` by its place (task, region's order, index, key), within the budget."""
    instances = source.run_instances(run.dag_id, run.run_id, scope=scope)
    stopped = ""
    if len(instances) > COMPARE_INSTANCES:
        instances = instances[:COMPARE_INSTANCES]
        stopped = _("Compared the first %(n)s task instances of each run.") % {"n": COMPARE_INSTANCES}
    slots = {}
    for instance in instances:
        if instance.in_region and instance.task_id not in slots:
            slots[instance.task_id] = _slots(instances, instance.task_id)
    found = {}
    for instance in instances:
        slot = slots[instance.task_id][instance.address.region_id] if instance.in_region else None
        offset = 0
        while True:
            rows, total = source.task_keys_page(instance.address, offset, PAGE, scope=scope)
            for row in rows:
                found[(instance.task_id, slot, instance.index, row.key)] = row
            offset += len(rows)
            budget[0] -= len(rows)
            if budget[0] <= 0:
                return found, _("Compared the first %(n)s keys.") % {"n": COMPARE_KEYS}
            if not rows or offset >= total:
                break
    return found, stopped


def compare_runs(source, dag_id: str, a: str, b: str, *, scope) -> tuple[RunItem, RunItem, Comparison]:
    """Runs ``a`` and ``b`` of ``dag_id`` key by key."""
    if not a or not b:
        raise Invalid({"a": _("Name two runs to compare: a and b.")})
    run_a, run_b = source.dag_run(dag_id, a, scope=scope), source.dag_run(dag_id, b, scope=scope)
    budget = [COMPARE_KEYS]
    keys_a, stopped_a = _keys_of_run(source, run_a, scope, budget)
    keys_b, stopped_b = _keys_of_run(source, run_b, scope, budget)
    result = Comparison(stopped=stopped_a or stopped_b)
    for place in sorted(set(keys_a) | set(keys_b), key=lambda p: (p[0], -1 if p[1] is None else p[1], p[2], p[3])):
        entry = Compared(*place, keys_a.get(place), keys_b.get(place))
        if entry.a is None:
            result.added.append(entry)
        elif entry.b is None:
            result.removed.append(entry)
        elif entry.a.value != entry.b.value:
            result.changed.append(entry)
        else:
            result.same += 1
    return run_a, run_b, result
