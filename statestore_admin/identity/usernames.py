"""Account names: one rule for what a name may hold and when two names are the same account, used wherever an
account is made or named (the admin's user forms and ``createsuperuser`` through the user name field's
validator, single sign-on, the authenticating proxy, ``break_glass``, the scope and token commands).

Names that only look alike are one account: ``Admin`` and ``admin``, ``ａｄｍｉｎ`` (full-width) and ``admin``,
``Straße`` and ``STRASSE`` compare equal after Unicode NFKC and case folding (``canonical``). A new name that is
the same as an existing account's is refused, and a name given to a command finds the account it looks like.
The name itself is kept as written.

A name may not hold control characters (C0, C1, DEL), bidirectional overrides and isolates (U+202A-202E,
U+2066-2069), the other invisible formatting characters (Unicode category Cf: zero-width space, the direction
marks) and the other characters Unicode draws as nothing (variation selectors, Hangul fillers), line or paragraph
separators, or lone surrogates: each makes one name display as another, or splits a
log line. Where a name is shown as text (the audit trail, Airflow's log), ``visible`` writes any such character
of a name made before this rule as an escape, ``\\u202e``.
"""

from __future__ import annotations

import unicodedata

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from statestore_admin.core.errors import Invalid

# Unicode categories refused in a name: controls, invisible formatting (bidi overrides and isolates, marks,
# zero-width characters), surrogates, line and paragraph separators.
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# And the other characters Unicode says to draw as nothing (Default_Ignorable_Code_Point, DerivedCoreProperties.txt),
# which are letters or combining marks by category: variation selectors, the Hangul fillers, the combining grapheme
# joiner. "admin" followed by one of them is shown as "admin" and NFKC keeps it: another account that reads the same.
INVISIBLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0xE0000, 0xE0FFF),
)


def _refused(char: str) -> bool:
    code = ord(char)
    return unicodedata.category(char) in REFUSED_CATEGORIES or any(lo <= code <= hi for lo, hi in INVISIBLE_RANGES)


def canonical(name: str) -> str:
    """The form two names are compared in: NFKC, then case folding (and NFKC again, which folding can undo),
    without the spaces around it."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold()).strip()


def unsafe_characters(text: str) -> list[str]:
    """The characters of ``text`` that a name may not hold, as code points (``U+202E``), each once."""
    found = dict.fromkeys(f"U+{ord(c):04X}" for c in text if _refused(c))
    return list(found)


def visible(text: str) -> str:
    """``text`` with every character a name may not hold written as an escape, for a line of text or a page."""
    return "".join(_escape(c) if _refused(c) else c for c in text or "")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def check(name: str) -> str:
    """``name`` stripped, or ``Invalid`` saying what is wrong with it (empty, or a character it may not hold)."""
    name = (name or "").strip()
    if not name:
        raise Invalid({"username": _("A user name cannot be empty.")})
    bad = unsafe_characters(name)
    if bad:
        message = _(
            "A user name cannot hold control characters or invisible formatting (found %(found)s): they make one "
            "name look like another."
        )
        raise Invalid({"username": message % {"found": ", ".join(bad)}})
    return name


def find(name: str):
    """The account whose name is ``name`` or looks like it (``canonical``): the exact one first."""
    User = get_user_model()
    field = User.USERNAME_FIELD
    exact = User._default_manager.filter(**{field: name}).first()
    if exact is not None:
        return exact
    return next(iter(look_alikes(name)), None)


def look_alikes(name: str, *, exclude_pk=None) -> list:
    """Every account whose name is the same as ``name`` after ``canonical``. The names are compared here, not in
    SQL: no database folds case and width as Unicode does, and the accounts are few."""
    User = get_user_model()
    field = User.USERNAME_FIELD
    key = canonical(name)
    accounts = User._default_manager.exclude(pk=exclude_pk) if exclude_pk is not None else User._default_manager
    candidates = accounts.only("pk", field).order_by("pk")
    return [user for user in candidates.iterator() if canonical(getattr(user, field)) == key]


def require_new(name: str, *, exclude_pk=None) -> str:
    """``check(name)``, and ``Invalid`` when an account of that name, or one that looks like it, exists."""
    name = check(name)
    _refuse_taken(name, look_alikes(name, exclude_pk=exclude_pk))
    return name


def _refuse_taken(name: str, taken: list) -> None:
    if taken:
        other = getattr(taken[0], get_user_model().USERNAME_FIELD)
        message = _(
            "An account named %(other)r exists already, and %(name)r is the same name (names are compared ignoring "
            "case and character width)."
        )
        raise Invalid({"username": message % {"other": visible(other), "name": visible(name)}})


def create(name: str, **fields):
    """A new account named ``name`` (``require_new``) without a usable password, saved: the one way the code
    makes accounts (single sign-on, the proxy, ``break_glass --create``)."""
    name = require_new(name)
    User = get_user_model()
    user = User(**{User.USERNAME_FIELD: name}, **fields)
    user.set_unusable_password()
    user.save()
    return user


def validate_new_username(value: str) -> None:
    """The user name field's validator (the admin's user forms, ``createsuperuser``): ``check``, and no other
    account of the same name. A validator does not know which account is being edited: the account of exactly
    this name is left to Django's unique constraint, every other look-alike is refused."""
    field = get_user_model().USERNAME_FIELD
    try:
        name = check(value)
        _refuse_taken(name, [user for user in look_alikes(name) if getattr(user, field) != value])
    except Invalid as exc:  # a field's validator raises the message alone: the form puts it by the field
        raise ValidationError(exc.messages, code="invalid") from None


def collisions() -> list[list[str]]:
    """Existing accounts whose names are the same after ``canonical`` (made before this rule), name groups."""
    User = get_user_model()
    field = User.USERNAME_FIELD
    groups: dict[str, list[str]] = {}
    for name in User._default_manager.order_by("pk").values_list(field, flat=True).iterator():
        groups.setdefault(canonical(name), []).append(name)
    return [names for names in groups.values() if len(names) > 1]
