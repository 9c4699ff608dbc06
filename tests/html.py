"""Reading rendered HTML as a browser lays it out: templates break long lines between words and attributes."""

import re

# Only the whitespace HTML collapses: a no-break space (\xa0) is text, and stays.
_SPACES = re.compile(r"[ \t\n\r\f]+")


def flat(html: str) -> str:
    """``html`` with each run of whitespace as one space, so a test reads a phrase whatever the template's line
    breaks (not for <pre> or <textarea> content, whose line breaks are what it shows)."""
    return _SPACES.sub(" ", html)
