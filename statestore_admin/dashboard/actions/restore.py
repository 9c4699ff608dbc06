"""Restoring from the audit trail: an event (``/audit/<id>/restore/``) or an export file (``/audit/restore-file/``),
through ``exports.restore``. A conflict lists each key written since, its current value beside the value to
restore (``diffs``), for a choice per key.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy
from django.views.decorators.http import require_http_methods, require_POST

from statestore_admin.access import policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import scope_of
from statestore_admin.core.errors import Conflict, Forbidden, Invalid
from statestore_admin.dashboard.diffs import DiffLine, Side, diff_lines
from statestore_admin.dashboard.http.fragments import fragment
from statestore_admin.dashboard.http.htmx import dialog, error_messages
from statestore_admin.exports import documents as exports
from statestore_admin.exports import restore as restores
from statestore_admin.state import selectors

MAX_UPLOAD_BYTES = 64 * 1024 * 1024  # an export file's size; serving.body_limit lets a request this large in
RESOLUTION = re.compile(r"resolutions\[(.+)\]")


@dataclass
class ConflictRow:
    id: str
    key: str
    scope: dict
    current: Side
    restore: Side
    diff: list[DiffLine]
    hidden: int
    choice: str = ""

    @property
    def is_task(self) -> bool:
        return self.scope.get("asset_id") is None


def _conflict_rows(details: list[dict], chosen: dict[str, str] | None = None) -> list[ConflictRow]:
    rows = []
    for item in details:
        current, wanted = item.get("current") or {}, item.get("restore") or {}
        diff, hidden = diff_lines(current.get("value"), wanted.get("value"))
        scope = {k: item[k] for k in ("dag_id", "run_id", "task_id", "map_index", "region_id", "asset_id") if k in item}
        rows.append(
            ConflictRow(
                id=str(item.get("id", "")),
                key=item.get("key", ""),
                scope=scope,
                current=Side(current.get("value"), _instant(current.get("expires_at"))),
                restore=Side(wanted.get("value"), _instant(wanted.get("expires_at"))),
                diff=diff,
                hidden=hidden,
                choice=(chosen or {}).get(str(item.get("id", "")), ""),
            )
        )
    return rows


def _instant(text: str | None):
    return parse_datetime(text) if isinstance(text, str) else None


def _resolutions(post) -> dict[str, str]:
    chosen = {}
    for name, value in post.items():
        match = RESOLUTION.fullmatch(name)
        if match and value in (restores.KEEP, restores.OVERWRITE):
            chosen[match.group(1)] = value
    return chosen


RESTORED_LINKED = 10  # restored keys the "Restored" dialog links to; the restore's events list them all


def _restored_links(request, outcome: restores.RestoreOutcome) -> tuple[list[dict], int]:
    """The first restored keys, each with a link to the key as it is now (a task key restored is a new row:
    ``selectors.current_task_key``), None for a key the restore deleted; and how many more were restored."""
    scope, links, total = scope_of(request.user), [], 0
    for event, keys in selectors.first_keys_of(outcome.events, RESTORED_LINKED).items():
        total += next(e.key_count for e in outcome.events if e.pk == event)
        for key in keys[: RESTORED_LINKED - len(links)]:
            url = None
            if key.after_value is not None and key.asset_id is not None:
                url = f"{reverse('asset-key', args=[key.asset_id])}?{urlencode({'key': key.key})}"
            elif key.after_value is not None:
                row = selectors.current_task_key(key, scope=scope)
                url = reverse("task-key", args=[row.pk]) if row is not None else None
            links.append({"key": key.key, "url": url, "removed": key.after_value is None})
    return links, total - len(links)


def _restored(request, outcome: restores.RestoreOutcome, fallback: str):
    """Success: htmx gets the outcome in the dialog (with a toast), a plain form the restore's event."""
    message = outcome.describe()
    if request.htmx:
        links, more = _restored_links(request, outcome)
        context = {"outcome": outcome, "message": message, "links": links, "more": more}
        response = render(request, "audit/_restore_done.html", context)
        response["HX-Trigger"] = json.dumps({"toast": {"level": "success", "message": message}, "stateChanged": True})
        return response
    messages.success(request, message)
    return redirect(reverse("audit-event", args=[outcome.events[0].pk]) if outcome.events else fallback)


@require_http_methods(["GET", "POST"])
@fragment(pgettext_lazy("action", "Restore"))
def audit_restore(request, event_id):
    """GET: the confirmation; POST: ``restores.restore_event``. A conflict lists each key written since,
    current value beside the value to restore, for a choice per key (``resolutions[<audit key id>]``)."""
    event = selectors.viewable_audit_event(event_id, user=request.user)
    policies.require(request.user, event.visible_store, "restore")
    errors = []
    if request.method == "POST":
        chosen = _resolutions(request.POST)
        try:
            outcome = restores.restore_event(
                actor=Actor.from_request(request),
                event_id=event.pk,
                overwrite=request.POST.get("overwrite") == "1",
                resolutions=chosen,
            )
        except Conflict as exc:
            context = {"event": event, "message": str(exc), "conflicts": _conflict_rows(exc.details, chosen)}
            return dialog(request, "audit/_restore_conflict.html", context, status=422)
        except ValidationError as exc:
            errors = error_messages(exc)
        else:
            return _restored(request, outcome, reverse("audit-event", args=[event.pk]))
    context = {"event": event, "errors": errors, "restorable": event.restorable}
    return dialog(request, "audit/_restore_confirm.html", context, status=422 if errors else 200)


def _read_upload(upload) -> bytes:
    if upload is None:
        raise Invalid({"file": _("Choose an export file (.json).")})
    if upload.size > MAX_UPLOAD_BYTES:
        raise Invalid({"file": _("The file is larger than %(size)s MB.") % {"size": MAX_UPLOAD_BYTES // (1024 * 1024)}})
    return upload.read()


@require_POST
@fragment(pgettext_lazy("action", "Restore"))
def audit_restore_file(request):
    """Restore the keys of an export file in two steps: the upload shows what the restore would do
    (``restores.preview_document``), and the restore (``restores.restore_document``) happens only when the
    same file is sent again with the preview's ``confirmed`` digest of it. On any error nothing changes."""
    if not policies.restorable_stores(request.user):
        raise Forbidden(_("Restoring needs the add, change and delete permissions on a store."))
    overwrite = request.POST.get("overwrite") in ("1", "on")
    errors, conflicts, message = [], [], ""
    actor = Actor.from_request(request)
    try:
        raw = _read_upload(request.FILES.get("file"))
        document = exports.read_document(raw)
        digest = hashlib.sha256(raw).hexdigest()
        if request.POST.get("confirmed") != digest:  # not confirmed, or another file than the one previewed
            preview = restores.preview_document(actor=actor, document=document, overwrite=overwrite)
            context = {
                "preview": preview,
                "digest": digest,
                "overwrite": overwrite,
                "name": request.FILES["file"].name,
                "another_file": bool(request.POST.get("confirmed")),
                "conflicts": _conflict_rows(preview.conflicts),
            }
            return dialog(request, "audit/_upload_preview.html", context)
        outcome = restores.restore_document(actor=actor, document=document, overwrite=overwrite)
    except Conflict as exc:
        message, conflicts = str(exc), _conflict_rows(exc.details)
    except ValidationError as exc:
        errors = error_messages(exc)
    else:
        return _restored(request, outcome, reverse("audit"))
    context = {"errors": errors, "conflicts": conflicts, "message": message, "overwrite": overwrite}
    return dialog(request, "audit/_upload_result.html", context, status=422)
