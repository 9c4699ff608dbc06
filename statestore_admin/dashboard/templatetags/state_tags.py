"""Template helpers: key status badges and foldable JSON. Everything user-written is escaped."""

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from statestore_admin.core.formatting import count
from statestore_admin.core.status import STATUSES, status_of
from statestore_admin.core.values import MAX_DEPTH, json_depth, pretty, stored_surrogate, stored_value
from statestore_admin.dashboard.templatetags import json_folding

register = template.Library()


@register.simple_tag
def status(expires_at, now=None):
    """A badge: expired / expiring / never / live."""
    state = status_of(expires_at, now or timezone.now())
    label = {
        "expired": pgettext("status", "expired"),
        "expiring": pgettext("status", "expiring"),
        "never": pgettext("status", "never"),
        "live": pgettext("status", "live"),
    }[state]
    return format_html('<span class="badge badge-{}" title="{}">{}</span>', state, STATUSES[state], label)


@register.simple_tag
def json_tree(text, src=None):
    """Pretty, foldable JSON for a stored value (text that is not JSON is shown as it is, and so is JSON
    nested deeper than values may be written: Airflow has no such limit). A value holding a lone surrogate
    (which Airflow can write, escaped, and the dashboard refuses) says so and where above it."""
    surrogate = stored_surrogate(text) if isinstance(text, str) else None
    notice = (
        format_html(
            '<p class="warning" data-testid="lone-surrogate">{}</p>',
            _(
                "This value holds %(surrogate)s: half of a UTF-16 surrogate pair, which is not a character. It is "
                "shown as its JSON escape; the dashboard does not write such values, so an edit must replace it."
            )
            % {"surrogate": surrogate},
        )
        if surrogate
        else ""
    )
    return format_html("{}{}", notice, _json_tree(text, src))


def _json_tree(text, src):
    if isinstance(text, str) and json_depth(text) > MAX_DEPTH:
        return format_html(
            '<p class="warning">{}</p>{}',
            _("Arrays and objects nest more than %(depth)s levels deep: shown as raw text.") % {"depth": MAX_DEPTH},
            _as_text(text, src),
        )
    try:
        value = stored_value(text)
    except ValueError:
        return _as_text(text, src)
    return format_html('<div class="json-tree" data-src="{}">{}</div>', src or "", json_folding.tree(value, text, src))


def _as_text(text, src):
    """A value shown as its text: its first ``INLINE_RAW`` characters in a page whose copy loads the rest."""
    if not src or len(text) <= json_folding.INLINE_RAW:
        return format_html('<pre class="code">{}</pre>', text)
    note = _("The first %(shown)s characters of %(count)s: “Copy JSON” copies the whole value.") % {
        "shown": count(json_folding.INLINE_RAW),
        "count": count(len(text)),
    }
    return format_html('<p class="muted">{}</p><pre class="code">{}…</pre>', note, text[: json_folding.INLINE_RAW])


register.filter("pretty_json", pretty)


@register.filter
def part(src, query):
    """``src`` (the URL of a value's parts) asking for ``query`` (``"raw=1"``, ``"of=resolved"``)."""
    return f"{src}{'&' if '?' in src else '?'}{query}" if src else ""


@register.filter
def inlined(value, src):
    """Whether a value's raw text is in its page (short, or no URL to load it from): json_folding.INLINE_RAW."""
    return not src or len(value or "") <= json_folding.INLINE_RAW


@register.simple_tag(takes_context=True)
def query(context, name, value=None):
    """The current query string with ``name`` set to ``value`` (removed when empty): links keep filters."""
    params = context["request"].GET.copy()
    if value in (None, ""):
        params.pop(name, None)
    else:
        params[name] = value
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"
