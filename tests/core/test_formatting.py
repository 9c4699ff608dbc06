"""The one formatting module: each convention once, at its boundaries."""

import zoneinfo
from datetime import UTC, datetime, timedelta, timezone

import pytest

from statestore_admin.core import formatting


def test_size_in_binary_units_labelled_b_kib_mib():
    assert formatting.size(0) == "0 B"
    assert formatting.size(1) == "1 B"
    assert formatting.size(1023) == "1,023 B"
    assert formatting.size(1024) == "1.0 KiB"
    assert formatting.size(1_536_000) == "1.5 MiB"
    assert formatting.size(12.3 * 1024**2) == "12.3 MiB"
    assert formatting.size(1024**3) == "1.0 GiB"
    assert formatting.size(3 * 1024**5) == "3,072.0 TiB"
    assert formatting.size(None) == "–"


def test_count_with_thousands_separators():
    assert formatting.count(0) == "0"
    assert formatting.count(1_234_567) == "1,234,567"
    assert formatting.count(1234.56) == "1,234.6"
    assert formatting.count(None) == "–"


def test_short_count_one_rule():
    assert formatting.short_count(0) == "0"
    assert formatting.short_count(999) == "999"
    assert formatting.short_count(1000) == "1k"
    assert formatting.short_count(123_456) == "123.5k"
    assert formatting.short_count(1_234_567) == "1.2M"
    assert formatting.short_count(5_600_000_000) == "5.6G"
    assert formatting.short_count(None) == "–"


def test_iso_is_utc_ending_in_z():
    assert formatting.iso(datetime(2026, 11, 30, 16, 43, 28, tzinfo=UTC)) == "2026-11-30T16:43:28Z"
    assert formatting.iso(datetime(2026, 11, 30, 16, 43, 28, 123456, tzinfo=UTC)) == "2026-11-30T16:43:28.123456Z"
    paris = timezone(timedelta(hours=1))
    assert formatting.iso(datetime(2026, 11, 30, 17, 43, tzinfo=paris)) == "2026-11-30T16:43:00Z"
    # a naive time is the database's UTC, not the server's local time
    assert formatting.iso(datetime(2026, 11, 30, 16, 43)) == "2026-11-30T16:43:00Z"
    assert formatting.iso(None) is None


def test_duration():
    assert formatting.duration(0) == "0.0 s"
    assert formatting.duration(4.24) == "4.2 s"
    assert formatting.duration(59.9) == "59.9 s"
    assert formatting.duration(210) == "3.5 min"
    assert formatting.duration(3600) == "1.0 h"
    assert formatting.duration(None) == "–"


def test_plural():
    assert formatting.plural(0, "key") == "0 keys"
    assert formatting.plural(1, "key") == "1 key"
    assert formatting.plural(12_345, "key") == "12,345 keys"
    assert formatting.plural(2, "entry", "entries") == "2 entries"
    assert formatting.plural(1, "entry", "entries") == "1 entry"


def test_an_axis_of_sizes_reads_one_unit():
    """A chart's ticks are written in the unit of its top (issue 23, item 5: not "1,000 B" beside "1.5 KiB")."""
    unit = formatting.size_unit(2048)
    assert unit == 1024 and formatting.size_unit(1000) == 1 and formatting.size_unit(3 * 1024**3) == 1024**3
    assert [formatting.size_in(n, unit) for n in (0, 512, 1024, 1536, 2048)] == [
        "0 B",
        "0.5 KiB",
        "1.0 KiB",
        "1.5 KiB",
        "2.0 KiB",
    ]
    assert formatting.size_in(1536 * 1024, 1024**2) == "1.5 MiB" and formatting.size_in(None, 1024) == "–"


def test_a_time_in_a_zone_at_the_ends_of_the_calendar_stays_in_utc_and_says_so():
    kiritimati, west = zoneinfo.ZoneInfo("Pacific/Kiritimati"), zoneinfo.ZoneInfo("Etc/GMT+12")
    latest, earliest = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), datetime(1, 1, 1, tzinfo=UTC)
    assert formatting.in_zone_text(latest, kiritimati) == "9999-12-31 23:59:59 UTC"
    assert formatting.in_zone_text(latest, west) == "9999-12-31 11:59:59 -12"
    assert formatting.in_zone_text(earliest, west) == "0001-01-01 00:00:00 UTC"
    assert formatting.in_zone_text(None, west) == "–"
    assert formatting.shown_in_utc(formatting.in_zone(latest, kiritimati), kiritimati)
    assert not formatting.shown_in_utc(formatting.in_zone(latest, UTC), UTC)
    assert formatting.number(10**400) == "1e+400" and formatting.number(-(12345 * 10**30)) == "-1.234e+34"


# Relative times round as people read them (issue 42 item 8): one unit, to the nearest, at each unit's edge.
SPAN_EDGES = [
    (timedelta(minutes=44), "44 minutes"),
    (timedelta(minutes=45), "1 hour"),
    (timedelta(hours=21, minutes=59), "22 hours"),
    (timedelta(hours=22), "1 day"),
    (timedelta(days=25), "25 days"),
    (timedelta(days=26), "1 month"),  # the day-to-month edge
    (timedelta(days=55), "2 months"),
    (timedelta(days=319), "10 months"),
    (timedelta(days=320), "1 year"),  # the month-to-year edge: never "11 months" of a year's token
    (timedelta(days=364), "1 year"),
    (timedelta(days=365), "1 year"),
    (timedelta(days=547), "1 year"),
    (timedelta(days=549), "2 years"),
]


@pytest.mark.parametrize(("delta", "expected"), SPAN_EDGES)
def test_a_span_is_one_unit_rounded_at_the_month_and_year_edges(delta, expected):
    assert formatting.span(delta.total_seconds()).replace("\xa0", " ") == expected
    assert formatting.span(-delta.total_seconds()).replace("\xa0", " ") == expected  # the past alike


def test_a_token_of_365_days_expires_in_1_year_and_one_made_a_year_ago_was_1_year_ago():
    from statestore_admin.dashboard.templatetags.display import relative

    now = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    assert relative(now + timedelta(days=365), now).replace("\xa0", " ") == "in 1 year"
    assert relative(now - timedelta(days=365, hours=3), now).replace("\xa0", " ") == "1 year ago"
    assert relative(now + timedelta(seconds=30), now) == "just now"
