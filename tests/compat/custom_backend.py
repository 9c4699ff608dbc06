"""A custom [state_store] backend (not the metastore one), importable by Airflow in the compat stage."""

from airflow.state import BaseStoreBackend


class InMemoryBackend(BaseStoreBackend):
    def get(self, scope, key, **kwargs):
        return None

    def set(self, scope, key, value, **kwargs):
        return None

    def delete(self, scope, key, **kwargs):
        return None

    def clear(self, scope, **kwargs):
        return None

    async def aget(self, scope, key, **kwargs):
        return None

    async def aset(self, scope, key, value, **kwargs):
        return None

    async def adelete(self, scope, key, **kwargs):
        return None

    async def aclear(self, scope, **kwargs):
        return None
