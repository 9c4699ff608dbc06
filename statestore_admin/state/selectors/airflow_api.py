"""The reads behind Airflow's ``/api/v2`` state routes: offset pages with ``total_entries`` over one
task instance or asset, and one key, as Airflow answers them."""

from __future__ import annotations

from django.utils.translation import gettext as _

from statestore_admin.access.reach import scoped_assets
from statestore_admin.access.scopes import Scope
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.core.errors import NotFound
from statestore_admin.state.addresses import TaskAddress, address_key, address_key_page


def task_keys_page(address: TaskAddress, offset: int, limit: int, *, scope: Scope):
    """One page of a task instance's keys by key, and their number (an unknown task instance has none). On
    Airflow 3.4 the address's region is part of it: another iteration's keys are not these."""
    scope.require_dag(address.dag_id)
    return address_key_page(address, offset, limit)


def task_key_in(address: TaskAddress, key: str, *, scope: Scope) -> TaskStateStore:
    scope.require_dag(address.dag_id)
    row = address_key(address, key)
    if row is None:
        raise NotFound(_("Task state store key %(key)r not found") % {"key": key})
    return row


def require_asset(asset_id: int, *, scope: Scope) -> None:
    if not scoped_assets(scope).filter(pk=asset_id).exists():
        raise NotFound(_("Asset with id %(id)s not found") % {"id": asset_id})


def asset_keys_page(asset_id: int, offset: int, limit: int, *, scope: Scope):
    require_asset(asset_id, scope=scope)
    rows = AssetStateStore.objects.filter(asset_id=asset_id)
    return list(rows.order_by("key")[offset : offset + limit]), rows.count()


def asset_key_in(asset_id: int, key: str, *, scope: Scope) -> AssetStateStore:
    require_asset(asset_id, scope=scope)
    row = AssetStateStore.objects.filter(asset_id=asset_id, key=key).first()
    if row is None:
        raise NotFound(_("Asset state store key %(key)r not found") % {"key": key})
    return row
