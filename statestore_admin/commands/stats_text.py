"""The statistics snapshot as the commands print it; the domain (``stats.snapshots``) records and reads it."""

from __future__ import annotations

from statestore_admin.core import formatting
from statestore_admin.core.status import EXPIRING, STATUSES
from statestore_admin.records.models import StatsSnapshot


def snapshot_line(snapshot: StatsSnapshot) -> str:
    """The snapshot in one line, as ``state_store_stats`` and ``state_store_clean`` print it."""
    if snapshot.status != StatsSnapshot.Status.DONE:
        return f"Statistics snapshot {snapshot.pk} {snapshot.status}: {snapshot.error}"
    seconds = snapshot.duration_seconds or 0.0
    size, plural = formatting.size, formatting.plural
    return (
        f"Statistics snapshot {snapshot.pk} as of {formatting.iso(snapshot.taken_at)}: "
        f"{plural(snapshot.task_keys, 'task key')} ({size(snapshot.task_bytes)}) in {plural(snapshot.dags, 'DAG')}, "
        f"{snapshot.expired:,} expired, {snapshot.expiring:,} {STATUSES[EXPIRING]}, {snapshot.never:,} never expiring; "
        f"{plural(snapshot.asset_keys, 'asset key')} ({size(snapshot.asset_bytes)}) on "
        f"{plural(snapshot.assets, 'asset')}; took {formatting.duration(seconds)}."
    )
