"""Reads of the state store. Views, the API and commands call these; they hold no SQL of their own."""

from dataclasses import dataclass

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore


@dataclass(frozen=True)
class StoreTotals:
    task_keys: int
    asset_keys: int


def store_totals() -> StoreTotals:
    return StoreTotals(task_keys=TaskStateStore.objects.count(), asset_keys=AssetStateStore.objects.count())
