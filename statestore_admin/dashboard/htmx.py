"""The answers an action gives, with htmx or without it: a dialog (or the same form as a page without
JavaScript), "done" (a toast and a refresh, or a move to ``next``), and the on-site ``next`` URL they honour.
The page-or-panel rendering of the lists is in ``pages.py``.
"""

import json

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme


def safe_url(request, url: str) -> str:
    """``url`` when it stays on this site, else ""."""
    return url if url and url_has_allowed_host_and_scheme(url, {request.get_host()}, request.is_secure()) else ""


def next_url(request, fallback: str) -> str:
    """Where to go once done: the ``next`` the form or link names, else the page htmx was on, else ``fallback``."""
    named = request.POST.get("next") or request.GET.get("next") or request.headers.get("HX-Current-URL", "")
    return safe_url(request, named) or fallback


def error_messages(exc: Exception) -> list[str]:
    """The messages of a domain error, flat, for a toast or a dialog."""
    if isinstance(exc, ValidationError) and hasattr(exc, "error_dict"):
        return [message for messages_ in exc.message_dict.values() for message in messages_]
    return [str(exc)]


def done(request, message: str, fallback: str, level: str = "success"):
    """Done (``level`` "info": done by doing nothing): a toast and a refresh of the page's panel, or a
    move to ``next`` when the form names one (an action that deletes what the page shows)."""
    if request.htmx and request.POST.get("next"):
        messages.add_message(request, getattr(messages, level.upper()), message)
        response = HttpResponse(status=204)
        response["HX-Redirect"] = next_url(request, fallback)
        return response
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Trigger"] = json.dumps(
            {"toast": {"level": level, "message": message}, "stateChanged": True, "closeModal": True}
        )
        return response
    messages.add_message(request, getattr(messages, level.upper()), message)
    return redirect(next_url(request, fallback))


def dialog(request, template: str, context: dict, status: int = 200):
    """``template`` as a dialog for htmx, or inside a page of its own without JavaScript."""
    next_ = safe_url(request, request.POST.get("next") or request.GET.get("next") or "")
    context = {**context, "next": next_, "dialog": template}
    return render(request, template if request.htmx else "actions/page.html", context, status=status)
