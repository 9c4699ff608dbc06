"""400, 403 and 404: a page for browsers, one line of text for htmx (shown as a toast). Under ``/api/`` a
400 is JSON in Airflow's shape (``middleware.ApiErrorsAsJsonMiddleware`` makes every other error JSON)."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponseForbidden, HttpResponseNotFound
from django.views import defaults


def _message(exception, fallback: str) -> str:
    text = str(exception) if exception is not None else ""
    return text if text and not text.startswith(("{", "<")) else fallback


def permission_denied(request, exception=None):
    if request.headers.get("HX-Request"):
        return HttpResponseForbidden(
            _message(exception, "You do not have permission to do that."), content_type="text/plain; charset=utf-8"
        )
    return defaults.permission_denied(request, exception, template_name="errors/403.html")


def not_found(request, exception=None):
    if request.headers.get("HX-Request"):
        return HttpResponseNotFound(
            _message(exception, "Not found: it may have been deleted."), content_type="text/plain; charset=utf-8"
        )
    return defaults.page_not_found(request, exception, template_name="errors/404.html")


def bad_request(request, exception=None):
    """A request Django refuses (a malformed or oversized body, a bad Host…). A body over
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is 413, Content Too Large."""
    too_big = isinstance(exception, RequestDataTooBig)
    if request.path.startswith("/api/"):
        from statestore_admin.api.errors import json_error

        if too_big:
            return json_error(413, f"Request body too large: at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes")
        return json_error(400)
    response = defaults.bad_request(request, exception)
    if too_big:
        response.status_code = 413
    return response
