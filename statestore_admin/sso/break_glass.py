"""Break-glass: a superuser gets in when single sign-on is down or local passwords are off. Only someone who can
run ``manage.py break_glass USERNAME`` on the server makes a link; it signs in once, within its minutes. The
database keeps the SHA-256 of the link's random token, never the token. Every link made and used is logged
at WARNING, and the audit trail records the session's changes as ``break-glass``.

Opening the link shows a button; only pressing it (a POST, with CSRF) uses the link, so a chat or mail client
that fetches links to preview them cannot spend it.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model, login
from django.contrib.auth.decorators import login_not_required
from django.db import transaction
from django.http import HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from statestore_admin.state import sign_in
from statestore_admin.state.models import BreakGlassLink

log = logging.getLogger(__name__)

BACKEND = "django.contrib.auth.backends.ModelBackend"  # loads the session's user; the link authenticated them


class Unusable(Exception):
    """The link cannot sign anyone in: the message says why, for the page."""


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def issue(user, minutes: int) -> str:
    """A new link's token for ``user`` (an active superuser), valid ``minutes``."""
    if not (user.is_active and user.is_superuser):
        raise ValueError(f"{user.get_username()!r} is not an active superuser.")
    token = secrets.token_urlsafe(32)
    expires = timezone.now() + timedelta(minutes=minutes)
    BreakGlassLink.objects.create(user=user, token_hash=_hash(token), expires=expires)
    log.warning("break-glass link made for %s, valid until %s", user.get_username(), expires.isoformat())
    return token


def _usable(link: BreakGlassLink | None) -> BreakGlassLink:
    if link is None:
        raise Unusable("This break-glass link is unknown. Make a new one with `manage.py break_glass`.")
    if link.used is not None:
        raise Unusable("This break-glass link was already used: each link signs in once. Make a new one.")
    if link.expires <= timezone.now():
        raise Unusable("This break-glass link has expired. Make a new one with `manage.py break_glass`.")
    if not (link.user.is_active and link.user.is_superuser):
        raise Unusable(f"{link.user.get_username()!r} is no longer an active superuser.")
    return link


def spend(token: str):
    """The user of the link ``token``, which is used up; ``Unusable`` (nothing changed) otherwise."""
    with transaction.atomic():
        link = BreakGlassLink.objects.select_for_update().select_related("user").filter(token_hash=_hash(token)).first()
        link = _usable(link)
        link.used = timezone.now()
        link.save(update_fields=["used"])
    return link.user


@login_not_required
@never_cache
@require_http_methods(["GET", "POST"])
def view(request, token: str):
    if request.method == "GET":
        try:
            link = _usable(BreakGlassLink.objects.select_related("user").filter(token_hash=_hash(token)).first())
        except Unusable as exc:
            return _refused(request, str(exc))
        return render(request, "registration/break_glass.html", {"link_user": link.user})
    try:
        user = spend(token)
    except Unusable as exc:
        return _refused(request, str(exc))
    login(request, user, backend=BACKEND)
    sign_in.remember(request, sign_in.BREAK_GLASS)
    log.warning("break-glass sign-in: %s, from %s", user.get_username(), request.META.get("REMOTE_ADDR", ""))
    return HttpResponseRedirect(resolve_url(settings.LOGIN_REDIRECT_URL))


def _refused(request, message: str):
    log.warning("break-glass link refused from %s: %s", request.META.get("REMOTE_ADDR", ""), message)
    return render(request, "registration/break_glass.html", {"message": message}, status=403)


def user_for(username: str, create: bool):
    """The superuser a link is for; with ``create``, made (without a usable password) when missing."""
    User = get_user_model()
    user = User._default_manager.filter(**{User.USERNAME_FIELD: username}).first()
    if user is None and create:
        user = User(**{User.USERNAME_FIELD: username}, is_staff=True, is_superuser=True)
        user.set_unusable_password()
        user.save()
        log.warning("break-glass: superuser %s created (no usable password)", username)
    return user
