"""The key-status rule: the boundaries of each status, a key expiring exactly at the window's end included."""

from datetime import UTC, datetime, timedelta

import pytest

from statestore_admin.core import status

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
TICK = timedelta(microseconds=1)


@pytest.mark.parametrize(
    ("expires_at", "expected"),
    [
        (None, status.NEVER),
        (NOW - TICK, status.EXPIRED),
        (NOW, status.EXPIRING),
        (NOW + status.EXPIRING_WINDOW - TICK, status.EXPIRING),
        (NOW + status.EXPIRING_WINDOW, status.LIVE),
        (NOW + status.EXPIRING_WINDOW + TICK, status.LIVE),
    ],
)
def test_status_of_boundaries(expires_at, expected):
    assert status.status_of(expires_at, NOW) == expected


def test_the_window_is_a_day():
    assert status.EXPIRING_WINDOW == timedelta(hours=24)
    assert status.STATUSES[status.EXPIRING] == "expiring within 24 h"
