"""Where the state store's keys are read and written: Airflow's metadata database, or Airflow's REST API when
the dashboard has no database (managed Airflow, ``AIRFLOW_API_URL``). ``current()`` gives the one this
deployment uses; both implement ``Source``, the operations Airflow's own state routes offer (a task instance's
or an asset's keys: list, read, set, patch, delete, clear), with the dashboard's rules on top in both: the
actor's permissions and access scope, the audit trail (recorded before Airflow changes), and Airflow's errors
as the domain's (``core.errors``); and what the browsing pages list (``listing``: DAGs, runs, task
instances, assets). A face asks ``current()`` and never knows which one answers."""

from __future__ import annotations

from typing import Protocol

from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import Scope
from statestore_admin.airflow import rest
from statestore_admin.core.values import Expiry
from statestore_admin.state.addresses import TaskAddress
from statestore_admin.state.listing import AssetItem, InstanceItem, Listing, RunItem
from statestore_admin.state.services.outcomes import Outcome


class Source(Protocol):
    def require_task_instance(self, address: TaskAddress) -> None: ...

    def find_task_instance(self, address: TaskAddress, *, scope: Scope) -> None: ...

    def task_keys_page(self, address: TaskAddress, offset: int, limit: int, *, scope: Scope) -> tuple[list, int]: ...

    def task_key(self, address: TaskAddress, key: str, *, scope: Scope): ...

    def set_task_key(self, *, actor: Actor, address: TaskAddress, key: str, value, expiry: Expiry) -> None: ...

    def patch_task_key(self, *, actor: Actor, address: TaskAddress, key: str, value) -> None: ...

    def delete_task_key(self, *, actor: Actor, address: TaskAddress, key: str) -> Outcome: ...

    def clear_task_instance(self, *, actor: Actor, address: TaskAddress, all_map_indices: bool) -> Outcome: ...

    def asset_keys_page(self, asset_id: int, offset: int, limit: int, *, scope: Scope) -> tuple[list, int]: ...

    def asset_key(self, asset_id: int, key: str, *, scope: Scope): ...

    def set_asset_key(self, *, actor: Actor, asset_id: int, key: str, value) -> None: ...

    def delete_asset_key(self, *, actor: Actor, asset_id: int, key: str) -> Outcome: ...

    def clear_asset(self, *, actor: Actor, asset_id: int) -> Outcome: ...

    # What the browsing pages list (``listing``): the same items, order and filters from both.
    def dags(self, contains: str, offset: int, limit: int, *, scope: Scope) -> Listing: ...

    def dag_runs(self, dag_id: str, offset: int, limit: int, *, scope: Scope) -> Listing: ...

    def dag_run(self, dag_id: str, run_id: str, *, scope: Scope) -> RunItem: ...

    def run_instances(self, dag_id: str, run_id: str, *, scope: Scope) -> list[InstanceItem]: ...

    def assets(self, contains: str, offset: int, limit: int, *, scope: Scope) -> Listing: ...

    def asset(self, asset_id: int, *, scope: Scope) -> AssetItem: ...


def current() -> Source:
    if rest.api_mode():
        from statestore_admin.state.sources.airflow_api import ApiSource

        return ApiSource(rest.client())
    from statestore_admin.state.sources.database import DatabaseSource

    return DatabaseSource()


__all__ = ["Source", "current"]
