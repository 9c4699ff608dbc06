"""The dates, run ids and expiries of the demo's DAG runs and keys, shared by the demo deployment (``data``), its
Airflow 3.4 regions (``regions``) and the scale data (``scale``): runs anchored on today (UTC), ids as the
scheduler names them, expiries relative to now."""

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
