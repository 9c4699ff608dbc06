"""How templates are written: a diff of one attribute stays readable (at most 10 lines over 200 characters in all
templates), and no developer note reaches a page (a ``{# … #}`` comment spans one line only: Django shows a
multi-line one as text)."""

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
LONG = 200
MOST_LONG_LINES = 10


def _sources():
    for path in sorted(TEMPLATES.rglob("*.html")):
        yield path.relative_to(TEMPLATES).as_posix(), path.read_text()


def test_few_template_lines_are_long():
    long = [
        f"{name}:{number} ({len(line)})"
        for name, source in _sources()
        for number, line in enumerate(source.splitlines(), 1)
        if len(line) > LONG
    ]
    assert len(long) <= MOST_LONG_LINES, long


def test_no_comment_spans_lines():
    # An opening {# without its #} on the same line: Django's lexer reads it as text.
    found = [
        f"{name}:{number}"
        for name, source in _sources()
        for number, line in enumerate(source.splitlines(), 1)
        if re.search(r"{#(?!.*#})", line)
    ]
    assert not found, found
