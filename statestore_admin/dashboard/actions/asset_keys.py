"""The actions on asset keys: edit a value, add a key, delete keys or clear an asset's state. The answers and
who sees values are those of the task keys' actions (``actions.task_keys``' docstring)."""

from functools import partial

from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from statestore_admin.access import permissions, policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import scope_of
from statestore_admin.dashboard.actions import dialogs
from statestore_admin.dashboard.actions.forms import AddAssetKeyForm
from statestore_admin.dashboard.http.fragments import fragment
from statestore_admin.dashboard.http.htmx import dialog, done, error_messages
from statestore_admin.state import selectors, services


@require_http_methods(["GET", "POST"])
@fragment(gettext_lazy("Edit value"))
def asset_key_edit(request, asset_id):
    name = request.GET.get("key", request.POST.get("key", ""))
    return dialogs.edit_value(
        request,
        permissions.ASSET,
        "actions/_asset_value.html",
        lambda: selectors.get_asset_key(asset_id, name, scope=scope_of(request.user)),
        partial(services.set_asset_key, asset_id=asset_id, key=name, mode=services.UPDATE),
        reverse("asset-detail", args=[asset_id]),
    )


@require_http_methods(["GET", "POST"])
@fragment(gettext_lazy("Add key"))
def asset_key_add(request, asset_id):
    policies.require(request.user, permissions.ASSET, "add")
    asset = selectors.get_asset(asset_id, scope=scope_of(request.user))
    form = AddAssetKeyForm(request.POST or None)

    def add():
        row = dialogs.add_key(form, services.set_asset_key, actor=Actor.from_request(request), asset_id=asset_id)
        return _("Added %(key)s.") % {"key": repr(row.key)}, reverse("asset-detail", args=[asset_id])

    return dialogs.form_action(request, form, "actions/_asset_add.html", {"asset": asset}, add)


@require_http_methods(["GET", "POST"])
@fragment(gettext_lazy("Confirm"))
def asset_keys_delete(request, asset_id):
    """Delete chosen keys of an asset, or clear all of its state (``all=1``). The confirmation lists the
    keys; their value previews only for users who may view asset state (see the module's docstring)."""
    params = request.POST if request.method == "POST" else request.GET
    keys = None if params.get("all") == "1" else params.getlist("keys")
    actor, errors = Actor.from_request(request), []
    try:
        if request.method == "POST":
            token = request.POST.get("listed", "")
            outcome, asset = services.apply_asset_keys(actor=actor, asset_id=asset_id, keys=keys, token=token)
            message = outcome.describe("cleared", asset=asset.name) if keys is None else outcome.describe("deleted")
            fallback = reverse("asset-detail", args=[asset_id])
            return done(request, message, fallback, dialogs.level_of(outcome), undo=outcome.event)
        preview = services.preview_asset_keys(actor=actor, asset_id=asset_id, keys=keys, sample=dialogs.SAMPLE)
        asset, listing, refs = preview.asset, preview.listing, preview.listing.refs
    except ValidationError as exc:
        # The dialog shows what went wrong beside the asset: an asset out of scope was NotFound already.
        asset = selectors.get_asset(asset_id, scope=scope_of(request.user))
        errors = error_messages(exc)
        listing, refs = None, 0
    context = {
        "asset": asset,
        "keys": keys,
        "errors": errors,
        **dialogs.confirmation_context(request, permissions.ASSET, listing, refs),
    }
    return dialog(request, "actions/_asset_confirm.html", context, status=422 if errors else 200)
