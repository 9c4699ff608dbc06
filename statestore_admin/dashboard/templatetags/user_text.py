"""How pages show text that users and tasks wrote (keys, values): the rule of ``core.values``
(``unescaped``, ``visible_segments``) as HTML, in one place.

- ``{{ key|user_text }}``: the text isolated from what surrounds it (``<bdi>``: right-to-left text inside
  cannot reorder the page around it), each hidden character (a control, a bidi override, a zero-width
  space, …) shown as a badge named in its ``title`` instead of acting.
- ``{{ key|user_text_wrapping }}``: the same, free to wrap after each separator (``_ . / : +``), for a key in a
  narrow column: it breaks at ``watermark_of_`` rather than every few characters.
- ``{{ key|user_text_plain }}``: the same as text without markup, for where no markup can go (a page's
  ``<title>``): hidden characters as their symbols.
- ``{{ stored|value_text }}`` (``{{ preview|value_text:60 }}`` cuts it to 60 characters): a stored
  value, or its first characters, as people read it: Airflow stores ``json.dumps`` text, which spells
  every non-ASCII character as a ``\\u`` escape; those are shown as the characters they stand for.

Everything is escaped.
"""

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from statestore_admin.core.values import unescaped, visible_segments
from statestore_admin.dashboard.templatetags.wrapping import wrap_at_separators

register = template.Library()


def visible_html(text: str, wrap: bool = False) -> SafeString:
    """``text`` escaped, its hidden characters as badges (no isolation: for text already in its own
    element); ``wrap``: a ``<wbr>`` after each separator of the visible text."""
    return format_html_join(
        "",
        "{}",
        (
            (
                (wrap_at_separators(part) if wrap else part)
                if name is None
                else format_html('<span class="hidden-char" title="{}">{}</span>', name, part),
            )
            for part, name in visible_segments(text)
        ),
    )


@register.filter
def user_text(text) -> SafeString:
    if text is None:
        return SafeString("")
    return format_html("<bdi>{}</bdi>", visible_html(str(text)))


@register.filter
def user_text_wrapping(text) -> SafeString:
    if text is None:
        return SafeString("")
    return format_html("<bdi>{}</bdi>", visible_html(str(text), wrap=True))


@register.filter
def user_text_plain(text) -> str:
    return "" if text is None else "".join(part for part, _ in visible_segments(str(text)))


@register.filter
def value_text(json_text, limit=None) -> SafeString:
    if json_text is None:
        return SafeString("")
    shown = unescaped(str(json_text))
    if limit is not None and len(shown) > int(limit):
        shown = shown[: int(limit) - 1] + "…"
    return user_text(shown)
