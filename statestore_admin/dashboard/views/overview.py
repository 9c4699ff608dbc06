"""The overview (``/``): each store's figures, the configuration, and the largest values."""

from django.shortcuts import render
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.translation import gettext_lazy

from statestore_admin.access import policies
from statestore_admin.access.scopes import scope_of
from statestore_admin.dashboard.http.fragments import fragment
from statestore_admin.dashboard.http.pages import requires_view_of_any
from statestore_admin.state import selectors


def home(request):
    """The overview: each store's figures only to users who may view that store; the configuration to
    anyone who may view either."""
    now = timezone.now()
    stores = tuple(policies.viewable_stores(request.user))
    overview = selectors.overview(now, scope=scope_of(request.user), stores=stores) if stores else None
    return render(request, "overview/index.html", {"overview": overview, "now": now})


@requires_view_of_any
@fragment(gettext_lazy("Largest values"), heading=True, frame="card")
def largest_values(request):
    """The largest values of the stores the user may view (both, or the one): live on small tables, from
    the latest statistics snapshot on large ones."""
    stores = tuple(policies.viewable_stores(request.user))
    return TemplateResponse(
        request,
        "overview/_largest.html",
        {"largest": selectors.largest_values(scope=scope_of(request.user), stores=stores), "now": timezone.now()},
    )
