"""Glob patterns of access scopes: what a valid pattern is, and how one is matched alike in Python, SQLite and
PostgreSQL. Pure functions: the scope model (``models.AccessScope``) and the scope rules (``scopes``) both use
them, so neither imports the other for them.
"""

from django.db.models import Q
from django.utils.translation import gettext as _

from statestore_admin.core.errors import Invalid

MAX_PATTERN = 250


def validate_pattern(pattern: str) -> str:
    """A non-empty glob of printable characters; ``Invalid`` otherwise."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise Invalid(_("A pattern is a non-empty glob such as etl_* or ml_training."))
    if len(pattern) > MAX_PATTERN:
        raise Invalid(_("A pattern has at most %(limit)s characters.") % {"limit": MAX_PATTERN})
    if not pattern.isprintable():
        raise Invalid(_("A pattern has printable characters only."))
    return pattern


def glob_regex(pattern: str) -> str:
    r"""The anchored regular expression of a glob, the same for Python's ``re`` (and so SQLite's REGEXP) and
    PostgreSQL's ``~``: ``*`` → ``.*``, ``?`` → ``.``, every other non-alphanumeric character escaped;
    ``(?s)`` so that ``.`` matches a newline in both, ``\A`` and ``\Z`` for the very start and end."""
    parts = []
    for char in pattern:
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        elif char.isalnum() and char.isascii():
            parts.append(char)
        else:
            parts.append("\\" + char)
    return "(?s)\\A" + "".join(parts) + "\\Z"


def glob_q(field: str, patterns: tuple[str, ...]) -> Q:
    """Rows whose ``field`` matches one of ``patterns``: names without a wildcard as ``IN`` (an index
    lookup), the others as a regular expression, case-sensitive on every database (SQLite's ``LIKE``, which
    ``startswith`` uses, ignores case). No pattern matches nothing."""
    exact, condition = [], Q(pk__in=[])
    for pattern in patterns:
        if pattern == "*":
            return Q()
        if "*" in pattern or "?" in pattern:
            condition |= Q(**{f"{field}__regex": glob_regex(pattern)})
        else:
            exact.append(pattern)
    if exact:
        condition |= Q(**{f"{field}__in": exact})
    return condition
