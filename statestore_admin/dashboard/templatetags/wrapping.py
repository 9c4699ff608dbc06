"""Where long machine text may wrap: ``{{ value|wrap_at_separators }}`` escapes a class path, a URL, a file
path, an option or an environment variable's name and lets it break after each dot and slash, and after
underscores (``AIRFLOW__WORKERS__…``, ``state_cleanup_batch_size``), colons and plus signs (a run id's
timestamp: ``scheduled__2026-12-01T00:00:00+00:00``), so that a table column can be narrow
without the text breaking every few characters (which ``overflow-wrap: anywhere`` does: it lets a column
shrink to one character)."""

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

SEPARATORS = re.compile(r"(_+|[./+]|:(?!/))")  # not after a URL's scheme: "s3:" alone ends no line


@register.filter
def wrap_at_separators(value) -> SafeString:
    """``value`` escaped, with a ``<wbr>`` after each separator (escaping is done first, and the entities it
    writes, ``&amp;`` ``&lt;`` ``&#x27;`` …, hold no separator)."""
    return mark_safe(SEPARATORS.sub(r"\1<wbr>", escape("" if value is None else str(value))))
