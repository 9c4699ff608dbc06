"""Django's view / add / change / delete permissions of the mirror models, one per store: what each action of
the application needs of them is its policy's (``access.policies``).

Assign them to users or groups in the Django admin (``/admin/``): for example
``airflow | task state store | Can view task state store``.
"""

from django.utils.translation import gettext as _

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
    """Forbidden unless ``who`` (an ``Actor``: a command acting as the system may do everything; or a user) holds
    Django's ``action`` permission on ``store``. Which permissions an action of the application needs is its
    policy's (``access.policies``): ask that."""
    if isinstance(who, Actor):
        if who.is_system:
            return
        who = who.user
    if not can(who, store, action):
        raise Forbidden(refusal(store, action))


def refusal(store: str, action: str) -> str:
    """ "You do not have permission to view task state.": one whole sentence per store and permission."""
    sentences = {
        (TASK, "view"): _("You do not have permission to view task state."),
        (TASK, "add"): _("You do not have permission to add task state."),
        (TASK, "change"): _("You do not have permission to change task state."),
        (TASK, "delete"): _("You do not have permission to delete task state."),
        (ASSET, "view"): _("You do not have permission to view asset state."),
        (ASSET, "add"): _("You do not have permission to add asset state."),
        (ASSET, "change"): _("You do not have permission to change asset state."),
        (ASSET, "delete"): _("You do not have permission to delete asset state."),
    }
    return sentences[store, action]  # Django's four permissions on the two stores: a KeyError is a bug
