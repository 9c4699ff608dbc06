"""An account's own choices: the language of its pages. The code is one of ``settings.LANGUAGES``; "" means the
browser's (``Accept-Language``, then ``LANGUAGE_CODE``)."""

from django.conf import settings
from django.utils.translation import gettext as _

from statestore_admin.core.errors import Invalid
from statestore_admin.records.models import AccountPreferences


def is_language(code: str) -> bool:
    return any(code == known for known, _name in settings.LANGUAGES)


def language_of(user) -> str:
    """The language ``user`` chose, or "" (the browser's)."""
    if not user.is_authenticated:
        return ""
    code = AccountPreferences.objects.filter(user_id=user.pk).values_list("language", flat=True).first() or ""
    # A language a deployment no longer offers falls back to the browser's.
    return code if is_language(code) else ""


def choose_language(user, code: str) -> str:
    """Remember ``code`` ("" for the browser's) as ``user``'s language: the account's own choice, which only the
    account makes (no actor beside it, and not audited: it changes no state and nobody else's view)."""
    if code and not is_language(code):
        raise Invalid({"language": _("Unknown language %(code)s.") % {"code": code}})
    if user.is_authenticated:
        AccountPreferences.objects.update_or_create(user_id=user.pk, defaults={"language": code})
    return code
