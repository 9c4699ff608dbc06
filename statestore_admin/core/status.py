"""Key status: the one rule for whether a key is expired, expiring soon, never expiring or live.

Reads, statistics, metrics and the pages all classify keys with these names, labels and conditions,
so the "expiring" window is written once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q
from django.utils.translation import gettext_lazy

EXPIRING_WINDOW = timedelta(hours=24)

EXPIRED, EXPIRING, NEVER, LIVE = "expired", "expiring", "never", "live"
STATUSES = {
    EXPIRED: gettext_lazy("expired, awaiting GC"),
    EXPIRING: gettext_lazy("expiring within 24 h"),
    NEVER: gettext_lazy("never expires"),
    LIVE: gettext_lazy("not expired"),
}


def status_of(expires_at: datetime | None, now: datetime) -> str:
    """The status of one key at ``now``; a key expiring exactly at ``now + EXPIRING_WINDOW`` is live."""
    if expires_at is None:
        return NEVER
    if expires_at < now:
        return EXPIRED
    if expires_at < now + EXPIRING_WINDOW:
        return EXPIRING
    return LIVE


def status_filter(status: str, now: datetime) -> Q:
    """The condition on ``expires_at`` matching exactly the keys ``status_of`` gives ``status``."""
    return {
        EXPIRED: Q(expires_at__lt=now),
        EXPIRING: Q(expires_at__gte=now, expires_at__lt=now + EXPIRING_WINDOW),
        NEVER: Q(expires_at__isnull=True),
        LIVE: Q(expires_at__gte=now) | Q(expires_at__isnull=True),
    }[status]
