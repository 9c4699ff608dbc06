"""The dry run (the GC page's preview, ``gc/dry-run``, ``state_store_clean --dry-run``): what a run would
delete, as data (``DryRunSummary``; ``as_dict`` is the API's and ``--dry-run --json``'s shape).

It costs the same at any table size: exact up to ``DRY_RUN_EXACT_CAP`` expired rows, past it the planner's
estimate and the latest statistics snapshot's figures by DAG, labelled as such.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import connections
from django.db.models import Count, Max, Min
from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.access.scopes import Scope
from statestore_admin.airflow.config import AirflowConfig
from statestore_admin.airflow.models import TaskStateStore, worker_ref_of
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.versions import schema_of
from statestore_admin.core import counting, formatting, values
from statestore_admin.gc import sql
from statestore_admin.gc.plan import GcPlan, expired_rows
from statestore_admin.gc.storage import ExpiredReferences, object_storage
from statestore_admin.objects import store as objects
from statestore_admin.objects.backends import BackendStatus, backend_status
from statestore_admin.records.models import GcRun, StatsSnapshotDag
from statestore_admin.stats import snapshots as stats


def _expired_references(plan: GcPlan, store: objects.Storage, cap: int, rows: int) -> ExpiredReferences:
    """Classify the references among at most ``cap + 1`` expired rows (bounded, whatever the table size);
    ``rows`` is the dry run's bounded count (``counting.count_up_to``)."""
    values = sql.expired_reference_values(plan, cap)
    kinds = [objects.classify(ref, store).kind for v in values if isinstance(ref := worker_ref_of(v), str)]
    inline = kinds.count(objects.INLINE)
    found = kinds.count(objects.OBJECT)
    return ExpiredReferences(rows, rows <= cap, found, inline, len(kinds) - inline - found)


# The dry run counts expired rows exactly up to this many (a count of at most DRY_RUN_EXACT_CAP + 1 rows read
# through the expires_at index); beyond it the rows are the planner's estimate and the DAGs come from the
# latest statistics snapshot, so that the answer costs the same at 20 thousand keys and at 10 million.
DRY_RUN_EXACT_CAP = 10_000


@dataclass(frozen=True)
class DryRunSummary:
    """What a run would delete. ``rows`` is exact unless ``rows_more_than`` is set (the exact count stopped
    past that cap): then ``rows`` is the planner's estimate (``rows_estimated``, PostgreSQL, with the
    ``statistics`` it comes from) or None (SQLite). Past the cap on stale statistics PostgreSQL first counts
    exactly within the count budget (``rows_counted_in_budget``; ``counting.count_within``).
    ``by_dag`` and ``dags`` come from the expired rows (``by_dag_source`` "exact"), or past the cap from the
    latest statistics snapshot ("snapshot": its ``expired`` figures as of ``snapshot_taken_at``), or are
    unknown (None: no snapshot)."""

    plan: GcPlan
    backend: BackendStatus
    rows: int | None
    dags: int | None
    by_dag: list[tuple[str, int]]
    oldest: datetime | None
    newest: datetime | None
    sample: list[TaskStateStore]
    rows_estimated: bool = False
    rows_more_than: int | None = None
    by_dag_source: str | None = "exact"
    snapshot_taken_at: datetime | None = None
    answered_at: datetime = field(default_factory=timezone.now)
    references: ExpiredReferences | None = None  # the plan is with_objects
    regions: bool = False  # Airflow 3.4's schema: rows are addressed by region_id and region_index
    rows_counted_in_budget: bool = False  # past the cap, PostgreSQL counted them all within the count budget
    statistics: counting.Statistics | None = None  # rows_estimated: the statistics of the estimate

    @property
    def estimate_basis(self) -> str:
        """Where the estimated rows come from ("from statistics last refreshed 3 days ago"), or ""."""
        return self.statistics.basis(self.answered_at) if self.rows_estimated and self.statistics else ""

    def coordinates(self, row) -> str:
        """A sample row's task instance index as Airflow's own dry run names it."""
        return formatting.task_index(row.map_index, row.region_id, regions=self.regions)

    @property
    def cutoff(self) -> datetime:
        return self.plan.cutoff

    @property
    def message(self) -> str:
        if self.backend.is_metastore:
            return ""
        return _("Nothing would be deleted: [state_store] backend is %(reason)s.") % {"reason": self.backend.reason}

    @property
    def snapshot_age_seconds(self) -> float | None:
        if self.snapshot_taken_at is None:
            return None
        return max((self.answered_at - self.snapshot_taken_at).total_seconds(), 0.0)

    def as_dict(self) -> dict:
        """The summary as the API (``gc/dry-run``) and ``state_store_clean --dry-run --json`` print it."""
        age = self.snapshot_age_seconds
        return {
            "dry_run": True,
            "outcome": "dry_run" if self.backend.is_metastore else GcRun.Outcome.SKIPPED.value,
            "message": self.message,
            "backend": self.backend.backend,
            "backend_is_metastore": self.backend.is_metastore,
            "reason": self.backend.reason,
            "cutoff": formatting.iso(self.plan.cutoff),
            "dag_ids": list(self.plan.dag_ids),
            "rows": self.rows,
            "rows_estimated": self.rows_estimated,
            "rows_more_than": self.rows_more_than,
            "dags": self.dags,
            "by_dag": [{"dag_id": dag_id, "rows": rows} for dag_id, rows in self.by_dag],
            "by_dag_source": self.by_dag_source,
            "snapshot_taken_at": formatting.iso(self.snapshot_taken_at),
            "snapshot_age_seconds": round(age, 1) if age is not None else None,
            "oldest_expiry": formatting.iso(self.oldest),
            "newest_expiry": formatting.iso(self.newest),
            "sample": [
                {
                    "key": r.key,
                    "value": values.decoded(r.value),
                    "updated_at": formatting.iso(r.updated_at),
                    "expires_at": formatting.iso(r.expires_at),
                    "dag_id": r.dag_id,
                    "run_id": r.run_id,
                    "task_id": r.task_id,
                    "map_index": r.map_index,
                }
                | ({"region_id": str(r.region_id), "region_index": r.map_index} if self.regions else {})
                for r in self.sample
            ],
        } | ({"objects": self.references.as_dict()} if self.references else {})


def _snapshot_by_dag(plan: GcPlan, top: int) -> tuple[datetime | None, int | None, list[tuple[str, int]]]:
    """The latest snapshot's expired rows by DAG: (taken_at, DAGs with expired rows, the top ones), read once
    per snapshot (``stats.kept``: a snapshot never changes, and it has a row per DAG)."""
    latest = stats.latest_snapshot_id()
    if latest is None:
        return None, None, []
    pk, taken_at = latest

    def compute():
        dags = StatsSnapshotDag.objects.filter(snapshot_id=pk, expired__gt=0)
        if plan.dag_ids:
            dags = dags.filter(dag_id__in=plan.dag_ids)
        return dags.count(), list(dags.order_by("-expired", "dag_id").values_list("dag_id", "expired")[:top])

    def valid(value) -> bool:
        return (
            isinstance(value, list)
            and len(value) == 2
            and stats.is_count(value[0])
            and stats.is_rows(value[1], lambda dag_id: isinstance(dag_id, str), stats.is_count)
        )

    dags, top_dags = stats.kept("gc-by-dag", (pk, plan.dag_ids, top), compute, valid)
    return taken_at, dags, [(dag_id, rows) for dag_id, rows in top_dags]  # kept as JSON: lists


def dry_run(
    plan: GcPlan, top: int = 10, sample: int = 5, config: AirflowConfig | None = None, *, scope: Scope
) -> DryRunSummary:
    """What a run would delete, in a bounded number of bounded queries whatever the table size. GC spans
    every DAG: a user with a ``scope`` may not preview it (Forbidden).

    Up to ``DRY_RUN_EXACT_CAP`` expired rows everything is exact. Past it: the rows are the planner's
    estimate (PostgreSQL; at least the cap + 1), the DAGs come from the latest statistics snapshot (or are
    not counted), the oldest and newest expiry are the two ends of the expires_at index range, and the
    sample its first rows. With a backend other than the metastore's nothing would be deleted: the summary
    says so and counts nothing.
    """
    scope.require_unrestricted(_("Garbage collection"))
    store = object_storage(config) if plan.with_objects else None  # GcMisconfigured
    status = backend_status(config)
    if not status.is_metastore:
        return DryRunSummary(plan, status, 0, 0, [], None, None, [])
    regions = schema_of(connections[airflow_alias()]).regions
    rows = expired_rows(plan.cutoff, plan.dag_ids)
    examples = list(rows.order_by("expires_at", "id")[:sample])
    cap = DRY_RUN_EXACT_CAP
    counted = counting.count_up_to(rows.order_by(), cap + 1)  # an index-only walk of expires_at's index
    references = _expired_references(plan, store, cap, counted) if store else None
    if counted <= cap:
        stats = rows.aggregate(dags=Count("dag_id", distinct=True), oldest=Min("expires_at"), newest=Max("expires_at"))
        by_dag = list(
            rows.values("dag_id").annotate(n=Count("id")).order_by("-n", "dag_id").values_list("dag_id", "n")[:top]
        )
        return DryRunSummary(
            plan,
            status,
            counted,
            stats["dags"],
            by_dag,
            stats["oldest"],
            stats["newest"],
            examples,
            references=references,
            regions=regions,
        )
    ends = rows.aggregate(oldest=Min("expires_at"), newest=Max("expires_at"))  # two index lookups
    taken_at, dags, by_dag = _snapshot_by_dag(plan, top)
    statistics = counting.table_statistics(TaskStateStore._meta.db_table)
    # Stale statistics (never analysed, much changed): the planner may be far off, so count exactly if that
    # takes no longer than the count budget (PostgreSQL).
    exact = counting.count_within(rows) if statistics is None or statistics.stale else None
    estimate = None
    if exact is None:
        connection = connections[airflow_alias()]
        estimate = sql.estimated_rows(connection, sql.expired_where(plan.dag_ids), sql.expired_params(plan))
    return DryRunSummary(
        plan,
        status,
        exact if exact is not None else None if estimate is None else max(estimate, cap + 1),
        dags,
        by_dag,
        ends["oldest"],
        ends["newest"],
        examples,
        rows_estimated=estimate is not None,
        rows_more_than=None if exact is not None else cap,
        rows_counted_in_budget=exact is not None,
        statistics=statistics if estimate is not None else None,
        by_dag_source="snapshot" if taken_at else None,
        snapshot_taken_at=taken_at,
        references=references,
        regions=regions,
    )
