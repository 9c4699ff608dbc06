"""The asset pages: the asset list, an asset's keys, and one asset key with its history. Each reads through
``state.selectors`` and renders a page, or only its panel for htmx; filters and cursors live in the query
string, so every view of a list can be shared as a link.
"""

from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode

from statestore_admin.access import permissions
from statestore_admin.access.scopes import scope_of
from statestore_admin.dashboard.diffs import key_history
from statestore_admin.dashboard.http.pages import render_page, requires_view
from statestore_admin.dashboard.json_view import value_part
from statestore_admin.objects import sizes
from statestore_admin.objects import store as objects
from statestore_admin.state import selectors


@requires_view(permissions.ASSET)
def asset_list(request):
    q = request.GET.get("q", "")
    with_state = request.GET.get("with_state") == "1"
    page = selectors.assets(request.GET.get("cursor"), q=q, with_state=with_state, scope=scope_of(request.user))
    return render_page(
        request, "assets/list.html", {"page": page, "q": q, "with_state": with_state}, "assets/_panel.html"
    )


@requires_view(permissions.ASSET)
def asset_detail(request, asset_id):
    asset = selectors.get_asset(asset_id, scope=scope_of(request.user))
    page = selectors.asset_state(asset, request.GET.get("cursor"))
    return render_page(request, "assets/detail.html", {"asset": asset, "page": page}, "assets/_keys_panel.html")


@requires_view(permissions.ASSET)
def asset_key(request, asset_id):
    key = selectors.get_asset_key(asset_id, request.GET.get("key", ""), scope=scope_of(request.user))
    selectors.with_writer_coordinates([key])
    history = key_history(selectors.asset_key_history(key.asset_id, key.key))
    resolved = objects.resolve_asset_row(key, key.asset)  # first: reading the object records its size
    return render(
        request,
        "keys/asset.html",
        {
            "key": key,
            "writer_run": selectors.writer_run(key, scope=scope_of(request.user)),
            "history": history,
            "resolved": resolved,
            "size": sizes.stored_size(key.value),
            "value_src": f"{reverse('asset-key-value', args=[key.asset_id])}?{urlencode({'key': key.key})}",
        },
    )


@requires_view(permissions.ASSET)
def asset_key_value(request, asset_id):
    """A part of an asset key's value for its page's tree (``json_view.value_part``); ``of=resolved``: of the
    value behind its worker-side reference."""
    key = selectors.get_asset_key(asset_id, request.GET.get("key", ""), scope=scope_of(request.user))
    return value_part(request, key.value, lambda: objects.resolve_asset_row(key, key.asset))
