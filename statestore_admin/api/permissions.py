"""Who may call which endpoint (DRF permission classes): the domain decides (``access.policies``,
``objects.orphans.access``), these ask it for the request's method and the view's store."""

from rest_framework import permissions as drf_permissions

from statestore_admin.access import policies
from statestore_admin.objects import orphans


class StorePermission(drf_permissions.BasePermission):
    """The policy of each method (``access.policies``): view for GET, set for PUT (add or change: the service
    checks which for the key it finds), edit for PATCH (change and view), delete for DELETE."""

    ACTIONS = {
        "GET": "view",
        "HEAD": "view",
        "OPTIONS": "view",
        "PUT": policies.SET,
        "PATCH": "edit",
        "DELETE": "delete",
    }

    def has_permission(self, request, view):
        return policies.allows(request.user, view.store, self.ACTIONS.get(request.method, "overwrite"))


class ViewsAnyStore(drf_permissions.BasePermission):
    """GET by a user who may view task state, asset state or both."""

    def has_permission(self, request, view):
        return bool(policies.viewable_stores(request.user))


class AuditPermission(drf_permissions.BasePermission):
    """Reading: ``view`` on a store. Restoring: ``add``, ``change`` and ``delete`` on a store (the service
    checks each store it writes)."""

    def has_permission(self, request, view):
        if request.method in drf_permissions.SAFE_METHODS:
            return bool(policies.viewable_stores(request.user))
        return bool(policies.restorable_stores(request.user))


class ViewsOrphans(drf_permissions.BasePermission):
    def has_permission(self, request, view):
        return orphans.access(request.user).view
