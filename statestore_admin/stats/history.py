"""Statistics snapshots taken on request, beside the commands' (``stats.take_snapshot``): a person's "Take a
snapshot now" on the Insights page (``take_snapshot_for``, permissioned), and the demo's history
(``seed_history``), so that Insights on a fresh demo draws the store over days rather than a single point.

A seeded snapshot is marked ``trigger="demo"``: its figures are the real snapshot's scaled back in time (a
store that grew to what it is now), for a demo to show, never for a real deployment.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.access import policies
from statestore_admin.access.actors import Actor
from statestore_admin.airflow import rest
from statestore_admin.core.errors import Conflict, Forbidden
from statestore_admin.records.models import StatsSnapshot, StatsSnapshotDag
from statestore_admin.stats import snapshots as stats

DEMO_TRIGGER = "demo"
DEMO_DAYS = 14
DAG_FIGURES = ("keys", "bytes", "expired", "expiring", "never")


def offers_snapshot(user) -> bool:
    """Whether a page offers ``user`` "Take a snapshot now": the permission, and Airflow's database to read (not
    its REST API); ``take_snapshot_for`` refuses the same cases, each with its reason."""
    return policies.may_take_snapshot(user) and not rest.api_mode()


def take_snapshot_for(*, actor: Actor) -> StatsSnapshot:
    """A snapshot now, taken by ``actor``'s user (trigger "page"). ``Forbidden`` without the permission;
    ``Conflict`` while another snapshot is being taken (two passes at once would only double the load), and over
    Airflow's REST API (managed Airflow), where the pass cannot read Airflow's tables."""
    if not policies.may_take_snapshot(actor.user):
        raise Forbidden(_("Taking a statistics snapshot needs “Can add stats snapshot” (the Admin role) and no scope."))
    if rest.api_mode():
        raise Conflict(
            _("Read through Airflow's REST API: counts, sizes, search and statistics need Airflow's database.")
        )
    since = timezone.now() - stats.ABANDONED_AFTER
    if StatsSnapshot.objects.filter(status=StatsSnapshot.Status.RUNNING, taken_at__gte=since).exists():
        raise Conflict(_("A statistics snapshot is being taken now; its figures appear here when it is done."))
    return stats.take_snapshot(actor=actor, trigger="page")


def _scaled(value: int, share: float) -> int:
    return int(round(value * share))


def seed_history(days: int = DEMO_DAYS, now: datetime | None = None, *, actor: Actor) -> int:
    """Take a real snapshot, then record one a day for the ``days`` before it, its figures scaled from 60 % up
    to the real ones (with a little weekly swing), so that every chart of Insights has a history. Does nothing
    when a done snapshot exists already (a demo that has history keeps it). Returns the snapshots recorded, each
    recorded as taken by ``actor``."""
    if stats.latest_snapshot() is not None:
        return 0
    real = stats.take_snapshot(actor=actor, trigger=DEMO_TRIGGER)
    now = now or real.taken_at
    dags = list(StatsSnapshotDag.objects.filter(snapshot=real))
    figures = ("task_keys", "task_bytes", "expired", "expiring", "never", "live", "asset_keys", "asset_bytes")
    with transaction.atomic(using=StatsSnapshot.objects.db):
        for day in range(days, 0, -1):
            share = 0.6 + 0.4 * (days - day) / days + (0.03 if day % 7 in (2, 3) else 0.0)
            taken = now - timedelta(days=day)
            past = StatsSnapshot.objects.create(
                taken_at=taken,
                finished_at=taken + timedelta(seconds=2),
                status=StatsSnapshot.Status.DONE,
                trigger=DEMO_TRIGGER,
                actor=real.actor,
                dags=real.dags,
                assets=real.assets,
                expiry_histogram=real.expiry_histogram,
                size_histogram=real.size_histogram,
                top_tasks=real.top_tasks,
                top_assets=real.top_assets,
                **{name: _scaled(getattr(real, name), share) for name in figures},
            )
            StatsSnapshotDag.objects.bulk_create(
                StatsSnapshotDag(
                    snapshot=past,
                    dag_id=d.dag_id,
                    runs=d.runs,
                    last_updated=d.last_updated,
                    **{
                        name: _scaled(getattr(d, name), share)
                        for name in ("keys", "bytes", "expired", "expiring", "never")
                    },
                )
                for d in dags
            )
    return days + 1
