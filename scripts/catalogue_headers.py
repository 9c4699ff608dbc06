"""Set the headers of locale/*/LC_MESSAGES/*.po that makemessages leaves as placeholders (``make messages``):
the language, its plural rule and the charset, and the header not fuzzy (msgfmt leaves a fuzzy header out of the
.mo, and the plural rule with it). Entries are not touched."""

import sys
from pathlib import Path

import polib

PLURAL_FORMS = {
    "ko": "nplurals=1; plural=0;",
    "ja": "nplurals=1; plural=0;",
    "zh_Hans": "nplurals=1; plural=0;",
    "de": "nplurals=2; plural=(n != 1);",
    "es": "nplurals=2; plural=(n != 1);",
    "fr": "nplurals=2; plural=(n > 1);",
}


def main(locale_dir: Path) -> None:
    for path in sorted(locale_dir.glob("*/LC_MESSAGES/*.po")):
        language = path.parts[-3]
        po = polib.pofile(str(path), wrapwidth=79)
        po.metadata_is_fuzzy = False
        po.header = f"statestore-admin in {language}: `make messages` extracts the strings (docs/languages.md)."
        po.metadata.update(
            {
                "Project-Id-Version": "statestore-admin",
                "Language": language,
                "Plural-Forms": PLURAL_FORMS[language],
                "Content-Type": "text/plain; charset=UTF-8",
                "Language-Team": f"statestore-admin {language} (docs/glossary/)",
                "Last-Translator": "statestore-admin developers",
            }
        )
        po.save()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "locale"))
