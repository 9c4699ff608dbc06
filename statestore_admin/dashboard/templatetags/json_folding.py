"""The JSON tree of a stored value, and the one rule for how much of it a page holds (issue 42 item 2).

A page renders the first ``SHOWN`` entries of each array or object, then a "Show N more" button that
loads the next ones (``dashboard.json_view.value_part``, an htmx fragment); in a large value (``LARGE_VALUE``)
a folded level holds nothing until it is opened, and a string is cut after ``CUT`` characters. Past ``BUDGET``
characters of markup, every further entry waits for its button. So a key page stays small whatever the
value's size; the raw text and the copy are loaded when asked for (``INLINE_RAW``). "Expand all" and the
search load the whole tree first (``whole``). Everything user-written is escaped (``format_html``, ``user_text``).

``state_tags.json_tree`` renders a page's tree; the task and asset key views answer the parts
(``dashboard.json_view``).
"""

import json
from itertools import islice
from urllib.parse import urlencode

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import ngettext

from statestore_admin.core.formatting import count as count_text
from statestore_admin.dashboard.templatetags.user_text import user_text

FOLD_ABOVE = 8  # items: larger objects and arrays below the top level start folded
LARGE_VALUE = 8 * 1024  # characters: a value this long opens its first OPEN_LEVELS levels only, the rest loads
OPEN_LEVELS = 2
SHOWN = 50  # entries of an array or object rendered at once; "Show N more" loads the next SHOWN
BUDGET = 60_000  # characters of a tree's markup (a page's or a part's) before further entries wait
CUT = 2_000  # characters of a string (or a key) shown before it is cut; the whole tree shows it whole
INLINE_RAW = 24 * 1024  # characters: a longer value's raw text and copy are loaded, not in the page
COMMA = mark_safe('<span class="j-punct">,</span>')


def part_url(src: str, **params) -> str:
    return f"{src}{'&' if '?' in src else '?'}{urlencode(params)}"


class Tree:
    """Renders a value (``node``) or some entries of one of its arrays or objects (``entries``). ``src`` is the
    URL of the value's parts (None: everything is rendered, as ``whole`` does)."""

    def __init__(self, src: str | None, large: bool, whole: bool = False):
        self.src = src
        self.large = large
        self.whole = whole or src is None
        self.spent = 0

    def _spend(self, html: SafeString) -> SafeString:
        self.spent += len(html)
        return html

    def _text(self, value: str) -> SafeString:
        text = json.dumps(value, ensure_ascii=False)
        if self.whole or len(text) <= CUT:
            return user_text(text)
        left = len(text) - CUT
        cut = ngettext("(%(count)s more character)", "(%(count)s more characters)", left) % {"count": count_text(left)}
        return format_html('{}…<span class="j-cut" data-cut="{}"></span>', user_text(text[:CUT]), cut)

    def node(self, value, path: list, after="") -> SafeString:
        """One JSON value as a tree, ``after`` it (a comma, when items follow). Counts of folded items are drawn
        by CSS (``data-count``), so that selecting an unfolded tree copies valid JSON."""
        if isinstance(value, dict | list) and value:
            return self._fold(value, path, after)
        # Joined as strings, not through format_html: a whole tree holds hundreds of thousands of these, and each
        # piece is safe already (constants, ``after``, and ``user_text``'s escaped text).
        if isinstance(value, dict | list):
            html = mark_safe(f'<span class="j-punct">{"{}" if isinstance(value, dict) else "[]"}</span>{after}')
        else:
            kind = "str" if isinstance(value, str) else "bool" if isinstance(value, bool) else "num"
            text = self._text(value) if isinstance(value, str) else user_text(json.dumps(value, ensure_ascii=False))
            html = mark_safe(f'<span class="j-{kind}">{text}</span>{after}')
        return self._spend(html)

    def _fold(self, value, path: list, after) -> SafeString:
        """A foldable object or array: open at the top, and below it when small (``FOLD_ABOVE``) and, in a large
        value, within its first ``OPEN_LEVELS`` levels. A folded level of a large value, or one met past the
        budget, loads its entries when first opened."""
        depth, size = len(path), len(value)
        if isinstance(value, dict):
            opening, closing = "{", "}"
            count = ngettext("%(count)s key", "%(count)s keys", size) % {"count": size}
        else:
            opening, closing = "[", "]"
            count = ngettext("%(count)s item", "%(count)s items", size) % {"count": size}
        is_open = depth == 0 or (size <= FOLD_ABOVE and (not self.large or depth < OPEN_LEVELS))
        later = not self.whole and depth > 0 and ((self.large and not is_open) or self.spent >= BUDGET)
        if later:
            loads = format_html(
                ' hx-get="{}" hx-trigger="toggle once" hx-target="find ul" hx-swap="innerHTML" data-json-later',
                part_url(self.src, path=json.dumps(path), **{"from": 0}),
            )
            items = ""
        else:
            loads, items = "", self.entries(value, path, 0)
        html = format_html(
            '<details class="j-fold"{}{}><summary><span class="j-punct">{}</span><span class="j-count" '
            'data-count="{}"></span></summary><ul>{}</ul><span class="j-punct">{}</span>{}</details>',
            " open" if is_open and not later else "",
            loads,
            opening,
            count,
            items,
            closing,
            after,
        )
        self.spent += len(html) - len(items)  # the entries are counted already
        return html

    def entries(self, value, path: list, start: int) -> SafeString:
        """The entries of ``value`` (the array or object at ``path``) from ``start``: the next ``SHOWN``, fewer
        past the budget (one at least), then the button that loads the following ones."""
        size, last = len(value), len(value) - 1
        end = size if self.whole else min(size, start + SHOWN)
        pairs = value.items() if isinstance(value, dict) else enumerate(value)
        items = []
        shown = start
        for index, (name, item) in enumerate(islice(pairs, start, end), start):
            if not self.whole and index > start and self.spent >= BUDGET:
                break
            inner = self.node(item, [*path, name], COMMA if index < last else "")
            if isinstance(value, dict):  # safe pieces joined, as in ``node``
                items.append(
                    f'<li><span class="j-key">{self._text(name)}</span><span class="j-punct">: </span>{inner}</li>'
                )
            else:
                items.append(f"<li>{inner}</li>")
            shown = index + 1
        if shown < size:
            items.append(self._more(path, shown, size))
        return mark_safe("".join(items))

    def _more(self, path: list, start: int, size: int) -> SafeString:
        following = min(SHOWN, size - start)
        label = ngettext("Show %(count)s more", "Show %(count)s more", following) % {"count": count_text(following)}
        return self._spend(
            format_html(
                '<li class="j-more"><button type="button" class="small" aria-label="{}" data-label="{}" hx-get="{}" '
                'hx-target="closest li" hx-swap="outerHTML"></button></li>',
                label,
                label,
                part_url(self.src, path=json.dumps(path), **{"from": start}),
            )
        )


def tree(value, text: str, src: str | None) -> SafeString:
    """A page's tree of ``value`` (decoded from ``text``), its parts loaded from ``src``."""
    return Tree(src, large=len(text) > LARGE_VALUE).node(value, [])
