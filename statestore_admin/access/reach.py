"""What an access scope reaches: the DAGs with state (kept a short while for scoped users), and the task
keys, assets and asset keys inside a scope."""

from __future__ import annotations

from django.core.cache import cache
from django.db import connections
from django.db.models import (
    QuerySet,
)

from statestore_admin.access.scopes import Scope
from statestore_admin.airflow.models import Asset, AssetStateStore, TaskStateStore
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.core.index_scan import DISTINCT_DAGS

DAG_IDS_CACHE_SECONDS = 30  # how long scoped users' pages reuse the list of DAGs with state


def all_dag_ids_with_state() -> list[str]:
    """Every dag_id of task_state_store, by a loose index scan of its lookup index (one probe per DAG: 25-40 ms
    at 2,000 DAGs), kept ``DAG_IDS_CACHE_SECONDS`` in the cache (``CACHE_URL``): a scoped user's first view of
    a brand-new DAG may wait that long. What a scope allows is decided on these names only; the state itself
    is always read live."""
    cached = cache.get(_DAG_IDS_CACHE_KEY)
    # Only a list of ids is one: anything else there (another release's value) is read afresh.
    if isinstance(cached, list) and all(isinstance(dag_id, str) for dag_id in cached):
        return cached
    with connections[airflow_alias()].cursor() as db:
        db.execute(DISTINCT_DAGS.format(like="", like_t=""), ["", 2**31 - 1])
        dag_ids = [row[0] for row in db.fetchall()]
    cache.set(_DAG_IDS_CACHE_KEY, dag_ids, DAG_IDS_CACHE_SECONDS)
    return dag_ids


_DAG_IDS_CACHE_KEY = "statestore:dag-ids-with-state"


def scoped_dag_ids(scope: Scope) -> list[str] | None:
    """The DAGs with state that ``scope`` allows (None: every DAG). Matching is done on the distinct
    dag_ids, so that the state table is then read by ``dag_id IN (…)``, a range of its lookup index, and
    never scanned with a pattern."""
    if scope.all_dags:
        return None
    if "dag_ids" not in scope.memo:
        scope.memo["dag_ids"] = [dag_id for dag_id in all_dag_ids_with_state() if scope.allows_dag(dag_id)]
    return scope.memo["dag_ids"]


def scoped_task_keys(scope: Scope, rows: QuerySet | None = None) -> QuerySet:
    rows = TaskStateStore.objects.all() if rows is None else rows
    dag_ids = scoped_dag_ids(scope)
    return rows if dag_ids is None else rows.filter(dag_id__in=dag_ids)


def scoped_assets(scope: Scope) -> QuerySet:
    return Asset.objects.filter(scope.asset_q())


def scoped_asset_keys(scope: Scope, rows: QuerySet | None = None) -> QuerySet:
    rows = AssetStateStore.objects.all() if rows is None else rows
    return rows if scope.all_assets else rows.filter(asset__in=scoped_assets(scope).values("pk"))
