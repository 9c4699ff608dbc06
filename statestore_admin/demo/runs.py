"""The dates, run ids and expiries of the demo's DAG runs and keys, shared by the demo deployment (``data``), its
Airflow 3.4 regions (``regions``) and the scale data (``scale``): runs anchored on today (UTC), ids as the
scheduler names them.

One story for the dates: a run starts and ends no later than now (a running run has no end yet); a key is written
during its run (between its start and its end, or now); and its expiry is computed from that write as Airflow's
writer computes it (docs/airflow.md): the write's time plus its retention, the default retention
(``[state_store] default_retention_days``) without one, NULL for never. So the keys of the older runs with a
short retention are the expired ones, and those a running run has just written are the ones expiring soon."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from statestore_admin.core.values import AT, Expiry


def day(offset: int) -> datetime:
    today = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    return today + timedelta(days=offset)


def demo_run_id(run_type: str, logical_date: datetime) -> str:
    return f"{run_type}__{logical_date.isoformat()}"


def demo_expiry(expiry: str | timedelta, now: datetime) -> Expiry:
    """A demo key's expiry as the domain's (NEVER, DEFAULT, or the instant ``now + offset``)."""
    return Expiry(AT, now + expiry) if isinstance(expiry, timedelta) else Expiry(expiry)


def run_dates(logical_date: datetime, now: datetime, delay: timedelta, duration: timedelta | None):
    """A new run's ``(start, end)``: ``delay`` after its logical date and lasting ``duration`` (None: still
    running), neither after ``now`` (a demo loaded just after midnight starts today's runs in between)."""
    start = min(logical_date + delay, logical_date + (now - logical_date) / 2)
    return start, None if duration is None else min(start + duration, now)


def written_at(run, now: datetime, after: timedelta | None) -> datetime:
    """When a task of ``run`` wrote a key: ``after`` its run's start, or at its last moment (None: at its end, now
    for a running run, as a task that keeps writing does); never after the end, nor after now."""
    last = min(run.end_date or now, now)
    return last if after is None else max(run.start_date, min(run.start_date + after, last))
