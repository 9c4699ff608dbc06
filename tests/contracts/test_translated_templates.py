"""Every word a person reads in our templates is marked for translation.

A template's text is read as a browser would (Python's HTML parser) after the template language is taken out: a
``{% translate %}`` or a ``{% blocktranslate %}…{% endblocktranslate %}`` becomes a placeholder, as does every
``{{ variable }}`` (data, or text translated in Python), every other tag disappears. What is left with a word in it,
in the page's text or in an attribute that a person reads (a tooltip, a label, a placeholder), was not marked.
Text inside ``<code>``, ``<kbd>``, ``<pre>``, ``<samp>``, ``<script>`` and ``<style>`` is code, not prose.
"""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
# Django's and drf-spectacular's own pages (translated by Django, or an API's documentation in English).
NOT_OURS = ("drf_spectacular/",)

_COMMENTS = re.compile(r"{%\s*comment\b.*?%}.*?{%\s*endcomment\s*%}|{#.*?#}", re.S)
_BLOCKS = re.compile(r"{%\s*blocktrans(?:late)?\b.*?%}.*?{%\s*endblocktrans(?:late)?\s*%}", re.S)
_TRANSLATE = re.compile(r"{%\s*trans(?:late)?\s.*?%}", re.S)
_VARIABLE = re.compile(r"{{.*?}}", re.S)
_TAG = re.compile(r"{%.*?%}", re.S)
_WORD = re.compile(r"[A-Za-z]{2,}")
_ENTITY = re.compile(r"&[a-zA-Z]+;|&#x?[0-9a-fA-F]+;")
PLACEHOLDER = "\u00a7"
READ_ATTRIBUTES = {"title", "aria-label", "placeholder", "alt", "label", "aria-description", "data-label"}
CODE = {"code", "kbd", "pre", "samp", "script", "style"}


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.found: list[str] = []
        self._code = 0

    def handle_starttag(self, tag, attrs):
        if tag in CODE:
            self._code += 1
        for name, value in attrs:
            if name in READ_ATTRIBUTES and value:
                self._check(value)

    def handle_startendtag(self, tag, attrs):
        for name, value in attrs:
            if name in READ_ATTRIBUTES and value:
                self._check(value)

    def handle_endtag(self, tag):
        if tag in CODE and self._code:
            self._code -= 1

    def handle_data(self, data):
        if not self._code:
            self._check(data)

    def _check(self, text):
        text = _ENTITY.sub(" ", text).replace(PLACEHOLDER, " ")
        if _WORD.search(text):
            self.found.append(" ".join(text.split()))


def unmarked(source: str) -> list[str]:
    """The texts of ``source`` (a template) that a person reads and that are not marked for translation."""
    source = _COMMENTS.sub("", source)
    source = _BLOCKS.sub(PLACEHOLDER, source)
    source = _TRANSLATE.sub(PLACEHOLDER, source)
    source = _VARIABLE.sub(PLACEHOLDER, source)
    source = _TAG.sub("", source)
    parser = _Text()
    parser.feed(source)
    parser.close()
    return parser.found


def _templates():
    for path in sorted(TEMPLATES.rglob("*.html")):
        name = path.relative_to(TEMPLATES).as_posix()
        if not name.startswith(NOT_OURS):
            yield name


def test_the_reader_is_fooled_by_nothing():
    """The check itself: what it must find, and what it must let pass."""
    source = (
        '<p title="Open the key">Keys of {{ dag_id }}</p>{% translate "Runs" %}'
        "{% blocktranslate count n=n %}one key{% plural %}{{ n }} keys{% endblocktranslate %}"
        '<code>airflow state-store clean</code>{# Developer note #}<a aria-label="{% translate "Close" %}">×</a>'
    )
    assert unmarked(source) == ["Open the key", "Keys of"]


@pytest.mark.parametrize("name", list(_templates()))
def test_every_text_is_marked_for_translation(name):
    found = unmarked((TEMPLATES / name).read_text())
    assert not found, f"{name}: not marked for translation: {found}"
