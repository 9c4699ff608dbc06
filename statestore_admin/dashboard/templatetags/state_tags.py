"""Template helpers: key status badges and foldable JSON. Everything user-written is escaped."""

import json

from django import template
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from statestore_admin.state.status import STATUSES, status_of
from statestore_admin.state.values import MAX_DEPTH, json_depth, pretty, stored_surrogate, stored_value

from .user_text import user_text

register = template.Library()
FOLD_ABOVE = 8  # items: larger objects and arrays below the top level start folded


@register.simple_tag
def status(expires_at, now=None):
    """A badge: expired / expiring / never / live."""
    state = status_of(expires_at, now or timezone.now())
    label = {"expired": "expired", "expiring": "expiring", "never": "never", "live": "live"}[state]
    return format_html('<span class="badge badge-{}" title="{}">{}</span>', state, STATUSES[state], label)


def _node(value, depth: int) -> str:
    if isinstance(value, dict):
        if not value:
            return mark_safe('<span class="j-punct">{}</span>')
        items = format_html_join(
            "",
            '<li><span class="j-key">{}</span>: {}</li>',
            ((user_text(json.dumps(k, ensure_ascii=False)), _node(v, depth + 1)) for k, v in value.items()),
        )
        return _fold("{", "}", f"{len(value)} key{'s' if len(value) != 1 else ''}", items, depth, len(value))
    if isinstance(value, list):
        if not value:
            return mark_safe('<span class="j-punct">[]</span>')
        items = format_html_join("", "<li>{}</li>", ((_node(v, depth + 1),) for v in value))
        return _fold("[", "]", f"{len(value)} item{'s' if len(value) != 1 else ''}", items, depth, len(value))
    kind = "str" if isinstance(value, str) else "bool" if isinstance(value, bool) else "num"
    return format_html('<span class="j-{}">{}</span>', kind, user_text(json.dumps(value, ensure_ascii=False)))


def _fold(opening, closing, count, items, depth, size):
    is_open = " open" if depth == 0 or size <= FOLD_ABOVE else ""
    return format_html(
        '<details class="j-fold"{}><summary><span class="j-punct">{}</span><span class="j-count">{}</span></summary>'
        '<ul>{}</ul><span class="j-punct">{}</span></details>',
        is_open,
        opening,
        count,
        items,
        closing,
    )


@register.simple_tag
def json_tree(text):
    """Pretty, foldable JSON for a stored value (text that is not JSON is shown as it is, and so is JSON
    nested deeper than values may be written: Airflow has no such limit). A value holding a lone surrogate
    (which Airflow can write, escaped, and the dashboard refuses) says so and where above it."""
    surrogate = stored_surrogate(text) if isinstance(text, str) else None
    notice = (
        format_html(
            '<p class="warning" data-testid="lone-surrogate">This value holds {}: half of a UTF-16 surrogate pair, '
            "which is not a character. It is shown as its JSON escape; the dashboard does not write such values, "
            "so an edit must replace it.</p>",
            surrogate,
        )
        if surrogate
        else ""
    )
    return format_html("{}{}", notice, _json_tree(text))


def _json_tree(text):
    if isinstance(text, str) and json_depth(text) > MAX_DEPTH:
        return format_html(
            '<p class="warning">Arrays and objects nest more than {} levels deep: shown as raw text.</p>'
            '<pre class="code">{}</pre>',
            MAX_DEPTH,
            text,
        )
    try:
        value = stored_value(text)
    except ValueError:
        return format_html('<pre class="code">{}</pre>', text)
    return format_html('<div class="json-tree">{}</div>', _node(value, 0))


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
