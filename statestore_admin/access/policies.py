"""One access policy per action, asked by every face (dashboard, API, Django admin, commands) and enforced by
the services themselves: a face asks only to show what may be done (a button) or to refuse early.

A policy combines Django's permissions on the store (``permissions``: view / add / change / delete of the
mirror models), the access scope (``scopes``: which DAGs and assets) and the rules between them, so that a rule
is written once:

- ``view``: keys, values and their audit events of a store;
- ``add``: a new key; ``overwrite``: a whole new value and expiry on an existing key (Airflow's PUT, written
  blind); ``set``: either (the service then asks ``add`` or ``overwrite`` for the row it finds);
- ``edit``: replace the value of an existing key (the dashboard's and the admin's editors, the API's PATCH):
  the editor shows the value it replaces, so **edit needs view** as well as change, on every face;
- ``expire``: change when keys expire (now, never, a date): change;
- ``delete`` and ``clear``: delete; ``delete_object``: an edit that also deletes the worker-side object of the
  reference it replaces is a delete too;
- ``restore``: an audit event or an export file shows, adds, overwrites and deletes keys: all four.

Which DAGs and assets a request reaches is its scope's (``scope_of``): the services read through it. Store-wide
data (GC, the orphans report, statistics snapshots, the records of GC runs) spans every DAG and asset: it is
for those with view on the stores it describes and no scope. Access scopes are a superuser's; accounts are not
for a user with a scope. Each policy takes a user or an ``Actor`` (a command acting as the system may do
everything).
"""

from __future__ import annotations

from django.utils.translation import gettext as _

from statestore_admin.access import permissions
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import Scope, scope_of
from statestore_admin.core.errors import Forbidden

TASK, ASSET, STORES = permissions.TASK, permissions.ASSET, permissions.STORES  # for callers that ask only this

# Every one of these Django permissions on the store (view, add, change, delete).
STORE_ACTIONS: dict[str, tuple[str, ...]] = {
    "view": ("view",),
    "add": ("add",),
    "overwrite": ("change",),
    "edit": ("change", "view"),
    "expire": ("change",),
    "delete": ("delete",),
    "clear": ("delete",),
    "delete_object": ("delete",),
    "restore": ("view", "add", "change", "delete"),
}
SET = "set"  # add or overwrite: Airflow's PUT (the service checks which for the row it finds)


def _user(who):
    """The user behind ``who``, or None for a command acting as the system (which may do everything)."""
    if isinstance(who, Actor):
        return None if who.is_system else who.user
    return who


def _is_system(who) -> bool:
    return isinstance(who, Actor) and who.is_system


def allows(who, store: str, action: str) -> bool:
    """Whether ``who`` may take ``action`` (``STORE_ACTIONS``, or ``set``) on ``store``, as far as permissions go
    (the scope decides which DAGs and assets)."""
    if _is_system(who):
        return True
    user = _user(who)
    if action == SET:
        return allows(user, store, "add") or allows(user, store, "overwrite")
    return all(permissions.can(user, store, perm) for perm in STORE_ACTIONS[action])


def require(who, store: str, action: str) -> None:
    """Forbidden unless ``allows(who, store, action)``, saying what is missing."""
    if allows(who, store, action):
        return
    user = _user(who)
    if action == "edit" and permissions.can(user, store, "change"):
        if store == TASK:
            raise Forbidden(
                _(
                    "Editing a value needs the permission to view task state as well as to change it: ask an "
                    "administrator for “Can view task state store”."
                )
            )
        raise Forbidden(
            _(
                "Editing a value needs the permission to view asset state as well as to change it: ask an "
                "administrator for “Can view asset state store”."
            )
        )
    if action == SET:
        if store == TASK:
            raise Forbidden(_("You do not have permission to add or change task state."))
        raise Forbidden(_("You do not have permission to add or change asset state."))
    missing = next(perm for perm in STORE_ACTIONS[action] if not permissions.can(user, store, perm))
    raise Forbidden(permissions.refusal(store, missing))


def require_write(who, store: str, created: bool) -> None:
    """The row a ``set`` found decides: a row it created (or would create: none found) needs ``add``, checked
    before inserting; an existing one is overwritten."""
    require(who, store, "add" if created else "overwrite")


def capabilities(user) -> dict[str, dict[str, bool]]:
    """``{"task": {"view": True, "change": …, "edit": …}, "asset": {…}}`` for templates: Django's four
    permissions and every action's policy."""
    return {
        store: {
            **{perm: permissions.can(user, store, perm) for perm in permissions.ACTIONS},
            **{action: allows(user, store, action) for action in STORE_ACTIONS},
        }
        for store in STORES
    }


def viewable_stores(who) -> list[str]:
    """The stores whose keys, values and audit events ``who`` may see."""
    return [store for store in STORES if allows(who, store, "view")]


def require_any_view(who) -> list[str]:
    """The stores ``who`` may view; Forbidden if none (the pages and lists that span both stores)."""
    stores = viewable_stores(who)
    if not stores:
        raise Forbidden(_("You do not have permission to view task or asset state."))
    return stores


def restorable_stores(who) -> list[str]:
    return [store for store in STORES if allows(who, store, "restore")]


# The audit trail ------------------------------------------------------------------------------------------
def require_view_event(who, event) -> None:
    """An audit event is seen with view on every store it shows (``viewed_with``)."""
    for store in event.viewed_with:
        require(who, store, "view")


# Store-wide data -----------------------------------------------------------------------------------------
def store_wide(scope: Scope, viewable, needs: tuple[str, ...] = (TASK,)) -> bool:
    """Whether store-wide data about ``needs`` is shown to a holder of ``scope`` who may view ``viewable``."""
    return set(needs) <= set(viewable) and not scope.restricted


def sees_store_wide(who, needs: tuple[str, ...] = (TASK,)) -> bool:
    return store_wide(scope_of(who), [s for s in needs if allows(who, s, "view")], needs)


def require_store_wide(who, what: str, needs: tuple[str, ...] = (TASK,)) -> None:
    """Forbidden (naming ``what``) unless ``who`` sees store-wide data about ``needs``."""
    for store in needs:
        require(who, store, "view")
    scope_of(who).require_unrestricted(what)


def sees_store_wide_records(who) -> bool:
    """The dashboard's own store-wide records (GC runs, statistics snapshots): for users without a scope."""
    return store_wide(scope_of(who), (), needs=())


GC_RUN_PERMISSION = "state.add_gcrun"  # running GC from the page (the Admin role has it)
SNAPSHOT_PERMISSION = "state.add_statssnapshot"  # taking a statistics snapshot (the Admin role has it)


def _has_perm(who, perm: str) -> bool:
    user = _user(who)
    return _is_system(who) or bool(user and user.is_authenticated and user.has_perm(perm))


def may_view_gc(who) -> bool:
    """GC spans every DAG: its page and dry run are for users with view on task state and no scope."""
    return sees_store_wide(who)


def require_view_gc(who) -> None:
    require_store_wide(who, _("Garbage collection"))


def may_run_gc(who) -> bool:
    return may_view_gc(who) and allows(who, TASK, "delete") and _has_perm(who, GC_RUN_PERMISSION)


def require_run_gc(who) -> None:
    require_view_gc(who)
    if not may_run_gc(who):
        raise Forbidden(
            _("Running garbage collection needs delete on task state and “Can add GC run” (the Admin role).")
        )


def may_take_snapshot(who) -> bool:
    """A snapshot's pass reads every DAG: store-wide view of task state, and the snapshot permission."""
    return sees_store_wide(who) and _has_perm(who, SNAPSHOT_PERMISSION)


# Access scopes, accounts and tokens (Django's admin asks these) ----------------------------------------------
def may_manage_scopes(who) -> bool:
    """Whether ``who`` may list, grant, edit or revoke scopes, anyone's: superusers only (and a command acting
    as the system). A scope limits its holder, so nobody it could limit may touch one (superusers are never
    scoped); and the list of every holder's patterns is not for a scoped user either. The model's own
    view/add/change/delete permissions on access scopes give nothing: no role holds them, and holding them is
    not enough."""
    if _is_system(who):
        return True
    user = _user(who)
    return bool(getattr(user, "is_active", False) and getattr(user, "is_superuser", False))


def require_manage_scopes(who) -> None:
    if not may_manage_scopes(who):
        raise Forbidden(_("Only a superuser may grant or revoke access scopes."))


def may_change_accounts(user) -> bool:
    """Whether ``user`` may add, change or delete users and groups at all (Django's permissions still
    decide which): not a user with a scope, since each of these could widen it: leaving the group that
    gives it, a new account without one, another account's password."""
    return bool(user.is_superuser or not scope_of(user).restricted)


def locked_account_fields(user, account) -> tuple[str, ...]:
    """The fields of ``account`` (a user, or None for a new one) that ``user`` may not change: whether it
    is a superuser (a superuser manages scopes), and on one's own account the groups and permissions
    (nobody edits what gives them their scope or their rights)."""
    if user.is_superuser:
        return ()
    locked = ("is_superuser",)
    if account is not None and account.pk == user.pk:
        locked += ("groups", "user_permissions")
    return locked


def may_administer_tokens(user, action: str) -> bool:
    """Every user's API tokens in the admin: Django's permission on them (``view``, which ``change`` implies as
    in Django's admin; ``change`` to revoke; ``delete``). Tokens are created by their users only: ``add`` never."""
    if action == "add":
        return False
    if action == "view" and may_administer_tokens(user, "change"):
        return True
    return _has_perm(user, f"tokens.{action}_apitoken")
