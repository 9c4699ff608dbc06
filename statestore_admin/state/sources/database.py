"""The state store in Airflow's metadata database: the selectors and services every face has always used."""

from __future__ import annotations

from statestore_admin.state import services
from statestore_admin.state.addresses import require_task_instance
from statestore_admin.state.selectors import airflow_api as reads
from statestore_admin.state.selectors import browsing


class DatabaseSource:
    def require_task_instance(self, address):
        require_task_instance(address)

    def find_task_instance(self, address, *, scope):
        scope.require_dag(address.dag_id)
        require_task_instance(address)

    def task_keys_page(self, address, offset, limit, *, scope):
        return reads.task_keys_page(address, offset, limit, scope=scope)

    def task_key(self, address, key, *, scope):
        return reads.task_key_in(address, key, scope=scope)

    def set_task_key(self, *, actor, address, key, value, expiry):
        services.set_task_key(actor=actor, address=address, key=key, value=value, expiry=expiry)

    def patch_task_key(self, *, actor, address, key, value):
        services.patch_task_key(actor=actor, ref=services.TaskKeyRef(address=address, key=key), value=value)

    def delete_task_key(self, *, actor, address, key):
        selection = services.TaskSelection(address=address, keys=(key,))  # needs the task instance, as in Airflow
        return services.delete_task_keys(actor=actor, selection=selection)

    def clear_task_instance(self, *, actor, address, all_map_indices):
        return services.clear_task_instance(actor=actor, address=address, all_map_indices=all_map_indices)

    def asset_keys_page(self, asset_id, offset, limit, *, scope):
        return reads.asset_keys_page(asset_id, offset, limit, scope=scope)

    def asset_key(self, asset_id, key, *, scope):
        return reads.asset_key_in(asset_id, key, scope=scope)

    def set_asset_key(self, *, actor, asset_id, key, value):
        services.set_asset_key(actor=actor, asset_id=asset_id, key=key, value=value)

    def delete_asset_key(self, *, actor, asset_id, key):
        return services.delete_asset_keys(actor=actor, asset_id=asset_id, keys=[key])

    def clear_asset(self, *, actor, asset_id):
        return services.clear_asset(actor=actor, asset_id=asset_id)

    def dags(self, contains, offset, limit, *, scope):
        return browsing.dags(contains, offset, limit, scope=scope)

    def dag_runs(self, dag_id, offset, limit, *, scope):
        return browsing.dag_runs(dag_id, offset, limit, scope=scope)

    def dag_run(self, dag_id, run_id, *, scope):
        return browsing.dag_run(dag_id, run_id, scope=scope)

    def run_instances(self, dag_id, run_id, *, scope):
        return browsing.run_instances(dag_id, run_id, scope=scope)

    def assets(self, contains, offset, limit, *, scope):
        return browsing.assets(contains, offset, limit, scope=scope)

    def asset(self, asset_id, *, scope):
        return browsing.asset(asset_id, scope=scope)
