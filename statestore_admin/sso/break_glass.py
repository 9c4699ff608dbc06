"""Break-glass, the page (``state.break_glass`` makes and spends the links): opening a link shows a button; only
pressing it (a POST, with CSRF) uses the link, so a chat or mail client that fetches links to preview them
cannot spend it. The session's changes are audited as made after ``break-glass``.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from statestore_admin.state import break_glass, sign_in

log = logging.getLogger(__name__)


@login_not_required
@never_cache
@require_http_methods(["GET", "POST"])
def view(request, token: str):
    try:
        if request.method == "GET":
            return render(request, "registration/break_glass.html", {"link_user": break_glass.link_user(token)})
        user = break_glass.spend(token)
    except break_glass.Unusable as exc:
        return _refused(request, str(exc))
    sign_in.start_session(request, user, sign_in.BREAK_GLASS)
    log.warning("break-glass sign-in: %s, from %s", user.get_username(), request.META.get("REMOTE_ADDR", ""))
    return HttpResponseRedirect(resolve_url(settings.LOGIN_REDIRECT_URL))


def _refused(request, message: str):
    log.warning("break-glass link refused from %s: %s", request.META.get("REMOTE_ADDR", ""), message)
    return render(request, "registration/break_glass.html", {"message": message}, status=403)
