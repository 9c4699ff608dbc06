"""Local passwords switched off (``LOCAL_PASSWORDS=0``): with single sign-on or the authenticating proxy in
charge, the login page offers no password form and a password sent to it or to ``/admin/login/`` is refused
before any authentication: no password is checked and nothing counts towards the login throttle. The one way
in without the provider is ``manage.py break_glass`` (``sso.break_glass``). API tokens are untouched.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.core import checks
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext_lazy

log = logging.getLogger(__name__)

REFUSED = gettext_lazy(
    "Password sign-in is switched off for this dashboard: sign in through single sign-on. "
    "Administrators locked out can use `manage.py break_glass`."
)


def sso_configured() -> bool:
    return bool(settings.OIDC_ISSUER) or bool(settings.TRUSTED_PROXY_ADDRESSES)


def _refuse(request):
    log.warning("password sign-in refused (LOCAL_PASSWORDS is off): %s %s", request.method, request.path)
    return render(request, "registration/login.html", {"local_passwords": False, "refused": REFUSED}, status=403)


class LoginView(auth_views.LoginView):
    """Django's login page, without its form while local passwords are off."""

    # Django's form views take a PUT as a POST (a sign-in by PUT); the page is read and its form posted, no more.
    http_method_names = ["get", "head", "post"]

    def post(self, request, *args, **kwargs):
        if not settings.LOCAL_PASSWORDS:
            return _refuse(request)
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "local_passwords": settings.LOCAL_PASSWORDS}


@login_not_required
def admin_login(request):
    """``/admin/login/``: the admin's own password form, or, while local passwords are off, the dashboard's
    login page (which offers single sign-on); a password sent here anyway is refused."""
    if settings.LOCAL_PASSWORDS:
        return admin.site.login(request)
    if request.method == "POST":
        return _refuse(request)
    return redirect_to_login(request.GET.get("next") or reverse("admin:index"))


@checks.register("statestore")
def check_local_passwords(app_configs=None, **kwargs):
    if settings.LOCAL_PASSWORDS or sso_configured():
        return []
    return [
        checks.Error(
            "LOCAL_PASSWORDS is off, but neither single sign-on (OIDC_ISSUER) nor an authenticating proxy "
            "(TRUSTED_PROXY_ADDRESSES) is configured: nobody could sign in.",
            hint="Configure one of them, or leave LOCAL_PASSWORDS on.",
            id="statestore.E047",
        )
    ]
