"""Who may do what to which store: Django's view / add / change / delete permissions of the mirror models.

Assign them to users or groups in the Django admin (``/admin/``): for example
``airflow | task state store | Can view task state store``.
"""

from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.core.errors import Forbidden

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


def require(who, store: str, action: str) -> None:
    """``who`` is an ``Actor`` (a command acting as the system may do everything) or a user."""
    require_any(who, store, (action,))


def require_any(who, store: str, actions: tuple[str, ...]) -> None:
    """At least one of ``actions`` (an upsert: ``add`` or ``change``, the service then checks which it does)."""
    if isinstance(who, Actor):
        if who.is_system:
            return
        who = who.user
    if not any(can(who, store, action) for action in actions):
        raise Forbidden(f"You do not have permission to {' or '.join(actions)} {store} state.")


def capabilities(user) -> dict[str, dict[str, bool]]:
    """``{"task": {"view": True, ...}, "asset": {...}}`` for templates."""
    return {store: {action: can(user, store, action) for action in ACTIONS} for store in STORES}


RESTORE_ACTIONS = ("view", "add", "change", "delete")  # a restore shows, adds, overwrites and deletes keys


def viewable_stores(user) -> list[str]:
    """The stores whose keys, values and audit events ``user`` may see."""
    return [store for store in STORES if can(user, store, "view")]


def can_restore(user, store: str) -> bool:
    return all(can(user, store, action) for action in RESTORE_ACTIONS)
