"""How the dashboard shows times, counts and sizes: one tag or filter each, used by every template.

``{% when t %}`` shows a time in the user's time zone (activated by ``dashboard.timezones``), as people read
it, inside ``<time datetime="..." title="... UTC">`` so that the exact UTC time is one hover away:

- ``"relative"`` (the default, for lists): "5 minutes ago", "in 3 days", "just now";
- ``"absolute"``: "30 Nov 2026, 16:43";
- ``"seconds"``: "30 Nov 2026, 16:43:28";
- ``"both"``: "30 Nov 2026, 16:43 (5 minutes ago)".

A time the user's zone cannot show (an expiry of 9999-12-31 in UTC+14, of 0001-01-01 west of UTC: Python's
datetimes end there) is shown as written, in UTC, and says so: "31 Dec 9999, 23:59 UTC".

``|num`` writes counts with thousands separators (12,345) and ``|bytes`` sizes (1,023 B, 1.5 MiB): thin wrappers
of ``core.formatting``, which the API, the downloads and the commands use too.
"""

from datetime import UTC, datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.dates import MONTHS_3
from django.utils.formats import date_format, get_format
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from statestore_admin.core import formatting
from statestore_admin.dashboard.timezones import active_zone_name, localtime, shown_in_utc
from statestore_admin.identity import sign_in

register = template.Library()

JUST_NOW = timedelta(minutes=1)
STYLES = ("relative", "absolute", "seconds", "both")


def relative(value: datetime, now: datetime) -> str:
    """ "5 minutes ago", "in 3 days", "just now" (within a minute either way): one unit, rounded as people read
    it (``formatting.span``: "in 1 year" of 364 days), as the exact time is on hover."""
    if abs(value - now) < JUST_NOW:
        return _("just now")
    time = formatting.span((value - now).total_seconds())
    return _("in %(time)s") % {"time": time} if value > now else _("%(time)s ago") % {"time": time}


def absolute(value: datetime, seconds: bool = False) -> str:
    """The time in the active (the user's) time zone, in the language's format (``statestore_admin/formats``):
    "30 Nov 2026, 16:43" (":28" with seconds), "2026년 11월 30일 16:43"; in UTC, saying so, where that zone has no
    such time: "31 Dec 9999, 23:59 UTC"."""
    local = localtime(value)
    text = date_format(local, datetime_pattern(seconds))
    return f"{text} UTC" if shown_in_utc(local) else text


def datetime_pattern(seconds: bool = False) -> str:
    """The active language's ``DATETIME_FORMAT`` (Django's date format letters), with seconds where asked."""
    pattern = get_format("DATETIME_FORMAT")
    return pattern.replace("H:i", "H:i:s") if seconds else pattern


@register.simple_tag
def month_abbreviations() -> str:
    """The twelve months as the language abbreviates them ("jan,feb,…", "janv.,févr.,…"), for static/js/datetime.js
    to write a picked time as the pages do."""
    return ",".join(str(MONTHS_3[month]) for month in range(1, 13))


def utc_title(value: datetime) -> str:
    """The hover text: the time in UTC, and in the user's zone with its name when that is not UTC and has it."""
    utc = formatting.in_zone(value, UTC)
    text = f"{_full(utc)} UTC"
    zone = active_zone_name()
    local = localtime(value)
    if zone != "UTC" and not shown_in_utc(local):
        text = f"{_full(local)} {local:%Z} ({zone}) · {text}"
    return text


def _full(value: datetime) -> str:
    return f"{value.year:04d}-{value:%m-%d %H:%M:%S}"


@register.simple_tag
def when(value, style="relative", empty="", now=None):
    """``value`` (a datetime, or ISO 8601 text as the JSON reports hold it) as ``<time>`` in ``style`` (see the
    module); ``empty`` when there is no time."""
    if style not in STYLES:
        raise template.TemplateSyntaxError(f"when: unknown style {style!r}, one of {', '.join(STYLES)}")
    if isinstance(value, str):
        try:
            value = parse_datetime(value)
        except ValueError:
            return empty
    if not isinstance(value, datetime):
        return empty
    if timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    now = now or timezone.now()
    if style == "relative":
        text = relative(value, now)
    elif style == "both":
        text = f"{absolute(value)} ({relative(value, now)})"
    else:
        text = absolute(value, seconds=style == "seconds")
    return format_html('<time datetime="{}" title="{}">{}</time>', formatting.iso(value), utc_title(value), text)


@register.filter
def num(value):
    """A count with thousands separators: 12345 → "12,345". Anything but a number is shown as it is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return formatting.count(value)


@register.filter(name="bytes")
def size(value):
    """A size in bytes for people: "1,023 B", "1.5 KiB", "12.3 MiB". Anything but a number is shown as it is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return formatting.size(value)


# Airflow's words for its states, run types and writers, in the reader's language (Airflow's UI translates them
# too): the filters below show them; a value Airflow adds later is shown as it is stored.
AIRFLOW_STATES = {
    "success": pgettext_lazy("Airflow state", "success"),
    "failed": pgettext_lazy("Airflow state", "failed"),
    "running": pgettext_lazy("Airflow state", "running"),
    "queued": pgettext_lazy("Airflow state", "queued"),
    "scheduled": pgettext_lazy("Airflow state", "scheduled"),
    "skipped": pgettext_lazy("Airflow state", "skipped"),
    "upstream_failed": pgettext_lazy("Airflow state", "upstream failed"),
    "up_for_retry": pgettext_lazy("Airflow state", "up for retry"),
    "up_for_reschedule": pgettext_lazy("Airflow state", "up for reschedule"),
    "deferred": pgettext_lazy("Airflow state", "deferred"),
    "removed": pgettext_lazy("Airflow state", "removed"),
    "restarting": pgettext_lazy("Airflow state", "restarting"),
}
RUN_TYPES = {
    "manual": pgettext_lazy("Dag run type", "manual"),
    "scheduled": pgettext_lazy("Dag run type", "scheduled"),
    "backfill": pgettext_lazy("Dag run type", "backfill"),
    "asset_triggered": pgettext_lazy("Dag run type", "asset triggered"),
    "asset_materialization": pgettext_lazy("Dag run type", "asset materialization"),
}
WRITER_KINDS = {
    "task": pgettext_lazy("writer kind", "task"),
    "watcher": pgettext_lazy("writer kind", "watcher"),
    "api": pgettext_lazy("writer kind", "API"),
}
# How a session signed in, as the audit trail stores it (``sign_in.METHODS``' words; with a provider's name,
# "single sign-on (Okta)", it is shown as stored).
SIGN_IN_METHODS = {
    sign_in.METHODS[sign_in.PASSWORD]: pgettext_lazy("sign-in method", "password"),
    sign_in.METHODS[sign_in.OIDC]: pgettext_lazy("sign-in method", "single sign-on"),
    sign_in.METHODS[sign_in.PROXY]: pgettext_lazy("sign-in method", "authenticating proxy"),
    sign_in.METHODS[sign_in.BREAK_GLASS]: pgettext_lazy("sign-in method", "break-glass link"),
}


def _words_of(words: dict):
    """A filter that shows a stored value in the reader's words (``words``), or as it is stored when unknown."""
    return lambda value: words.get(value, value)


# {{ ti.state|airflow_state }} ("success" → "성공"), {{ run.run_type|run_type }}, {{ k.kind|writer_kind }},
# {{ e.signed_in|sign_in_method }}: empty stays empty.
for _name, _words in (
    ("airflow_state", AIRFLOW_STATES),
    ("run_type", RUN_TYPES),
    ("writer_kind", WRITER_KINDS),
    ("sign_in_method", SIGN_IN_METHODS),
):
    register.filter(_name, _words_of(_words))
