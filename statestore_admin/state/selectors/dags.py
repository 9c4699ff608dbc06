"""The DAGs and runs with state: the DAG list (a loose index scan on PostgreSQL; a filter of the ids that
contain a text, or start with a prefix; scoped pages) and a DAG's runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import (
    Count,
    Exists,
    Max,
    OuterRef,
    Q,
    QuerySet,
)
from django.utils.translation import gettext as _

from statestore_admin.access.reach import all_dag_ids_with_state, scoped_dag_ids
from statestore_admin.access.scopes import Scope
from statestore_admin.airflow import rest
from statestore_admin.airflow.models import DagRun, TaskStateStore
from statestore_admin.core.counting import EXACT, row_count
from statestore_admin.core.errors import NotFound
from statestore_admin.core.index_scan import codepoint_order, distinct_dags
from statestore_admin.core.pagination import Page, decode_cursor, encode_cursor, paginate
from statestore_admin.core.status import EXPIRED, status_filter
from statestore_admin.records.models import StatsSnapshotDag
from statestore_admin.state import api_errors
from statestore_admin.stats.figures import STATS_COMMAND
from statestore_admin.stats.snapshots import latest_snapshot


@dataclass(frozen=True)
class DagSummary:
    """One DAG's task state: ``source`` "live" (counted now), "snapshot" (as of the snapshot) or
    "missing" (not in the last snapshot: newer than it); the figures are None unless counted."""

    dag_id: str
    keys: int | None
    runs: int | None
    expired: int | None
    last_updated: datetime | None
    source: str = "live"


@dataclass(frozen=True)
class DagList:
    """A page of DAGs; ``source``: "live" (small table), "snapshot" (figures of the snapshot taken at
    ``taken_at``) or "none" (a large table and no snapshot yet: the DAGs without figures; run ``command``)."""

    page: Page
    source: str
    taken_at: datetime | None = None
    command: str = STATS_COMMAND


def dag_prefix_q(prefix: str) -> tuple[Q, bool]:
    """The rows whose dag_id starts with ``prefix`` (a DAG filter, as the DAG list's), and whether the lookup
    index serves them: as one range of it where dag_id sorts by code point (see ``codepoint_order``)."""
    condition = Q(dag_id__startswith=prefix)
    if not codepoint_order():
        return condition, False
    if ord(prefix[-1]) < 0x10FFFF:
        condition &= Q(dag_id__gte=prefix, dag_id__lt=prefix[:-1] + chr(ord(prefix[-1]) + 1))
    return condition, True


def dags_containing(text: str, *, scope: Scope) -> list[str]:
    """The DAGs with state in ``scope`` whose id contains ``text``, ignoring case, in id order: the one rule of
    a DAG filter typed by a person (the DAG list's, the Search page's), as the asset filters match names and
    URIs. Matched on the distinct dag_ids (``all_dag_ids_with_state``: one index probe a DAG, kept a short
    while), so that the keys are then read by ``dag_id IN (…)``, ranges of the lookup index."""
    needle = text.casefold()
    allowed = scoped_dag_ids(scope)
    return [d for d in (all_dag_ids_with_state() if allowed is None else allowed) if needle in d.casefold()]


def _literal_prefix(pattern: str) -> str:
    for n, char in enumerate(pattern):
        if char in "*?":
            return pattern[:n]
    return pattern


_SCAN_CHUNK = 200


def _scoped_dag_page(scope: Scope, after: str, prefix: str, size: int) -> list[str]:
    """The first ``size`` + 1 DAGs of a scoped user after ``after`` starting with ``prefix``: a loose index
    scan under each pattern's literal prefix (etl_ for etl_*), so that the user's page costs probes of
    their DAGs, not of every DAG. A pattern starting with a wildcard: every dag_id, matched in Python."""
    prefixes = set()
    for pattern in scope.dags:
        start = _literal_prefix(pattern)
        if not start:
            return [d for d in scoped_dag_ids(scope) if d > after and d.startswith(prefix)][: size + 1]
        if start.startswith(prefix) or prefix.startswith(start):
            prefixes.add(max(start, prefix, key=len))
    found, ranged = set(), codepoint_order() if prefixes else False
    for start in {p for p in prefixes if not any(p != q and p.startswith(q) for q in prefixes)}:
        position, matches = after, 0
        while matches <= size:
            chunk = distinct_dags(position, start, _SCAN_CHUNK, ranged)
            for dag_id in chunk:
                if scope.allows_dag(dag_id) and dag_id.startswith(prefix) and dag_id.startswith(start):
                    found.add(dag_id)
                    matches += 1
            if len(chunk) < _SCAN_CHUNK:
                break
            position = chunk[-1]
    return sorted(found)[: size + 1]


def dags_with_state(
    now: datetime,
    cursor: str | None = None,
    prefix: str = "",
    size: int = 50,
    *,
    scope: Scope,
    contains: str = "",
) -> DagList:
    """DAGs that have task state, by dag_id, found by a loose index scan of (dag_id, …), and their figures:
    counted live on a small table; on a large one (above ``ESTIMATE_ABOVE`` rows) read from the latest
    snapshot's per-DAG rows (a DAG newer than it: "missing"), none without a snapshot. ``contains``: only the
    DAGs whose id contains it (``dags_containing``); ``prefix``: only those starting with it."""
    decoded = decode_cursor(cursor, 1)
    after = decoded[0] if decoded and isinstance(decoded[0], str) else ""
    if contains:
        dag_ids = [d for d in dags_containing(contains, scope=scope) if d > after and d.startswith(prefix)]
        dag_ids = sorted(dag_ids)[: size + 1]
    elif scope.all_dags:
        dag_ids = distinct_dags(after, prefix, size + 1, bool(prefix) and codepoint_order())
    else:
        dag_ids = _scoped_dag_page(scope, after, prefix, size)
    more = len(dag_ids) > size
    dag_ids = dag_ids[:size]
    page = Page([], encode_cursor([dag_ids[-1]]) if more else None, cursor)
    if row_count(TaskStateStore).how == EXACT:
        stats = _key_stats(
            TaskStateStore.objects.filter(dag_id__in=dag_ids), "dag_id", now, runs=Count("dag_run", distinct=True)
        )
        page.items = [
            DagSummary(d, stats[d]["keys"], stats[d]["runs"], stats[d]["expired"], stats[d]["last_updated"])
            for d in dag_ids
            if d in stats
        ]
        return DagList(page, "live")
    snapshot = latest_snapshot()
    if snapshot is None:
        page.items = [DagSummary(d, None, None, None, None, source="missing") for d in dag_ids]
        return DagList(page, "none")
    rows = {row.dag_id: row for row in StatsSnapshotDag.objects.filter(snapshot=snapshot, dag_id__in=dag_ids)}
    page.items = [
        DagSummary(d, r.keys, r.runs, r.expired, r.last_updated, source="snapshot")
        if (r := rows.get(d))
        else DagSummary(d, None, None, None, None, source="missing")
        for d in dag_ids
    ]
    return DagList(page, "snapshot", snapshot.taken_at)


def _key_stats(rows: QuerySet, by: str, now: datetime, **more) -> dict:
    """The keys of ``rows`` by ``by`` (a DAG, a run): how many, how many expired, when last updated, and the
    ``more`` counts, in one query."""
    counted = rows.values(by).annotate(
        keys=Count("id"),
        **more,
        expired=Count("id", filter=status_filter(EXPIRED, now)),
        last_updated=Max("updated_at"),
    )
    return {row[by]: row for row in counted}


def runs_with_state(dag_id: str, now: datetime, cursor: str | None = None, size: int = 50, *, scope: Scope) -> Page:
    """The DAG's runs that have task state, newest first, with their key counts: two queries. A DAG out
    of ``scope`` is Forbidden, whether it exists or not."""
    scope.require_dag(dag_id)
    runs = DagRun.objects.filter(dag_id=dag_id).filter(Exists(TaskStateStore.objects.filter(dag_run=OuterRef("pk"))))
    page = paginate(runs, ["-id"], cursor, size)
    rows = TaskStateStore.objects.filter(dag_run__in=[r.id for r in page.items])
    stats = _key_stats(rows, "dag_run", now, tasks=Count("task_id", distinct=True))
    for run in page.items:
        row = stats.get(run.id, {})
        run.keys, run.tasks = row.get("keys", 0), row.get("tasks", 0)
        run.expired, run.last_updated = row.get("expired", 0), row.get("last_updated")
    return page


def get_run(run_pk: int, *, scope: Scope) -> DagRun:
    """A run by its id; one of a DAG out of ``scope`` is NotFound, as if it did not exist."""
    run = DagRun.objects.filter(pk=run_pk).first()
    if run is None or not scope.allows_dag(run.dag_id):
        raise NotFound(_("No DAG run with id %(id)s.") % {"id": run_pk})
    return run


def find_run(dag_id: str, run_id: str, *, scope: Scope) -> DagRun:
    """A run by its DAG and run id. Over Airflow's REST API, Airflow says whether it exists, and the run has no
    database id (``pk`` None: there is no page of it to link to)."""
    scope.require_dag(dag_id)
    if rest.api_mode():
        try:
            found = api_errors.call(
                rest.client(), "GET", f"/dags/{rest.segment(dag_id)}/dagRuns/{rest.segment(run_id)}"
            )
        except NotFound:
            found = None
        run = DagRun(dag_id=dag_id, run_id=run_id) if found else None
    else:
        run = DagRun.objects.filter(dag_id=dag_id, run_id=run_id).first()
    if run is None:
        message = _("No DAG run %(run_id)r of DAG %(dag_id)r: it may have been deleted.")
        raise NotFound(message % {"run_id": run_id, "dag_id": dag_id})
    return run
