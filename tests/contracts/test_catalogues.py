"""The translation catalogues of locale/: every language offered is whole (no empty or fuzzy entry), keeps every
placeholder and every markup tag of the English, and is compiled (the committed .mo says what the .po says, so that
a fresh clone needs no gettext tools). ``make messages`` extracts and compiles them."""

import re
from pathlib import Path

import polib
import pytest
from django.conf import settings
from django.utils.translation import to_locale

LOCALE = Path(settings.BASE_DIR) / "locale"
TRANSLATED = [code for code, _name in settings.LANGUAGES if code != "en"]
DOMAINS = ("django", "djangojs")
# %(name)s and %s placeholders (python-format, javascript-format), {{ name }} is never inside a msgid.
_PLACEHOLDER = re.compile(r"%\(\w+\)[sdif]|%[sdif]")
_TAG = re.compile(r"</?([a-z][a-z0-9]*)\b[^>]*>")


def catalogue(code: str, domain: str) -> Path:
    return LOCALE / to_locale(code) / "LC_MESSAGES" / f"{domain}.po"


def entries(code: str, domain: str):
    po = polib.pofile(str(catalogue(code, domain)))
    return [entry for entry in po if not entry.obsolete]


def texts(entry) -> list[tuple[str, str]]:
    """(English, translation) pairs of an entry: one, or one per plural form."""
    if entry.msgid_plural:
        return [(entry.msgid_plural if n else entry.msgid, text) for n, text in sorted(entry.msgstr_plural.items())]
    return [(entry.msgid, entry.msgstr)]


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("code", TRANSLATED)
def test_every_language_is_whole(code, domain):
    found = entries(code, domain)
    assert found, f"{catalogue(code, domain)} is empty"
    untranslated = [e.msgid for e in found for _en, text in texts(e) if not text.strip()]
    fuzzy = [e.msgid for e in found if "fuzzy" in e.flags]
    assert not untranslated, f"{code} {domain}: {len(untranslated)} untranslated, e.g. {untranslated[:5]}"
    assert not fuzzy, f"{code} {domain}: {len(fuzzy)} fuzzy, e.g. {fuzzy[:5]}"


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("code", TRANSLATED)
def test_translations_keep_the_placeholders_and_the_markup(code, domain):
    wrong = []
    for entry in entries(code, domain):
        for english, text in texts(entry):
            if not text:
                continue
            if sorted(set(_PLACEHOLDER.findall(english))) != sorted(set(_PLACEHOLDER.findall(text))):
                wrong.append(("placeholders", english, text))
            if sorted(_TAG.findall(english)) != sorted(_TAG.findall(text)):
                wrong.append(("markup", english, text))
    assert not wrong, f"{code} {domain}: {wrong[:5]}"


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("code", TRANSLATED)
def test_the_compiled_catalogue_is_the_current_one(code, domain):
    po = catalogue(code, domain)
    mo = polib.mofile(str(po.with_suffix(".mo")))
    compiled = {(e.msgctxt, e.msgid): (e.msgstr, dict(e.msgstr_plural)) for e in mo}
    for entry in entries(code, domain):
        plural = {int(n): text for n, text in entry.msgstr_plural.items()}
        got = compiled.get((entry.msgctxt, entry.msgid))
        assert got is not None, f"{po.with_suffix('.mo')} lacks {entry.msgid!r}: run make messages"
        assert (got[0], {int(n): t for n, t in got[1].items()}) == (entry.msgstr, plural), entry.msgid


PLURAL_FORMS = {
    "ko": "nplurals=1; plural=0;",
    "ja": "nplurals=1; plural=0;",
    "zh-hans": "nplurals=1; plural=0;",
    "de": "nplurals=2; plural=(n != 1);",
    "es": "nplurals=2; plural=(n != 1);",
    "fr": "nplurals=2; plural=(n > 1);",
}


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("code", TRANSLATED)
def test_the_header_names_the_language_and_its_plurals(code, domain):
    """A fuzzy header is left out of the compiled catalogue, and with it the plural rule: "1 keys" in French."""
    po = polib.pofile(str(catalogue(code, domain)))
    assert not po.metadata_is_fuzzy
    assert po.metadata["Plural-Forms"] == PLURAL_FORMS[code]
    assert po.metadata["Language"] == to_locale(code)
    assert po.metadata["Content-Type"] == "text/plain; charset=UTF-8"


def test_every_language_offered_has_its_catalogues():
    for code in TRANSLATED:
        for domain in DOMAINS:
            assert catalogue(code, domain).exists(), f"{code} is offered (settings.LANGUAGES) without {domain}.po"
