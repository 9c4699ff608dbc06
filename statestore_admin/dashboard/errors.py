"""400, 403 and 404: a page for browsers, one line of text for htmx (shown as a toast). Under ``/api/`` a
400 is JSON in Airflow's shape (``middleware.ApiErrorsAsJsonMiddleware`` makes every other error JSON)."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponseForbidden, HttpResponseNotFound
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views import defaults

from statestore_admin.web import is_api, json_error

NOT_FOUND = gettext_lazy("Nothing here: it may have been deleted, or the address is mistyped.")


def _message(exception, fallback: str) -> str:
    """The exception's own sentence for people, or ``fallback`` for what is not one: the URL resolver's
    details (a dict of the patterns tried), markup, or ``get_object_or_404``'s model names."""
    text = str(exception) if exception is not None else ""
    if not text or text.startswith(("{", "<")) or text.endswith("matches the given query."):
        return fallback
    return text


def permission_denied(request, exception=None):
    if request.headers.get("HX-Request"):
        return HttpResponseForbidden(
            _message(exception, _("You do not have permission to do that.")), content_type="text/plain; charset=utf-8"
        )
    return defaults.permission_denied(request, exception, template_name="errors/403.html")


def not_found(request, exception=None):
    if request.headers.get("HX-Request"):
        return HttpResponseNotFound(
            _message(exception, _("Not found: it may have been deleted.")), content_type="text/plain; charset=utf-8"
        )
    return render(request, "errors/404.html", {"message": _message(exception, NOT_FOUND)}, status=404)


def bad_request(request, exception=None):
    """A request Django refuses (a malformed or oversized body, a bad Host…). A body over
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is 413, Content Too Large."""
    too_big = isinstance(exception, RequestDataTooBig)
    if is_api(request):
        if too_big:
            return json_error(413, f"Request body too large: at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes")
        return json_error(400)
    response = defaults.bad_request(request, exception)
    if too_big:
        response.status_code = 413
    return response
