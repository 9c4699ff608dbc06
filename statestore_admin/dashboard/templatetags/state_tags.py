"""Template helpers: key status badges and foldable JSON. Everything user-written is escaped."""

import json

from django import template
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext

from statestore_admin.core.status import STATUSES, status_of
from statestore_admin.core.values import MAX_DEPTH, json_depth, pretty, stored_surrogate, stored_value
from statestore_admin.dashboard.templatetags.user_text import user_text

register = template.Library()
FOLD_ABOVE = 8  # items: larger objects and arrays below the top level start folded
LARGE_VALUE = 8 * 1024  # characters: a value this long opens its first OPEN_LEVELS levels only
OPEN_LEVELS = 2


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


COMMA = mark_safe('<span class="j-punct">,</span>')


def _node(value, depth: int, open_levels: int | None, after="") -> str:
    """One JSON value as a tree, ``after`` it (a comma, when items follow). Counts of folded items are drawn
    by CSS (``data-count``), so that selecting an unfolded tree copies valid JSON."""
    if isinstance(value, dict) and value:
        last = len(value) - 1
        items = format_html_join(
            "",
            '<li><span class="j-key">{}</span><span class="j-punct">: </span>{}</li>',
            (
                (
                    user_text(json.dumps(k, ensure_ascii=False)),
                    _node(v, depth + 1, open_levels, COMMA if i < last else ""),
                )
                for i, (k, v) in enumerate(value.items())
            ),
        )
        count = ngettext("%(count)s key", "%(count)s keys", len(value)) % {"count": len(value)}
        return _fold("{", "}", count, items, depth, len(value), open_levels, after)
    if isinstance(value, list) and value:
        last = len(value) - 1
        items = format_html_join(
            "",
            "<li>{}</li>",
            ((_node(v, depth + 1, open_levels, COMMA if i < last else ""),) for i, v in enumerate(value)),
        )
        count = ngettext("%(count)s item", "%(count)s items", len(value)) % {"count": len(value)}
        return _fold("[", "]", count, items, depth, len(value), open_levels, after)
    if isinstance(value, dict | list):
        return format_html('<span class="j-punct">{}</span>{}', "{}" if isinstance(value, dict) else "[]", after)
    kind = "str" if isinstance(value, str) else "bool" if isinstance(value, bool) else "num"
    return format_html('<span class="j-{}">{}</span>{}', kind, user_text(json.dumps(value, ensure_ascii=False)), after)


def _fold(opening, closing, count, items, depth, size, open_levels, after):
    """A foldable object or array: open at the top, and below it when small (``FOLD_ABOVE``) and, in a large
    value, within its first ``open_levels`` levels."""
    shallow = open_levels is None or depth < open_levels
    is_open = " open" if depth == 0 or (size <= FOLD_ABOVE and shallow) else ""
    return format_html(
        '<details class="j-fold"{}><summary><span class="j-punct">{}</span><span class="j-count" data-count="{}">'
        '</span></summary><ul>{}</ul><span class="j-punct">{}</span>{}</details>',
        is_open,
        opening,
        count,
        items,
        closing,
        after,
    )


@register.simple_tag
def json_tree(text):
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
    return format_html("{}{}", notice, _json_tree(text))


def _json_tree(text):
    if isinstance(text, str) and json_depth(text) > MAX_DEPTH:
        return format_html(
            '<p class="warning">{}</p><pre class="code">{}</pre>',
            _("Arrays and objects nest more than %(depth)s levels deep: shown as raw text.") % {"depth": MAX_DEPTH},
            text,
        )
    try:
        value = stored_value(text)
    except ValueError:
        return format_html('<pre class="code">{}</pre>', text)
    open_levels = OPEN_LEVELS if isinstance(text, str) and len(text) > LARGE_VALUE else None
    return format_html('<div class="json-tree">{}</div>', _node(value, 0, open_levels))


register.filter("pretty_json", pretty)


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
