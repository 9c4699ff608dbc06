"""Downloads: the lists as JSON or CSV (``?format=json|csv``, JSON by default), streamed (``exports.documents``),
and the keys a confirmation is about to delete, as an export document that a restore reads back.

Each download checks what its list checks: the store's view permission, and the user's scope through the
same selectors (a run, a task instance or an asset out of scope is not found; search and audit rows are
filtered by it). Bad parameters are a 400 naming them, before anything is read.
"""

from __future__ import annotations

from functools import wraps

from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.access import permissions, policies
from statestore_admin.access.scopes import scope_of
from statestore_admin.core.errors import Invalid
from statestore_admin.core.values import parse_datetime_aware
from statestore_admin.dashboard.http import params
from statestore_admin.dashboard.http.downloads import bad_request, export_download
from statestore_admin.dashboard.http.pages import requires_view, requires_view_of_any
from statestore_admin.dashboard.timezones import wall_times_as_instants
from statestore_admin.exports import documents as exports
from statestore_admin.state import search as searching
from statestore_admin.state import selectors, services


def in_format(view):
    """A list's download in the format asked for (``chosen``: json, the default, or csv); an unknown one is a
    400 before the view reads anything."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        chosen = request.GET.get("format") or "json"
        if chosen not in exports.FORMATS:
            return bad_request(
                Invalid({"format": _("Unknown format %(format)s: use json or csv.") % {"format": repr(chosen)}})
            )
        return view(request, *args, chosen=chosen, **kwargs)

    return wrapper


# The lists ----------------------------------------------------------------------------------------
@requires_view(permissions.TASK)
@in_format
def run_keys_export(request, run_pk, *, chosen):
    """A run's keys, as its page lists them."""
    run = selectors.get_run(run_pk, scope=scope_of(request.user))
    return export_download(exports.run_keys(run), chosen)


@requires_view(permissions.TASK)
@in_format
def task_instance_keys_export(request, run_pk, task_id, *, chosen):
    """A task instance's keys: ``map_index`` a number (-1 when absent), or ``all`` for every map index."""
    try:
        map_index = params.map_index(request.GET)
        region_id = params.region_id(request.GET)
    except Invalid as exc:
        return bad_request(exc)
    run = selectors.get_run(run_pk, scope=scope_of(request.user))
    return export_download(exports.task_instance_keys(run, task_id, map_index, region_id), chosen)


@requires_view(permissions.ASSET)
@in_format
def asset_keys_list_export(request, asset_id, *, chosen):
    """An asset's keys, as its page lists them."""
    asset = selectors.get_asset(asset_id, scope=scope_of(request.user))
    return export_download(exports.asset_keys(asset), chosen)


@requires_view_of_any
@in_format
def search_export(request, *, chosen):
    """Every match of a search (the Search page's parameters), of the stores the user may view."""
    try:
        query = searching.SearchQuery.from_params(request.GET)  # no filter: every key the user may view
    except Invalid as exc:
        return bad_request(exc)
    stores = policies.viewable_stores(request.user)
    store = request.GET.get("store") if request.GET.get("store") in permissions.STORES else "all"
    scope, now = scope_of(request.user), timezone.now()
    task_rows = asset_rows = None
    if store in ("all", permissions.TASK) and permissions.TASK in stores:
        task_rows = searching.task_key_rows(query, now, scope=scope)
    if store in ("all", permissions.ASSET) and permissions.ASSET in stores:
        asset_rows = searching.asset_key_rows(query, scope=scope)
    return export_download(exports.search_results(task_rows, asset_rows), chosen)


@requires_view_of_any
@in_format
def audit_export(request, *, chosen):
    """The audit trail with the Audit page's filters, of the stores the user may view."""
    try:
        query = selectors.AuditQuery.from_params(wall_times_as_instants(request.GET, ("since", "until")))
    except Invalid as exc:
        return bad_request(exc)
    rows = selectors.audit_event_rows(query, policies.viewable_stores(request.user), scope=scope_of(request.user))
    return export_download(exports.audit_events(rows), chosen)


# What a confirmation is about to delete -----------------------------------------------------------
@requires_view(permissions.TASK)
def task_keys_export(request):
    """The task keys of a confirmation (``run``, ``task_id``, ``map_index`` or ``ids``) not written after
    its ``confirmed_at``: every key it lists (``selectors.confirmed_keys``), as an export document."""
    scope = scope_of(request.user)
    try:
        selection, _run = services.task_selection(scope=scope, **params.task_target(request.GET))
        confirmed_at = parse_datetime_aware(request.GET.get("confirmed_at", ""), "confirmed_at")
        rows = selectors.confirmed_keys(selection.queryset(scope), confirmed_at=confirmed_at)
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
            raise Invalid({"keys": _("Select at least one key.")})
        confirmed_at = parse_datetime_aware(request.GET.get("confirmed_at", ""), "confirmed_at")
    except ValidationError as exc:
        return bad_request(exc)
    rows = selectors.confirmed_keys(asset_id=asset.pk, keys=keys, confirmed_at=confirmed_at)
    return export_download(exports.keys_export(f"asset-{asset.pk}-keys", asset_rows=rows), "json")
