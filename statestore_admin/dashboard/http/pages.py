"""What every page view shares: the permission decorators, and rendering a page or only its panel for htmx.

The page modules (``views.*``, ``actions.*``) import from here and never from each other's helpers, so
the page modules form no import cycle.
"""

from functools import wraps

from django.http import HttpResponseBadRequest
from django.shortcuts import render

from statestore_admin.access import policies
from statestore_admin.dashboard.http.htmx import error_messages

PANEL = "keys-panel"


def requires_view(*stores):
    """403 unless the user may view every one of ``stores``."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            for store in stores:
                policies.require(request.user, store, "view")
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def render_page(request, template: str, context: dict, panel: str | None = None):
    """The whole page, or only its panel template when htmx refreshes the panel."""
    if panel and request.htmx and request.htmx.target == PANEL:
        template = panel
    return render(request, template, context)


def requires_view_of_any(view):
    """403 unless the user may view at least one store."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        policies.require_any_view(request.user)
        return view(request, *args, **kwargs)

    return wrapper


def invalid_page(request, exception):
    """400 for a page's parameter that cannot mean anything (a malformed ``region_id``): the error page saying
    what is wrong, one line of text for htmx (a toast). Nothing is read or changed."""
    message = " ".join(error_messages(exception))
    if request.headers.get("HX-Request"):
        return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
    return render(request, "errors/400.html", {"message": message}, status=400)
