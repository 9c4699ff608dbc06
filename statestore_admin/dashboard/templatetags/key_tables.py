"""The run and task pages' key tables: a column header that sorts by its column (``sort_th``), and the sort
orders offered to a phone, whose cards have no header (``SORT_CHOICES``). The sort lives in the query string,
so a sorted list can be shared; changing it starts again at the first page."""

from django import template
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from statestore_admin.objects import sizes

register = template.Library()

SORT_CHOICES = [
    ("", _("Map index, then key")),
    ("key", _("Key (A–Z, key_2 before key_10)")),
    ("-key", _("Key (Z–A)")),
    ("size", _("Size (smallest first)")),
    ("-size", _("Size (largest first)")),
    ("updated", _("Updated (oldest first)")),
    ("-updated", _("Updated (newest first)")),
    ("expiry", _("Expiry (soonest first, never last)")),
    ("-expiry", _("Expiry (never first)")),
]


@register.simple_tag
def sort_choices():
    return SORT_CHOICES


@register.simple_tag(takes_context=True)
def sort_th(context, column: str, label: str, css: str = ""):
    """A ``<th>`` whose link sorts by ``column`` (ascending, or descending when it already sorts ascending by
    it), with ``aria-sort`` saying how the table is sorted now."""
    current = context.get("sort", "")
    params = context["request"].GET.copy()
    params.pop("cursor", None)
    params["sort"] = f"-{column}" if current == column else column
    state = {column: "ascending", f"-{column}": "descending"}.get(current, "none")
    arrow = {"ascending": " ↑", "descending": " ↓"}.get(state, "")
    return format_html(
        '<th class="{}" aria-sort="{}"><a class="sort" href="?{}">{}<span aria-hidden="true">{}</span></a></th>',
        css,
        state,
        params.urlencode(),
        label,
        arrow,
    )


@register.simple_tag
def with_sizes(items, store: str, attr: str = ""):
    """``items`` of a key table with their sizes (``objects.sizes.of_listed``: a worker-side reference's object
    where the dashboard recorded its size), for ``{% with_sizes keys "task" as keys %}``; with ``attr``, the
    items' rows are ``item.<attr>`` (a key's story: ``{% with_sizes story.entries "task" "row" as entries %}``)."""
    items = list(items)
    sizes.of_listed([getattr(i, attr) for i in items] if attr else items, store)
    return items
