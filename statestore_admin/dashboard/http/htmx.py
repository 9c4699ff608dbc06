"""The answers an action gives, with htmx or without it: a dialog (or the same form as a page without
JavaScript), "done" (a toast and a refresh, or a move to ``next``), and the on-site ``next`` URL they honour.
The page-or-panel rendering of the lists is in ``pages.py``.
"""

import json

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from statestore_admin.access import policies

UNDO_TAG = "undo:"  # a message's extra_tags: "undo:<event id>", the toast's Undo (templates/includes/_toast_undo.html)


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


def undo_of(request, event) -> int | None:
    """The audit event a toast's Undo restores: the action's event, when the user may restore it (the
    restore checks again, as for any restore)."""
    if event is None or not event.restorable or not policies.allows(request.user, event.store, "restore"):
        return None
    return event.pk


def done(request, message: str, fallback: str, level: str = "success", undo=None):
    """Done (``level`` "info": done by doing nothing): a toast and a refresh of the page's panel, or a
    move to ``next`` when the form names one (an action that deletes what the page shows). ``undo``: the
    action's audit event, offered as the toast's Undo (a POST of its restore) to a user who may restore it."""
    undo_id = undo_of(request, undo)
    tags = f"{UNDO_TAG}{undo_id}" if undo_id else ""
    if request.htmx and request.POST.get("next"):
        messages.add_message(request, getattr(messages, level.upper()), message, extra_tags=tags)
        response = HttpResponse(status=204)
        response["HX-Redirect"] = next_url(request, fallback)
        return response
    if request.htmx:
        toast = {"level": level, "message": message}
        if undo_id:
            toast["undo"] = reverse("audit-restore", args=[undo_id])
        response = HttpResponse(status=204)
        response["HX-Trigger"] = json.dumps({"toast": toast, "stateChanged": True, "closeModal": True})
        return response
    messages.add_message(request, getattr(messages, level.upper()), message, extra_tags=tags)
    return redirect(next_url(request, fallback))


def dialog(request, template: str, context: dict, status: int = 200):
    """``template``, the dialog htmx shows; its view is marked ``fragments.fragment``, which puts it inside a
    page of its own for a request without htmx (no JavaScript, or its address opened)."""
    next_ = safe_url(request, request.POST.get("next") or request.GET.get("next") or "")
    return TemplateResponse(request, template, {**context, "next": next_}, status=status)
