"""Break-glass links: a superuser gets in when single sign-on is down or local passwords are off. Only someone who
can run ``manage.py break_glass USERNAME`` on the server makes one (``issue``); it signs in once, within its minutes
(``spend``). The database keeps the SHA-256 of the link's random token, never the token. Every link made and used
is logged at WARNING; the page that uses a link is ``sso.break_glass``.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.identity import usernames
from statestore_admin.records.models import BreakGlassLink

log = logging.getLogger(__name__)


class Unusable(Exception):
    """The link cannot sign anyone in: the message says why, for the page."""


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def issue(user, minutes: int, *, actor) -> str:
    """A new link's token for ``user`` (an active superuser), valid ``minutes``, made by ``actor`` (an
    ``access.actors.Actor``: identity sits below access, which defines it), kept on the link's row."""
    if not (user.is_active and user.is_superuser):
        raise ValueError(f"{user.get_username()!r} is not an active superuser.")
    token = secrets.token_urlsafe(32)
    expires = timezone.now() + timedelta(minutes=minutes)
    BreakGlassLink.objects.create(user=user, token_hash=_hash(token), expires=expires, issued_by=actor.name[:255])
    log.warning(
        "break-glass link made for %s by %s, valid until %s", user.get_username(), actor.name, expires.isoformat()
    )
    return token


def _usable(link: BreakGlassLink | None) -> BreakGlassLink:
    if link is None:
        raise Unusable(_("This break-glass link is unknown. Make a new one with `manage.py break_glass`."))
    if link.used is not None:
        raise Unusable(_("This break-glass link was already used: each link signs in once. Make a new one."))
    if link.expires <= timezone.now():
        raise Unusable(_("This break-glass link has expired. Make a new one with `manage.py break_glass`."))
    if not (link.user.is_active and link.user.is_superuser):
        raise Unusable(_("%(name)r is no longer an active superuser.") % {"name": link.user.get_username()})
    return link


def link_user(token: str):
    """Whom the link ``token`` would sign in, without using it; ``Unusable`` otherwise."""
    return _usable(BreakGlassLink.objects.select_related("user").filter(token_hash=_hash(token)).first()).user


def spend(token: str) -> BreakGlassLink:
    """The link ``token`` (its ``user`` to sign in), now used up; ``Unusable`` (nothing changed) otherwise."""
    with transaction.atomic():
        link = BreakGlassLink.objects.select_for_update().select_related("user").filter(token_hash=_hash(token)).first()
        link = _usable(link)
        link.used = timezone.now()
        link.save(update_fields=["used"])
    return link


def lifetime(link: BreakGlassLink):
    """How long the link worked (``--minutes``): a session it signs in lasts no longer."""
    return link.expires - link.created


def user_for(username: str, create: bool):
    """The superuser a link is for (named as ``usernames.find`` finds accounts); with ``create``, made (without a
    usable password) when missing. ``Invalid`` when the name cannot be an account's."""
    user = usernames.find(username)
    if user is None and create:
        user = usernames.create(username, is_staff=True, is_superuser=True)
        log.warning("break-glass: superuser %s created (no usable password)", user.get_username())
    return user
