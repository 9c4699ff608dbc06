"""Break-glass, the page (``identity.break_glass`` makes and spends the links): opening a link shows a button; only
pressing it (a POST, with CSRF) uses the link, so a chat or mail client that fetches links to preview them
cannot spend it. The session's changes are audited as made after ``break-glass``, and it ends when the link's own
minutes have passed again after sign-in (not after ``SESSION_COOKIE_AGE``).

The token is in the link's query string (``/break-glass/?token=…``) and in the button's form, never in the path:
Django's Forbidden and CSRF lines and the login throttle's "successful login" line log the path, and a token is a
secret. Only the web server's access log sees the query string.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from statestore_admin.identity import break_glass, sign_in

log = logging.getLogger(__name__)


@login_not_required
@never_cache
@require_http_methods(["GET", "POST"])
def view(request):
    token = request.POST.get("token") or request.GET.get("token") or ""
    try:
        if request.method == "GET":
            context = {"link_user": break_glass.link_user(token), "token": token}
            return render(request, "registration/break_glass.html", context)
        link = break_glass.spend(token)
    except break_glass.Unusable as exc:
        return _refused(request, str(exc))
    user = link.user
    sign_in.start_session(request, user, sign_in.BREAK_GLASS)
    request.session.set_expiry(timezone.now() + break_glass.lifetime(link))  # a fixed end, however often it is used
    log.warning("break-glass sign-in: %s, from %s", user.get_username(), request.META.get("REMOTE_ADDR", ""))
    return HttpResponseRedirect(resolve_url(settings.LOGIN_REDIRECT_URL))


def _refused(request, message: str):
    log.warning("break-glass link refused from %s: %s", request.META.get("REMOTE_ADDR", ""), message)
    return render(request, "registration/break_glass.html", {"message": message}, status=403)
