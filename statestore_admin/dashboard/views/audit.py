"""The audit trail's pages: the Audit list, and one event with its keys and their diffs (``diffs``). Restoring
an event or an export file is an action (``actions.restore``).

Reads go through ``state.selectors``; the templates escape every key and value (a diff is a list of plain
text lines, never HTML).
"""

from __future__ import annotations

import json

from django.shortcuts import redirect
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from statestore_admin.access import permissions, policies
from statestore_admin.access.scopes import scope_of
from statestore_admin.core.errors import Invalid, NotFound
from statestore_admin.dashboard.actions.restore import MAX_UPLOAD_BYTES
from statestore_admin.dashboard.diffs import key_change
from statestore_admin.dashboard.http.pages import render_page, requires_view
from statestore_admin.dashboard.timezones import active_zone_name, as_wall_time, wall_times_as_instants
from statestore_admin.records.models import AuditEvent
from statestore_admin.state import selectors

OUTCOMES = {
    "done": pgettext_lazy("outcome", "done"),
    "failed": pgettext_lazy("outcome", "failed"),
    "pending": pgettext_lazy("outcome", "in progress"),
    "unknown": pgettext_lazy("outcome", "outcome unknown"),
}
FILTER_LABELS = {
    "actor": _("Actor"),
    "action": _("Action"),
    "via": pgettext_lazy("audit filter", "Via"),
    "dag_id": _("DAG id"),
    "run_id": _("Run id"),
    "task_id": _("Task id"),
    "asset_id": _("Asset id"),
    "key": _("Key"),
    "since": pgettext_lazy("audit filter", "Since"),
    "until": pgettext_lazy("audit filter", "Until"),
}
TIME_FILTERS = ("since", "until")


def _filter_fields(params, errors: dict, hints: dict | None = None) -> list[dict]:
    """The filters as the form shows them; ``hints``: words beside a filter's field (the asset an id names)."""
    choices = {"action": AuditEvent.Action.choices, "via": AuditEvent.Via.choices}
    hints = hints or {}
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
            "hint": hints.get(name, ""),
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


def _asset_name(query, user) -> str:
    """The name of the asset the trail is filtered by, where it exists in the user's scope."""
    if query is None or query.asset_id is None:
        return ""
    try:
        return selectors.get_asset(query.asset_id, scope=scope_of(user)).name
    except NotFound:
        return ""


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
        selectors.with_coordinates(page.items)  # a task instance in a loop named with its iteration
    fields = _filter_fields(request.GET, errors, {"asset_id": _asset_name(query, request.user)})
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
    selectors.with_coordinates([event, *page.items])  # a task instance in a loop named with its iteration
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
