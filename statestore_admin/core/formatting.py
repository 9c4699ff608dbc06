"""How every face writes sizes, counts, times and durations: one function per kind, one convention each.

- Sizes: binary units labelled ``B``, ``KiB``, ``MiB``, ``GiB``, ``TiB``; below 1 KiB the exact count of bytes
  with thousands separators ("1,023 B"), above it one decimal ("1.5 KiB", "12.3 MiB", "1,536.0 TiB").
- Counts: thousands separators ("12,345"); abbreviated where room is short (charts, tables of figures) with
  one rule: up to one decimal, trailing zero dropped, ``k``/``M``/``G`` ("999", "1k", "123.5k", "1.2M").
- Times: ISO 8601 in UTC ending in ``Z``, with microseconds when the time has them
  ("2026-11-30T16:43:28.123456Z"); a naive time is taken as UTC, as the database stores UTC. A time shown in a
  reader's zone goes through ``in_zone``: at the ends of the calendar (an expiry of 0001-01-01 or 9999-12-31)
  where that zone's offset would leave years 1 to 9999, it stays in UTC, as written, and says so.
- Durations: "4.2 s", "3.5 min", "1.2 h".
- Plurals: the count with separators and the word, "1 key", "2 keys", "3 dry runs".

A missing figure (None) is "–" in text; a missing time is None (null in JSON, empty in CSV).
"""

import math
from datetime import UTC, datetime, tzinfo
from decimal import Decimal

from django.utils.formats import date_format, number_format
from django.utils.html import avoid_wrapping
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, npgettext, pgettext_lazy

MISSING = "–"
# The binary units as each language writes them (French: Kio, Mio), like "%(count)s B" ("%(count)s o").
SIZE_UNITS = (
    pgettext_lazy("size unit", "KiB"),
    pgettext_lazy("size unit", "MiB"),
    pgettext_lazy("size unit", "GiB"),
    pgettext_lazy("size unit", "TiB"),
)
SHORT_UNITS = ((1e9, "G"), (1e6, "M"), (1e3, "k"))


def size(n: float | int | None) -> str:
    """Bytes for people: "0 B", "1,023 B", "1.0 KiB", "1.5 MiB" (1,536,000 bytes is "1.5 MiB")."""
    if n is None:
        return MISSING
    if abs(n) < 1024:
        return _("%(count)s B") % {"count": _localized(int(n))}
    exponent = 1
    while exponent < len(SIZE_UNITS) and abs(n) >= 1024 ** (exponent + 1):
        exponent += 1
    return _in_unit(n / 1024**exponent, exponent)


def count(n: float | int | None) -> str:
    """A count with thousands separators: 12345 → "12,345" (a fraction keeps one decimal: "1,234.5")."""
    if n is None:
        return MISSING
    return _localized(n) if isinstance(n, int) else _localized(n, 1)


def signed_count(n: int) -> str:
    """A change in a count, its sign always written: 120 → "+120", -3 → "−3" (a minus sign), 0 → "0"."""
    if n > 0:
        return "+" + count(n)
    return "\u2212" + count(-n) if n < 0 else count(0)


def short_count(n: float | int | None) -> str:
    """A count abbreviated: 999 → "999", 1000 → "1k", 123456 → "123.5k", 1234567 → "1.2M"."""
    if n is None:
        return MISSING
    for limit, suffix in SHORT_UNITS:
        if abs(n) >= limit:
            return _one_decimal(n / limit) + suffix
    return _one_decimal(n)


def _one_decimal(value: float) -> str:
    return _localized(value, 1, strip=True, grouping=False)


def _localized(value: float | int, decimals: int | None = None, *, strip: bool = False, grouping: bool = True) -> str:
    """``value`` in the reader's number conventions, grouped ("1,234.5" in English, "1.234,5" in German), rounded
    as Python rounds (``number_format`` alone cuts extra decimals off instead); ``strip`` drops trailing zeros."""
    if decimals is None:
        return number_format(value, use_l10n=True, force_grouping=grouping)
    text = f"{value:.{decimals}f}"
    if strip and "." in text:
        text = text.rstrip("0").rstrip(".")
    places = len(text.partition(".")[2])
    return number_format(Decimal(text), places, use_l10n=True, force_grouping=grouping)


def _in_unit(value: float, exponent: int) -> str:
    """A size already divided by 1024**exponent, with one decimal and its unit: "1.5 MiB"."""
    return _("%(size)s %(unit)s") % {"size": _localized(value, 1), "unit": SIZE_UNITS[exponent - 1]}


def iso(value: datetime | None) -> str | None:
    """A time as ISO 8601 in UTC ending in ``Z``; None stays None."""
    if value is None:
        return None
    return in_zone(value, UTC).isoformat().replace("+00:00", "Z")


def in_zone(value: datetime, zone: tzinfo) -> datetime:
    """``value`` in ``zone`` (a naive time taken as UTC). Python's datetimes span years 1 to 9999 only, so
    9999-12-31 23:00 UTC has no time in UTC+14 and 0001-01-01 00:00 UTC none in any zone west of UTC (an
    ``OverflowError``): such a time is returned in UTC (``tzinfo is UTC``: ``shown_in_utc``), as written, and
    one that is not even in UTC's range (an offset of its own at an end of the calendar) as it is."""
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        value = value.replace(tzinfo=UTC)
    for target in (zone, UTC):
        try:
            return value.astimezone(target)
        except OverflowError:
            continue
    return value


def in_zone_text(value: datetime | None, zone: tzinfo) -> str:
    """A time for people in ``zone`` with its abbreviation, "2026-12-01 10:00:00 +14"; at an end of the calendar
    the zone has no such time, in UTC: "9999-12-31 23:59:59 UTC". A missing time is "–"."""
    if value is None:
        return MISSING
    local = in_zone(value, zone)
    return f"{local.year:04d}-{local:%m-%d %H:%M:%S} {'UTC' if shown_in_utc(local, zone) else local.strftime('%Z')}"


def shown_in_utc(value: datetime, zone: tzinfo) -> bool:
    """Whether ``in_zone`` left ``value`` in UTC though ``zone`` was asked (an end of the calendar)."""
    return value.tzinfo is UTC and zone is not UTC


def duration(seconds: float | None) -> str:
    """How long something took: "4.2 s", "3.5 min", "1.2 h"."""
    if seconds is None:
        return MISSING
    if seconds < 60:
        return _("%(seconds)s s") % {"seconds": _localized(seconds, 1, grouping=False)}
    if seconds < 3600:
        return _("%(minutes)s min") % {"minutes": _localized(seconds / 60, 1, grouping=False)}
    return _("%(hours)s h") % {"hours": _localized(seconds / 3600, 1, grouping=False)}


# When a span reads as the next unit: people say "in 1 day" of 23 hours and "in 1 year" of 11 months and 3 weeks.
# The units are ours, with a context, rather than Django's TIME_STRINGS: a relative time puts them in a phrase ("in
# %(time)s", "%(time)s ago") whose grammar some languages mark on the unit (German "vor 3 Tagen").
_SPAN_UNITS = (  # (the unit's words for a number, its seconds, up to how many seconds it is used)
    (lambda n: npgettext("relative time", "%(num)d minute", "%(num)d minutes", n), 60, 45 * 60),
    (lambda n: npgettext("relative time", "%(num)d hour", "%(num)d hours", n), 3600, 22 * 3600),
    (lambda n: npgettext("relative time", "%(num)d day", "%(num)d days", n), 86400, 26 * 86400),
    (lambda n: npgettext("relative time", "%(num)d month", "%(num)d months", n), 30.44 * 86400, 320 * 86400),
    (lambda n: npgettext("relative time", "%(num)d year", "%(num)d years", n), 365.25 * 86400, math.inf),
)


def span(seconds: float) -> str:
    """A span of time as people read it: one unit, rounded to the nearest ("1 day" of 23 hours, "2 months" of 55
    days, "1 year" from 320 days on), at least one minute, in the reader's language (the units in the context
    "relative time"). For relative times: "in 1 year", "3 minutes ago" (``display.relative``)."""
    seconds = abs(seconds)
    for words, size, up_to in _SPAN_UNITS:
        if seconds < up_to:
            num = max(1, round(seconds / size))
            return avoid_wrapping(words(num) % {"num": num})  # no break inside "3 days", as timesince
    raise AssertionError("the last unit has no bound")  # pragma: no cover


def age(seconds: float | None) -> str:
    """How long ago, or how old, in one rounded unit: "45 s", "12 min", "5 h", "1 day", "2.5 days"."""
    if seconds is None:
        return MISSING
    if seconds < 90:
        return _("%(seconds)s s") % {"seconds": _localized(seconds, 0, grouping=False)}
    if seconds < 90 * 60:
        return _("%(minutes)s min") % {"minutes": _localized(seconds / 60, 0, grouping=False)}
    if seconds < 24 * 3600:
        return _("%(hours)s h") % {"hours": _localized(seconds / 3600, 0, grouping=False)}
    days = float(f"{seconds / 86400:.1f}")
    # A fraction of a day takes the plural ("1.5 days"); ngettext needs an integer to choose the form.
    return ngettext("%(days)s day", "%(days)s days", 1 if days == 1 else 2) % {"days": _one_decimal(days)}


def plural(n: int, word: str, plural: str | None = None) -> str:
    """The count and the English word it counts: "1 key", "12,345 keys", plural(2, "entry", "entries"). For
    management commands' output, which stays English; text for people goes through ``ngettext`` with ``count``:
    ``ngettext("%(count)s key", "%(count)s keys", n) % {"count": count(n)}``."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def task_index(map_index: int, region_id=None, *, regions: bool) -> str:
    """A task instance's index as Airflow names it: ``map_index 2`` on 3.3; on 3.4 ``region_index 2``, after
    its ``region_id`` when it sits in a dynamic region (a loop iteration, a mapped expansion)."""
    if not regions:
        return f"map_index {map_index}"
    if region_id is not None and getattr(region_id, "int", 1):
        return f"region_id {region_id} region_index {map_index}"
    return f"region_index {map_index}"


def size_unit(n: float | int) -> int:
    """The unit ``size(n)`` writes ``n`` in, in bytes: 1 below 1 KiB, else 1024, 1024², …"""
    exponent = 0
    while exponent < len(SIZE_UNITS) and abs(n) >= 1024 ** (exponent + 1):
        exponent += 1
    return 1024**exponent


def size_in(n: float | int | None, unit: int) -> str:
    """``n`` bytes in ``unit`` (a ``size_unit``), as ``size`` writes that unit, so that a chart's axis reads one
    unit: size_in(512, 1024) is "0.5 KiB" beside "2.0 KiB". Zero is "0 B" in any unit."""
    if n is None:
        return MISSING
    if unit == 1 or n == 0:
        return size(n)
    exponent = 1
    while 1024**exponent < unit:
        exponent += 1
    return _in_unit(n / unit, exponent)


def chart_time(value: datetime) -> str:
    """A time on a chart's axis, short, in the zone ``value`` is in (the reader's), in the reader's language's
    format (``statestore_admin/formats``): "30 Nov 16:43", "11월 30일 16:43"."""
    return date_format(value, "SHORT_DATETIME_FORMAT")


def number(value: float | int) -> str:
    """A value read from a key (a watermark, a row count) for people: an integer with separators, a fraction with
    up to three significant decimals ("12,345", "0.125", "1,234.5"); an integer too large for a float (JSON's have
    no bound) in powers of ten: 10**400 is "1e+400"."""
    if isinstance(value, int) and abs(value) >= 1e15:
        digits = str(abs(value))
        mantissa = f"{digits[0]}.{digits[1:4]}".rstrip("0").rstrip(".")
        return f"{'-' if value < 0 else ''}{mantissa}e+{len(digits) - 1}"
    if float(value).is_integer() and abs(value) < 1e15:
        return _localized(int(value))
    return _localized(value, 3, strip=True)
