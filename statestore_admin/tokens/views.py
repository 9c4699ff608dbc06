"""The user's own API tokens: create (shown once, after a redirect), list, revoke (after a confirmation).

The token shown after the redirect never sits in the session as it is: the session keeps it sealed with a
one-time pad, and the pad goes to the browser alone (an HttpOnly cookie for this page, a minute long). A
copy of the session table, or the browser's cookie alone, reveals nothing; the GET that shows the token
forgets both.
"""

import base64
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import patch_cache_control
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods

from statestore_admin.access.actors import Actor
from statestore_admin.tokens import services
from statestore_admin.tokens.models import ApiToken, digest

LIFETIMES = (30, 90, 365)  # days offered on the page, capped at API_TOKEN_MAX_AGE_DAYS
NEW_TOKEN = "tokens.new_token"  # session key: the token just created, sealed, shown once by the GET that follows
PAD_COOKIE = "tokens_new_key"  # the browser's half: the pad that unseals it
PAD_MAX_AGE = 60  # seconds: the redirect follows at once
UNSHOWABLE = gettext_lazy(
    "The new token cannot be shown here (it was created in another browser or over a minute ago): "
    "revoke it and create another."
)


def lifetimes() -> list[int]:
    cap = settings.API_TOKEN_MAX_AGE_DAYS
    days = [d for d in LIFETIMES if d < cap]
    return [*days, cap]


@require_http_methods(["GET", "POST"])
def api_tokens(request):
    if request.method == "POST":
        if "revoke" in request.POST:
            pk = request.POST.get("revoke", "").strip()
            if not pk.isascii() or not pk.isdigit():  # not a token's id: there is nothing to look up
                messages.error(request, _("Nothing revoked: choose the token to revoke in the list below."))
                return redirect("api-tokens")
            token = get_object_or_404(ApiToken.objects.active(), pk=int(pk), user=request.user)
            services.revoke(token, f"revoked by {request.user.get_username()}", actor=Actor.from_request(request))
            messages.success(request, _("Revoked token %(prefix)s….") % {"prefix": token.prefix})
            return redirect("api-tokens")
        choices = lifetimes()
        try:
            days = int(request.POST.get("expires_in_days") or choices[-1])
        except ValueError:
            days = -1
        if days not in choices:
            messages.error(request, _("Choose a lifetime of %(days)s days.") % {"days": ", ".join(map(str, choices))})
            return redirect("api-tokens")
        _record, token = services.issue(
            request.user,
            request.POST.get("name", "").strip(),
            expires_in=timedelta(days=days),
            read_only=bool(request.POST.get("read_only")),
            actor=Actor.from_request(request),
        )
        response = redirect("api-tokens")
        _seal(request, response, token)
        return response
    new_token = _unseal(request)
    tokens = ApiToken.objects.filter(user=request.user)
    response = render(
        request,
        "tokens/index.html",
        {"tokens": tokens, "new_token": new_token, "lifetimes": lifetimes()},
    )
    if new_token:  # never written to the browser's cache: Back or a reopened tab asks the server, which forgot it
        patch_cache_control(response, no_store=True)
    if PAD_COOKIE in request.COOKIES:
        response.delete_cookie(PAD_COOKIE, path=request.path, samesite="Strict")
    return response


def _xor(data: bytes, pad: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(data, pad, strict=True))


def _seal(request, response, token: str) -> None:
    """The session gets the token XORed with a fresh pad (and its digest, to know it again); the browser
    gets the pad."""
    data = token.encode()
    pad = secrets.token_bytes(len(data))
    sealed = base64.urlsafe_b64encode(_xor(data, pad)).decode()
    request.session[NEW_TOKEN] = {"sealed": sealed, "digest": digest(token)}
    response.set_cookie(
        PAD_COOKIE,
        base64.urlsafe_b64encode(pad).decode(),
        max_age=PAD_MAX_AGE,
        path=request.path,
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Strict",
    )


def _unseal(request) -> str | None:
    """The token just created, once, if this browser holds its pad; otherwise None (with a message if a
    token was waiting)."""
    waiting = request.session.pop(NEW_TOKEN, None)
    if not isinstance(waiting, dict):
        return None
    try:
        sealed = base64.urlsafe_b64decode(waiting["sealed"])
        pad = base64.urlsafe_b64decode(request.COOKIES.get(PAD_COOKIE, ""))
        token = _xor(sealed, pad).decode()
    except (KeyError, TypeError, ValueError):  # no pad, another token's, or not base64: not this token
        token = ""
    if token and secrets.compare_digest(digest(token), str(waiting.get("digest"))):
        return token
    messages.error(request, UNSHOWABLE)
    return None


@require_GET
def revoke_api_token(request, pk):
    token = get_object_or_404(ApiToken.objects.active(), pk=pk, user=request.user)
    return render(request, "tokens/revoke.html", {"token": token})
