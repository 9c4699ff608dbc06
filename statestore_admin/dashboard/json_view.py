"""The parts of a key's value that its page's tree loads (``templatetags.json_folding``: how much a page holds)."""

import json
from urllib.parse import urlencode

from django.http import Http404, HttpResponse

from statestore_admin.core.values import pretty, stored_value
from statestore_admin.dashboard.templatetags.json_folding import LARGE_VALUE, Tree


def value_part(request, stored: str, resolve) -> HttpResponse:
    """A part of a key's value for its page's tree, to htmx only (404 otherwise, as for a path the value does
    not have): of ``stored`` (the row's text), or with ``of=resolved`` of the value behind its worker-side
    reference (``resolve()``: an ``objects.Resolved`` or None). ``raw=1``: its whole text, indented (the raw
    view); ``copy=1``: its text as stored ("Copy JSON"); ``path``
    (a JSON array of keys and indexes) and ``from``: the entries of that array or object from there; ``all=1``
    with them: every entry and everything within."""
    if not request.htmx:
        raise Http404("a part of a value's tree, for its page")
    text = stored
    if request.GET.get("of") == "resolved":
        resolved = resolve()
        if resolved is None or resolved.text is None:
            raise Http404("no value behind a reference")
        text = resolved.text
    if request.GET.get("raw") or request.GET.get("copy"):
        return HttpResponse(text if request.GET.get("copy") else pretty(text), content_type="text/plain; charset=utf-8")
    try:
        path = json.loads(request.GET.get("path", "[]"))
        start = int(request.GET.get("from", "0"))
        node = stored_value(text)
        if not isinstance(path, list) or start < 0:
            raise ValueError(path)
        for step in path:
            if isinstance(node, dict) and isinstance(step, str):
                node = node[step]
            elif isinstance(node, list) and isinstance(step, int) and not isinstance(step, bool) and step >= 0:
                node = node[step]
            else:
                raise KeyError(step)
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise Http404("no such part of the value") from error
    if not isinstance(node, dict | list):
        raise Http404("no entries there")
    kept = urlencode({name: request.GET[name] for name in ("key", "of") if name in request.GET})  # the value's name
    src = f"{request.path}?{kept}" if kept else request.path
    part = Tree(src, large=len(text) > LARGE_VALUE, whole=bool(request.GET.get("all")))
    return HttpResponse(part.entries(node, path, start))
