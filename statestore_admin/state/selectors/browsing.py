"""What the browsing pages list, read from Airflow's metadata database: DAGs, a DAG's runs, a run's task
instances (the current ones: on Airflow 3.4, an execution a clear replaced is not listed) and assets, in the
order and with the filters Airflow's REST API applies, so that ``sources.airflow_api`` lists the same."""

from __future__ import annotations

from django.db.models import Exists, OuterRef
from django.utils.translation import gettext as _

from statestore_admin.access.reach import scoped_assets
from statestore_admin.access.scopes import Scope
from statestore_admin.airflow.models import AssetActive, Dag, DagRun, TaskInstance
from statestore_admin.core.errors import NotFound
from statestore_admin.state.addresses import TaskAddress
from statestore_admin.state.listing import (
    MAX_INSTANCES,
    AssetItem,
    DagItem,
    InstanceItem,
    Listing,
    RunItem,
    instance_order,
)


def dags(contains: str, offset: int, limit: int, *, scope: Scope) -> Listing:
    """DAGs whose id contains ``contains`` (any case), by id; a stale DAG (its file is gone) is not listed."""
    rows = Dag.objects.filter(is_stale=False).filter(scope.dag_q())
    if contains:
        rows = rows.filter(dag_id__icontains=contains)
    items = [DagItem(d.dag_id, d.is_paused) for d in rows.order_by("dag_id")[offset : offset + limit]]
    return Listing(items, rows.count(), offset, limit)


def _run(row: DagRun) -> RunItem:
    return RunItem(row.dag_id, row.run_id, row.state, row.run_type, row.logical_date, row.run_after)


def dag_runs(dag_id: str, offset: int, limit: int, *, scope: Scope) -> Listing:
    """A DAG's runs, newest first (``run_after``, then the run id)."""
    scope.require_dag(dag_id)
    rows = DagRun.objects.filter(dag_id=dag_id)
    page = rows.order_by("-run_after", "-run_id")[offset : offset + limit]
    return Listing([_run(r) for r in page], rows.count(), offset, limit)


def dag_run(dag_id: str, run_id: str, *, scope: Scope) -> RunItem:
    scope.require_dag(dag_id)
    row = DagRun.objects.filter(dag_id=dag_id, run_id=run_id).first()
    if row is None:
        raise NotFound(
            _("The DagRun with dag_id: `%(dag_id)s` and run_id: `%(run_id)s` was not found")
            % {
                "dag_id": dag_id,
                "run_id": run_id,
            }
        )
    return _run(row)


def run_instances(dag_id: str, run_id: str, *, scope: Scope) -> list[InstanceItem]:
    """A run's current task instances by task, region and index (at most ``MAX_INSTANCES``)."""
    dag_run(dag_id, run_id, scope=scope)
    rows = TaskInstance.objects.filter(dag_id=dag_id, run_id=run_id, working_set=True)
    fields = ("task_id", "map_index", "region_id", "state", "try_number")
    items = [
        InstanceItem(TaskAddress(dag_id, run_id, task_id, index, region), state, tries)
        for task_id, index, region, state, tries in rows.values_list(*fields)[:MAX_INSTANCES]
    ]
    return sorted(items, key=instance_order)


def _asset(row) -> AssetItem:
    return AssetItem(row.id, row.name, row.uri, row.group)


def assets(contains: str, offset: int, limit: int, *, scope: Scope) -> Listing:
    """Active assets whose name contains ``contains`` (any case), by id."""
    active = AssetActive.objects.filter(name=OuterRef("name"), uri=OuterRef("uri"))
    rows = scoped_assets(scope).defer("extra").filter(Exists(active))
    if contains:
        rows = rows.filter(name__icontains=contains)
    return Listing([_asset(a) for a in rows.order_by("id")[offset : offset + limit]], rows.count(), offset, limit)


def asset(asset_id: int, *, scope: Scope) -> AssetItem:
    row = scoped_assets(scope).defer("extra").filter(pk=asset_id).first()
    if row is None:
        raise NotFound(_("Asset with id %(id)s not found") % {"id": asset_id})
    return _asset(row)
