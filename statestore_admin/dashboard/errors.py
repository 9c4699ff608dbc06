"""403 and 404: a page for browsers, one line of text for htmx (shown as a toast)."""

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
