"""The time zone the pages show times in: the browser's, or UTC when the user chose it.

static/js/app.js writes the browser's zone (``Intl.DateTimeFormat().resolvedOptions().timeZone``) to the
``tz`` cookie, and the header's switch sets ``tz_utc=1`` (times in UTC) or clears it. Each request
activates that zone for the pages (``{% when %}``, Django's ``localtime``); a zone Python does not know,
or no cookie, means ``settings.TIME_ZONE``. The data stays in UTC: only its display changes. The APIs
(``/api/``) are left alone: their times keep the server's zone whoever calls them.

A time is put in the reader's zone by ``localtime`` only (never Django's, which raises ``OverflowError`` at the
ends of the calendar, e.g. an expiry of 9999-12-31 in UTC+14): such a time stays in UTC and the page says so.
"""

import zoneinfo
from datetime import UTC, datetime
from functools import cache

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from statestore_admin.core import formatting
from statestore_admin.core.errors import Invalid
from statestore_admin.core.values import parse_datetime_aware
from statestore_admin.web import is_api

ZONE_COOKIE = "tz"
UTC_COOKIE = "tz_utc"


@cache
def _known() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def known_zone(name: str) -> zoneinfo.ZoneInfo | None:
    """The zone called ``name``, or None when Python's zone list lacks it: a name from a form or a cookie is
    never used as a file path (a long one is "File name too long", a directory "Is a directory")."""
    if not isinstance(name, str) or name not in _known():
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return None


def active_zone_name() -> str:
    """The IANA name of the active zone ("Etc/GMT+12", which Django's ``get_current_timezone_name`` calls "-12",
    a name no form could send back)."""
    zone = timezone.get_current_timezone()
    return getattr(zone, "key", None) or timezone.get_current_timezone_name()


def localtime(value: datetime) -> datetime:
    """``value`` in the active (the reader's) zone; in UTC where that zone has no such time (``formatting.in_zone``:
    ``shown_in_utc`` tells)."""
    return formatting.in_zone(value, timezone.get_current_timezone())


def shown_in_utc(local: datetime) -> bool:
    """Whether ``localtime`` left this time in UTC though the reader's zone is another."""
    return formatting.shown_in_utc(local, timezone.get_current_timezone())


def picker_text(local: datetime) -> str:
    """What ``<input type="datetime-local">`` shows and sends for ``local`` (no seconds, a four-digit year, which
    ``strftime`` does not write below 1000): "2026-12-31T22:00", "0001-01-01T00:00"."""
    return f"{local.year:04d}-{local:%m-%dT%H:%M}"


def zone_name(request) -> str:
    """The zone to show ``request``'s page in (an IANA name)."""
    if request.COOKIES.get(UTC_COOKIE) == "1":
        return "UTC"
    name = request.COOKIES.get(ZONE_COOKIE, "")
    return name if name in _known() else settings.TIME_ZONE


def local_to_utc(text: str, zone_name: str, field: str = "expires_at", empty: str | None = None) -> datetime:
    """The instant a date-time input of the pages means (the expiry dialog, the GC page's cutoff, the Audit
    page's Since and Until): ``text`` is what ``<input type="datetime-local">`` sends (a date and time without
    a zone, read in ``zone_name``, the zone the form was shown in, which it carries as ``tz``) or ISO 8601
    with an offset. A date and time without a zone and without ``zone_name`` is refused, as everywhere else;
    so is a wall time the clocks skip. ``Invalid`` on ``field``; ``empty``: its message for no text."""
    text = (text or "").strip()
    if not text:
        raise Invalid({field: empty or _("Pick a date and time, or choose another expiry.")})
    try:
        parsed = parse_datetime(text)
    except ValueError:  # well-formed but impossible: Feb 30, hour 25
        parsed = None
    if parsed is None or timezone.is_aware(parsed) or not zone_name:
        return parse_datetime_aware(text, field)  # its messages: not a date, impossible, naive, out of range
    zone = known_zone(zone_name)
    if zone is None:
        shown = zone_name if len(zone_name) <= 64 else zone_name[:64] + "…"
        raise Invalid({field: _("Unknown time zone %(zone)s; reload the page.") % {"zone": repr(shown)}})
    local = parsed.replace(tzinfo=zone)
    try:
        instant = local.astimezone(UTC)
    except OverflowError:
        raise Invalid({field: _("That date and time is out of range.")}) from None
    if instant.astimezone(zone).replace(tzinfo=None) != parsed:
        skipped = _("%(time)s does not exist in %(zone)s: the clocks skip it. Pick another time.") % {
            "time": f"{parsed:%Y-%m-%d %H:%M}",
            "zone": zone_name,
        }
        raise Invalid({field: skipped})
    return instant


def wall_times_as_instants(params, names: tuple[str, ...]):
    """``params`` (a QueryDict) with each of ``names`` that holds a date-time input's wall time read in the
    form's zone (``tz``) and written as ISO 8601 in UTC, for the domain's parsers, which refuse a naive time;
    a value with an offset, or without a ``tz``, is left for them to judge. Refused, on a name
    whose wall time cannot be read (an unknown zone, a time the clocks skip): ``Invalid``."""
    zone_name = params.get("tz") or ""
    if not zone_name:
        return params
    converted = params.copy()
    for name in names:
        text = (params.get(name) or "").strip()
        try:
            parsed = parse_datetime(text) if text else None
        except ValueError:
            parsed = None
        if parsed is not None and timezone.is_naive(parsed):
            converted[name] = local_to_utc(text, zone_name, name).isoformat()
    return converted


def as_wall_time(text: str) -> str:
    """An ISO 8601 time with an offset (a link's) as a date-time input shows it: the reader's wall time
    ("2026-12-31T22:00"); anything else as it is."""
    try:
        parsed = parse_datetime(text or "")
    except ValueError:
        parsed = None
    if parsed is None or timezone.is_naive(parsed):
        return text
    local = localtime(parsed)
    return text if shown_in_utc(local) else picker_text(local)


class DisplayTimeZoneMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if is_api(request):
            return self.get_response(request)
        timezone.activate(zoneinfo.ZoneInfo(zone_name(request)))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
