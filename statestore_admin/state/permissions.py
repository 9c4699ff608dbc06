"""Who may do what to which store: Django's view / add / change / delete permissions of the mirror models.

Assign them to users or groups in the Django admin (``/admin/``): for example
``airflow | task state store | Can view task state store``.
"""

from django.core.exceptions import PermissionDenied

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore

TASK = "task"
ASSET = "asset"
STORES = {TASK: TaskStateStore, ASSET: AssetStateStore}
ACTIONS = ("view", "add", "change", "delete")


def codename(store: str, action: str) -> str:
    if store not in STORES or action not in ACTIONS:
        raise ValueError(f"unknown store or action: {store!r} {action!r}")
    model = STORES[store]._meta
    return f"{model.app_label}.{action}_{model.model_name}"


def can(user, store: str, action: str) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(codename(store, action)))


def require(user, store: str, action: str) -> None:
    if not can(user, store, action):
        raise PermissionDenied(f"You do not have permission to {action} {store} state.")


def capabilities(user) -> dict[str, dict[str, bool]]:
    """``{"task": {"view": True, ...}, "asset": {...}}`` for templates."""
    return {store: {action: can(user, store, action) for action in ACTIONS} for store in STORES}
