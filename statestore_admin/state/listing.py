"""What the browsing reads of a ``Source`` give, the same from Airflow's database and from its REST API: DAGs, a
DAG's runs, a run's task instances and assets, in pages of ``Listing``. Only what both can say is here (Airflow's
API does not count keys across task instances, so neither source does on these pages)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from statestore_admin.state.addresses import TaskAddress

MAX_INSTANCES = 5_000  # task instances of one run that a run page lists (Airflow's API: 50 requests)


@dataclass(frozen=True)
class Listing:
    """One page of a longer list: ``items`` from ``offset``, ``total`` in all."""

    items: list
    total: int
    offset: int
    limit: int

    @property
    def previous_offset(self) -> int | None:
        return max(self.offset - self.limit, 0) if self.offset > 0 else None

    @property
    def next_offset(self) -> int | None:
        return self.offset + self.limit if self.offset + self.limit < self.total else None

    @property
    def last(self) -> int:
        return self.offset + len(self.items)


@dataclass(frozen=True)
class DagItem:
    dag_id: str
    is_paused: bool


@dataclass(frozen=True)
class RunItem:
    dag_id: str
    run_id: str
    state: str | None
    run_type: str
    logical_date: datetime | None
    run_after: datetime | None


@dataclass(frozen=True)
class InstanceItem:
    """A task instance: its address (a region and its index on Airflow 3.4) and what Airflow says of it."""

    address: TaskAddress
    state: str | None
    try_number: int

    @property
    def task_id(self) -> str:
        return self.address.task_id

    @property
    def index(self) -> int:
        return self.address.map_index

    @property
    def in_region(self) -> bool:
        return self.address.in_region

    @property
    def region_id(self) -> str:
        return str(self.address.region_id) if self.address.in_region else ""


@dataclass(frozen=True)
class AssetItem:
    id: int
    name: str
    uri: str
    group: str


def instance_order(item: InstanceItem) -> tuple:
    """A run's task instances in one order in both sources: by task, region, index."""
    return (item.task_id, item.region_id, item.index)


def page_of(items: list, offset: int, limit: int) -> Listing:
    return Listing(items[offset : offset + limit], len(items), offset, limit)
