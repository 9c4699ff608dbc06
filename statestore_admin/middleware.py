"""The project's own middleware: NUL characters refused before they reach a database, the API's errors as
JSON, the domain's NotFound and an unavailable Airflow database as answers; and Django's middleware that the
API has no use for, passed by under ``/api/``.

PostgreSQL cannot store or compare text containing NUL (0x00): a lookup by such a key or filter would
end in a database error (a 500, as in Airflow). Here it is a clear 400 for pages and, for the API, a
422 in Airflow's error format.
"""

from django.contrib.messages.middleware import MessageMiddleware
from django.http import HttpResponseBadRequest, JsonResponse
from django.middleware.locale import LocaleMiddleware
from django.utils.translation import gettext as _

from statestore_admin.web import is_api, json_error


class PagesOnly:
    """Mixed into a middleware that the API has no use for: a request under ``/api/`` passes it by. On a call of
    the API each middleware costs Python time; together they cost more than its two queries (the profile in
    docs/benchmarks/api-load.md)."""

    def __call__(self, request):
        if is_api(request):
            return self.get_response(request)
        return super().__call__(request)


class PageLanguageMiddleware(PagesOnly, LocaleMiddleware):
    """The browser's language (its cookie, ``Accept-Language``), for pages: the API always answers in English
    (``dashboard.languages.AccountLanguageMiddleware``), whatever the caller's, and so needs no
    ``Vary: Accept-Language``."""


class PageMessagesMiddleware(PagesOnly, MessageMiddleware):
    """The one-time notices of the pages (``django.contrib.messages``), which the API never shows."""


MESSAGE = "NUL characters (\\x00) are not allowed"


def _has_nul(querydict) -> str | None:
    for name, values in querydict.lists():
        if "\x00" in name or any("\x00" in value for value in values):
            return name
    return None


class RejectNulCharactersMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        where = None
        if "\x00" in request.path:
            where = ["path"]
        elif (name := _has_nul(request.GET)) is not None:
            where = ["query", name]
        elif (
            request.method == "POST"
            and request.content_type
            in (
                "application/x-www-form-urlencoded",
                "multipart/form-data",
            )
            and (name := _has_nul(request.POST)) is not None
        ):
            where = ["body", name]
        if where is None:
            return self.get_response(request)
        if is_api(request):
            return JsonResponse(
                {"detail": [{"type": "value_error", "loc": where, "msg": f"Value error, {MESSAGE}", "input": None}]},
                status=422,
            )
        # Translators: where is "path", "query <field>" or "body <field>".
        message = _("NUL characters (\\x00) are not allowed in %(where)s.") % {"where": " ".join(where)}
        return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")


class DomainErrorMiddleware:
    """The pages' answer to the domain's NotFound: the 404 page (a toast line for htmx). The API maps the
    domain's exceptions itself (``api.errors``)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        from statestore_admin.core.errors import NotFound
        from statestore_admin.dashboard.errors import not_found

        if isinstance(exception, NotFound):
            return not_found(request, exception)
        return None


class ApiErrorsAsJsonMiddleware:
    """Under ``/api/`` every error is JSON in Airflow's shape (``{"detail": …}``): Django's own answers to
    an unrouted path (404), a bad or oversized request (400, 413), a method a non-DRF view does not take
    (405) and an unexpected exception (500, logged as usual) are HTML; here they become
    ``{"detail": "Not Found"}`` etc. JSON answers (DRF's, with their details) pass unchanged."""

    # The replaced answer's security headers too: the middleware inside this one set them (the CSP with
    # frame-ancestors 'none', X-Frame-Options: DENY), and the JSON made here would otherwise have neither.
    KEPT_HEADERS = ("Allow", "WWW-Authenticate", "Retry-After", "Content-Security-Policy", "X-Frame-Options")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            response.status_code < 400
            or not is_api(request)
            or response.get("Content-Type", "").startswith("application/json")
        ):
            return response
        kept = {name: response[name] for name in self.KEPT_HEADERS if response.has_header(name)}
        return json_error(response.status_code, headers=kept)


class AirflowDatabaseUnavailableMiddleware:
    """503 when Airflow's metadata database is unreachable, hung or lost mid-request
    (``airflow.availability.AirflowDatabaseUnavailable``): the 503 page with the reason, one line of text
    for htmx (a toast), ``{"detail": ...}`` under ``/api/`` (DRF's views answer it in ``api.errors``
    already). Never a stack trace; the reason never holds the password. Requests that do not touch
    Airflow's database never get here."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        from django.http import HttpResponse
        from django.shortcuts import render

        from statestore_admin.airflow.availability import AirflowDatabaseUnavailable

        if not isinstance(exception, AirflowDatabaseUnavailable):
            return None
        if is_api(request):
            return JsonResponse({"detail": exception.detail}, status=503)
        if request.headers.get("HX-Request"):
            return HttpResponse(f"{exception.detail}.", status=503, content_type="text/plain; charset=utf-8")
        context = {"reason": exception.reason, "kind": getattr(exception, "kind", "database")}
        return render(request, "errors/503.html", context, status=503)
