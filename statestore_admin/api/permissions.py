"""Who may call which endpoint (DRF permission classes): the domain decides (``access.permissions``,
``objects.orphans.access``), these ask it for the request's method and the view's store."""

from rest_framework import permissions as drf_permissions

from statestore_admin.access import permissions
from statestore_admin.objects import orphans


class StorePermission(drf_permissions.BasePermission):
    """view for GET, add or change for PUT (the service checks which: add for a new key, change for an
    existing one), change for PATCH, delete for DELETE."""

    ACTIONS = {
        "GET": ("view",),
        "HEAD": ("view",),
        "OPTIONS": ("view",),
        "PUT": ("add", "change"),
        "PATCH": ("change",),
        "DELETE": ("delete",),
    }

    def has_permission(self, request, view):
        actions = self.ACTIONS.get(request.method, ("change",))
        return any(permissions.can(request.user, view.store, action) for action in actions)


class ViewsAnyStore(drf_permissions.BasePermission):
    """GET by a user who may view task state, asset state or both."""

    def has_permission(self, request, view):
        return bool(permissions.viewable_stores(request.user))


class AuditPermission(drf_permissions.BasePermission):
    """Reading: ``view`` on a store. Restoring: ``add``, ``change`` and ``delete`` on a store (the service
    checks each store it writes)."""

    def has_permission(self, request, view):
        if request.method in drf_permissions.SAFE_METHODS:
            return bool(permissions.viewable_stores(request.user))
        return any(permissions.can_restore(request.user, store) for store in permissions.STORES)


class ViewsOrphans(drf_permissions.BasePermission):
    def has_permission(self, request, view):
        return orphans.access(request.user).view
