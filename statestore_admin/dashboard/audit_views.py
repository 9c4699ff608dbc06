"""The audit trail's pages: the Audit list, one event with its keys and their diffs, restoring an event or
an export file, a key's history, and the downloads a delete's confirmation offers.

Reads go through ``state.selectors`` and writes through ``state.services``; the templates escape every
key and value (a diff is a list of plain text lines, never HTML).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass, field

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods, require_POST

from statestore_admin.access import permissions, policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import scope_of
from statestore_admin.airflow.models import worker_ref_of
from statestore_admin.core.errors import Conflict, Forbidden, Invalid, NotFound
from statestore_admin.core.values import parse_datetime_aware, pretty, stored_surrogate
from statestore_admin.dashboard.actions import task_selection
from statestore_admin.dashboard.downloads import bad_request, export_download
from statestore_admin.dashboard.htmx import dialog, error_messages
from statestore_admin.dashboard.pages import render_page, requires_view
from statestore_admin.dashboard.timezones import active_zone_name, as_wall_time, wall_times_as_instants
from statestore_admin.exports import documents as exports
from statestore_admin.exports import restore as restores
from statestore_admin.records.models import AuditEvent, AuditKey
from statestore_admin.state import selectors

MAX_DIFF_LINES = 400  # a diff longer than this is cut, with the number of lines left out
COMPACT_CHARS = 2000  # both sides of a change shown unfolded up to this many characters
MAX_UPLOAD_BYTES = 64 * 1024 * 1024
OUTCOMES = {"done": "done", "failed": "failed", "pending": "in progress", "unknown": "outcome unknown"}
FILTER_LABELS = {
    "actor": "Actor",
    "action": "Action",
    "via": "Via",
    "dag_id": "DAG id",
    "run_id": "Run id",
    "task_id": "Task id",
    "asset_id": "Asset id",
    "key": "Key",
    "since": "Since",
    "until": "Until",
}
TIME_FILTERS = ("since", "until")
RESOLUTION = re.compile(r"resolutions\[(.+)\]")


# Diffs --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DiffLine:
    kind: str  # add, del, ctx or hunk: a CSS class; ``text`` keeps its +/- marker for screen readers
    text: str


def diff_lines(before: str | None, after: str | None) -> tuple[list[DiffLine], int]:
    """A line diff of the two values, each pretty-printed as JSON; and how many lines were left out."""
    old = pretty(before).splitlines() if before is not None else []
    new = pretty(after).splitlines() if after is not None else []
    if before is None or after is None:
        lines = [DiffLine("add", f"+{line}") for line in new] + [DiffLine("del", f"-{line}") for line in old]
    else:
        lines = []
        for text in list(difflib.unified_diff(old, new, lineterm="", n=3))[2:]:
            kind = {"+": "add", "-": "del", "@": "hunk"}.get(text[:1], "ctx")
            lines.append(DiffLine(kind, text))
    return lines[:MAX_DIFF_LINES], max(0, len(lines) - MAX_DIFF_LINES)


@dataclass
class Side:
    """One side of a change: the value (None: no row) and its expiry, pretty and marked if a reference."""

    value: str | None
    expires_at: object = None
    exists: bool = field(init=False)
    pretty: str = field(init=False)
    ref: str | None = field(init=False)
    surrogate: str | None = field(init=False)  # where the value holds a lone surrogate (values.stored_surrogate)

    def __post_init__(self):
        self.exists = self.value is not None
        self.pretty = pretty(self.value) if self.value is not None else ""
        self.ref = worker_ref_of(self.value)
        self.surrogate = stored_surrogate(self.value) if self.value is not None else None


@dataclass
class KeyChange:
    """An ``AuditKey`` ready to show: what kind of change, both sides, the diff."""

    key: AuditKey
    kind: str  # added, deleted, changed, expiry (only the expiry changed), unchanged
    before: Side
    after: Side
    diff: list[DiffLine]
    hidden: int

    @property
    def expiry_changed(self) -> bool:
        return self.before.exists and self.after.exists and self.before.expires_at != self.after.expires_at

    @property
    def is_task(self) -> bool:
        return self.key.asset_id is None

    @property
    def compact(self) -> bool:
        """Small enough to show both sides open."""
        return len(self.before.pretty) + len(self.after.pretty) <= COMPACT_CHARS


def key_change(key: AuditKey) -> KeyChange:
    before = Side(key.before_value, key.before_expires_at)
    after = Side(key.after_value, key.after_expires_at)
    if not before.exists and after.exists:
        kind = "added"
    elif before.exists and not after.exists:
        kind = "deleted"
    elif key.before_value != key.after_value:
        kind = "changed"
    elif key.before_expires_at != key.after_expires_at:
        kind = "expiry"
    else:
        kind = "unchanged"
    diff, hidden = diff_lines(key.before_value, key.after_value)
    return KeyChange(key, kind, before, after, diff, hidden)


def key_history(keys: list[AuditKey]) -> list[KeyChange]:
    """A key's history (``selectors.task_key_history`` / ``asset_key_history``) ready for the key pages."""
    return [key_change(key) for key in keys]


# The Audit page -----------------------------------------------------------------------------------
def _filter_fields(params, errors: dict) -> list[dict]:
    choices = {"action": AuditEvent.Action.choices, "via": AuditEvent.Via.choices}
    return [
        {
            "name": name,
            "label": label,
            "value": as_wall_time(params.get(name, "")) if name in TIME_FILTERS else params.get(name, ""),
            "choices": choices.get(name),
            # Since and Until: the one date-time input of the pages, in the reader's zone (shown beside it)
            "type": "datetime-local" if name in TIME_FILTERS else "text",
            "zone": active_zone_name() if name in TIME_FILTERS else "",
            "error": bool(errors.get(name)),
        }
        for name, label in FILTER_LABELS.items()
    ]


LIST_KEYS = 3  # keys an event of the Audit list names, then "and N more"


def _name_keys(events: list[AuditEvent]) -> None:
    """Each event's first keys (``named``) and how many more it has (``unnamed``): one query a page."""
    first = selectors.first_keys_of(events, LIST_KEYS)
    for event in events:
        event.named = first.get(event.pk, [])[:LIST_KEYS]
        event.unnamed = max(0, event.key_count - len(event.named))


def audit_list(request):
    """The audit trail, newest first, of the stores the user may view; filters and cursor in the URL."""
    stores = policies.require_any_view(request.user)
    errors: dict[str, list[str]] = {}
    try:
        query = selectors.AuditQuery.from_params(wall_times_as_instants(request.GET, TIME_FILTERS))
    except Invalid as exc:
        errors, query = exc.message_dict, None
    page = (
        selectors.audit_events(query, stores, request.GET.get("cursor"), scope=scope_of(request.user))
        if query
        else None
    )
    if page:
        _name_keys(page.items)
    fields = _filter_fields(request.GET, errors)
    context = {
        "page": page,
        "fields": fields,
        "active_filters": sum(1 for field in fields if field["value"]),  # the folded filters' summary
        "errors": [(FILTER_LABELS.get(name, name), message) for name, ms in errors.items() for message in ms],
        "filtered": bool(errors) or query.active,
        "outcomes": OUTCOMES,
        "can_upload": bool(policies.restorable_stores(request.user)),
        "max_upload_mb": MAX_UPLOAD_BYTES // (1024 * 1024),
        "now": timezone.now(),
        "zone": active_zone_name(),
    }
    response = render_page(request, "audit/list.html", context, "audit/_panel.html")
    if errors:
        response.status_code = 400
    return response


def audit_event(request, event_id):
    """One event: who, what, where, its outcome, and each key with both sides and a diff."""
    event = selectors.viewable_audit_event(event_id, user=request.user)
    store = event.visible_store
    page = selectors.audit_keys(event, request.GET.get("cursor"))
    run = asset = None
    if store == permissions.TASK and event.dag_id and event.run_id:
        try:
            run = selectors.find_run(event.dag_id, event.run_id, scope=scope_of(request.user))
        except NotFound:
            pass
    if store == permissions.ASSET and event.asset_id is not None:
        try:
            asset = selectors.get_asset(event.asset_id, scope=scope_of(request.user))
        except NotFound:
            pass
    context = {
        "event": event,
        "store": store,
        "outcome": OUTCOMES.get(event.outcome, event.outcome),
        "page": page,
        "changes": [key_change(key) for key in page.items],
        "details": json.dumps(event.details, indent=2, ensure_ascii=False, sort_keys=True) if event.details else "",
        "run": run,
        "asset": asset,
        "can_restore": event.restorable and policies.allows(request.user, store, "restore"),
        "now": timezone.now(),
    }
    return render_page(request, "audit/event.html", context, "audit/_event_panel.html")


@requires_view(permissions.TASK)
def run_lookup(request):
    """A DAG run named by (dag_id, run_id), as the audit trail records it: its page, or 404."""
    run = selectors.find_run(request.GET.get("dag_id", ""), request.GET.get("run_id", ""), scope=scope_of(request.user))
    return redirect("run-detail", run.pk)


# Restore ------------------------------------------------------------------------------------------
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
        raise Invalid({"file": "Choose an export file (.json)."})
    if upload.size > MAX_UPLOAD_BYTES:
        raise Invalid({"file": f"The file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB."})
    return upload.read()


@require_POST
def audit_restore_file(request):
    """Restore the keys of an export file in two steps: the upload shows what the restore would do
    (``restores.preview_document``), and the restore (``restores.restore_document``) happens only when the
    same file is sent again with the preview's ``confirmed`` digest of it. On any error nothing changes."""
    if not policies.restorable_stores(request.user):
        raise Forbidden("Restoring needs the add, change and delete permissions on a store.")
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


# Downloads of what a confirmation is about to delete ----------------------------------------------
@requires_view(permissions.TASK)
def task_keys_export(request):
    """The task keys of a confirmation (``run``, ``task_id``, ``map_index`` or ``ids``) not written after
    its ``confirmed_at``: every key it lists (``selectors.confirmed_keys``), as an export document."""
    try:
        selection, _run = task_selection(request.GET, request.user)
        confirmed_at = parse_datetime_aware(request.GET.get("confirmed_at", ""), "confirmed_at")
        rows = selectors.confirmed_keys(selection.queryset(scope_of(request.user)), confirmed_at=confirmed_at)
    except ValidationError as exc:
        return bad_request(exc)
    return export_download(exports.keys_export("task-keys", task_rows=rows), "json")


@requires_view(permissions.ASSET)
def asset_keys_export(request, asset_id):
    """An asset's keys of a confirmation (``keys``, or ``all=1``) not written after its ``confirmed_at``."""
    asset = selectors.get_asset(asset_id, scope=scope_of(request.user))
    keys = None if request.GET.get("all") == "1" else request.GET.getlist("keys")
    try:
        if keys == []:
            raise Invalid({"keys": "Select at least one key."})
        confirmed_at = parse_datetime_aware(request.GET.get("confirmed_at", ""), "confirmed_at")
    except ValidationError as exc:
        return bad_request(exc)
    rows = selectors.confirmed_keys(asset_id=asset.pk, keys=keys, confirmed_at=confirmed_at)
    return export_download(exports.keys_export(f"asset-{asset.pk}-keys", asset_rows=rows), "json")
