"""Downloads of the lists as JSON or CSV (``?format=json|csv``, JSON by default), streamed (``exports.documents``).

Each download checks what its list checks: the store's view permission, and the user's scope through the
same selectors (a run, a task instance or an asset out of scope is not found; search and audit rows are
filtered by it). Bad parameters are a 400 naming them, before anything is read.
"""

from __future__ import annotations

from django.utils import timezone

from statestore_admin.access import permissions, policies
from statestore_admin.access.scopes import scope_of
from statestore_admin.core.errors import Forbidden, Invalid
from statestore_admin.dashboard import params
from statestore_admin.dashboard.downloads import bad_request, export_download
from statestore_admin.dashboard.pages import requires_view
from statestore_admin.dashboard.timezones import wall_times_as_instants
from statestore_admin.exports import documents as exports
from statestore_admin.state import search as searching
from statestore_admin.state import selectors


def _format(request) -> str:
    chosen = request.GET.get("format") or "json"
    if chosen not in exports.FORMATS:
        raise Invalid({"format": f"Unknown format {chosen!r}: use json or csv."})
    return chosen


@requires_view(permissions.TASK)
def run_keys_export(request, run_pk):
    """A run's keys, as its page lists them."""
    try:
        chosen = _format(request)
    except Invalid as exc:
        return bad_request(exc)
    run = selectors.get_run(run_pk, scope=scope_of(request.user))
    return export_download(exports.run_keys(run), chosen)


@requires_view(permissions.TASK)
def task_instance_keys_export(request, run_pk, task_id):
    """A task instance's keys: ``map_index`` a number (-1 when absent), or ``all`` for every map index."""
    try:
        chosen = _format(request)
        map_index = params.map_index(request.GET)
        region_id = params.region_id(request.GET)
    except Invalid as exc:
        return bad_request(exc)
    run = selectors.get_run(run_pk, scope=scope_of(request.user))
    return export_download(exports.task_instance_keys(run, task_id, map_index, region_id), chosen)


@requires_view(permissions.ASSET)
def asset_keys_list_export(request, asset_id):
    """An asset's keys, as its page lists them."""
    try:
        chosen = _format(request)
    except Invalid as exc:
        return bad_request(exc)
    asset = selectors.get_asset(asset_id, scope=scope_of(request.user))
    return export_download(exports.asset_keys(asset), chosen)


def search_export(request):
    """Every match of a search (the Search page's parameters), of the stores the user may view."""
    stores = policies.viewable_stores(request.user)
    if not stores:
        raise Forbidden("You do not have permission to view task or asset state.")
    try:
        chosen = _format(request)
        query = searching.SearchQuery.from_params(request.GET)  # no filter: every key the user may view
    except Invalid as exc:
        return bad_request(exc)
    store = request.GET.get("store") if request.GET.get("store") in permissions.STORES else "all"
    scope, now = scope_of(request.user), timezone.now()
    task_rows = asset_rows = None
    if store in ("all", permissions.TASK) and permissions.TASK in stores:
        task_rows = searching.task_key_rows(query, now, scope=scope)
    if store in ("all", permissions.ASSET) and permissions.ASSET in stores:
        asset_rows = searching.asset_key_rows(query, scope=scope)
    return export_download(exports.search_results(task_rows, asset_rows), chosen)


def audit_export(request):
    """The audit trail with the Audit page's filters, of the stores the user may view."""
    stores = policies.viewable_stores(request.user)
    if not stores:
        raise Forbidden("You do not have permission to view task or asset state.")
    try:
        chosen = _format(request)
        query = selectors.AuditQuery.from_params(wall_times_as_instants(request.GET, ("since", "until")))
    except Invalid as exc:
        return bad_request(exc)
    return export_download(
        exports.audit_events(selectors.audit_event_rows(query, stores, scope=scope_of(request.user))), chosen
    )
