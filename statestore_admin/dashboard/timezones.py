"""The time zone the pages show times in: the browser's, or UTC when the user chose it.

static/js/app.js writes the browser's zone (``Intl.DateTimeFormat().resolvedOptions().timeZone``) to the
``tz`` cookie, and the header's switch sets ``tz_utc=1`` (times in UTC) or clears it. Each request
activates that zone for the pages (``{% when %}``, Django's ``localtime``); a zone Python does not know,
or no cookie, means ``settings.TIME_ZONE``. The data stays in UTC: only its display changes. The APIs
(``/api/``) are left alone: their times keep the server's zone whoever calls them.
"""

import zoneinfo
from functools import cache

from django.conf import settings
from django.utils import timezone

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


def zone_name(request) -> str:
    """The zone to show ``request``'s page in (an IANA name)."""
    if request.COOKIES.get(UTC_COOKIE) == "1":
        return "UTC"
    name = request.COOKIES.get(ZONE_COOKIE, "")
    return name if name in _known() else settings.TIME_ZONE


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
