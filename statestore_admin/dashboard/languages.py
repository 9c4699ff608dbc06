"""The language of the pages: the account's own choice (``identity.preferences``), else the ``django_language``
cookie (the choice made on the sign-in page, or by an account before it signed in), else the browser's
``Accept-Language``, else ``settings.LANGUAGE_CODE``. Django's ``LocaleMiddleware`` reads the last three; this
module's middleware puts the account's choice over them. URLs carry no language, so a shared link opens in the
reader's language.

The APIs (``/api/``) always answer in English, whatever the caller's language: their messages are part of a
machine contract, like Airflow's own API.
"""

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponseBadRequest, HttpResponseRedirect
from django.utils import translation
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_POST
from django.views.i18n import JavaScriptCatalog

from statestore_admin.core.errors import Invalid
from statestore_admin.identity import preferences
from statestore_admin.web import is_api

API_LANGUAGE = "en"


class AccountLanguageMiddleware:
    """After authentication: activates the account's language, or English for the APIs."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        code = API_LANGUAGE if is_api(request) else preferences.language_of(request.user)
        if not code:
            return self.get_response(request)
        with translation.override(code):  # the language LocaleMiddleware chose comes back afterwards
            request.LANGUAGE_CODE = translation.get_language()
            response = self.get_response(request)
            response.headers.setdefault("Content-Language", request.LANGUAGE_CODE)  # LocaleMiddleware's setdefault
        return response


# The strings of static/js in the request's language. Its URL names the language (base.html), so a browser may
# keep it for an hour; it is not in the server's cache (that holds data only, never responses).
javascript_catalog = login_not_required(
    cache_control(max_age=3600, private=True)(JavaScriptCatalog.as_view(packages=["statestore_admin.dashboard"]))
)


@login_not_required
@require_POST
def choose_language(request):
    """The header's (and the sign-in page's) language menu: remembered for the account when signed in and in a
    cookie for the sign-in page; "" returns to the browser's language. Back to the page it was chosen on."""
    code = request.POST.get("language", "")
    try:
        preferences.choose_language(request.user, code)
    except Invalid as invalid:  # a language not offered: nothing changes
        return HttpResponseBadRequest(" ".join(invalid.messages), content_type="text/plain; charset=utf-8")
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure()):
        target = "/"
    response = HttpResponseRedirect(target)
    if code:
        response.set_cookie(
            settings.LANGUAGE_COOKIE_NAME,
            code,
            max_age=settings.LANGUAGE_COOKIE_AGE,
            secure=settings.LANGUAGE_COOKIE_SECURE,
            httponly=settings.LANGUAGE_COOKIE_HTTPONLY,
            samesite=settings.LANGUAGE_COOKIE_SAMESITE,
        )
    else:
        response.delete_cookie(settings.LANGUAGE_COOKIE_NAME, samesite=settings.LANGUAGE_COOKIE_SAMESITE)
    return response
