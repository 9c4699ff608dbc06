"""The three roles, as Django groups with fixed permissions: created by a migration and put back in line
after every ``migrate`` (``sync_roles``), so a release that adds a permission adds it to the roles too.

- **Viewer**: view both stores and their audit trail.
- **Operator**: a Viewer who may also add keys, edit values and expiry, and expire keys.
- **Admin**: everything: also delete and clear keys, restore from the audit trail, manage every user's
  API tokens, and run a bounded GC from the GC page. Not access scopes: those are a superuser's.

Superusers have every permission whatever their groups. Give a role in ``/admin/`` (Users → a user →
Groups); to change what a role may do, make your own group rather than editing these three, which
``migrate`` resets.
"""

from __future__ import annotations

STORE_MODELS = (("airflow", "taskstatestore"), ("airflow", "assetstatestore"))

VIEWER, OPERATOR, ADMIN = "Viewer", "Operator", "Admin"
ROLES: dict[str, list[tuple[str, str]]] = {
    # (app_label, codename)
    VIEWER: [(app, f"view_{model}") for app, model in STORE_MODELS],
    OPERATOR: [(app, f"{action}_{model}") for app, model in STORE_MODELS for action in ("view", "add", "change")],
    ADMIN: [
        *[(app, f"{action}_{model}") for app, model in STORE_MODELS for action in ("view", "add", "change", "delete")],
        *[("tokens", f"{action}_apitoken") for action in ("view", "change", "delete")],
        ("state", "view_auditevent"),
        ("state", "view_gcrun"),
        ("state", "add_gcrun"),  # run a bounded GC from the GC page (with delete on task state)
        ("state", "view_statssnapshot"),
        ("state", "add_statssnapshot"),  # take a statistics snapshot from the Insights page
        # No access scopes, users or groups: scopes are managed by superusers only (policies.may_manage_scopes),
        # so that a scoped Admin cannot widen their own; the sync takes them from existing Admin groups.
    ],
}


def sync_roles(apps=None, using: str = "default", create_permissions: bool = True) -> None:
    """Create the role groups and set their permissions to exactly ``ROLES``. With ``create_permissions``
    (the current models, after ``migrate``), missing permission rows are created first; a migration's
    historical models give the rows that exist so far."""
    from django.apps import apps as global_apps
    from django.contrib.auth import management

    apps = apps or global_apps
    if create_permissions:
        for label in sorted({app for perms in ROLES.values() for app, _ in perms}):
            management.create_permissions(apps.get_app_config(label), verbosity=0, using=using)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for role, wanted in ROLES.items():
        group, _ = Group.objects.using(using).get_or_create(name=role)
        found = []
        for app_label, codename in wanted:
            found += list(Permission.objects.using(using).filter(content_type__app_label=app_label, codename=codename))
        group.permissions.set(found)


def sync_roles_after_migrate(sender, app_config=None, using="default", apps=None, plan=None, **kwargs) -> None:
    """post_migrate: once per ``migrate`` (for this app), on the dashboard's database only."""
    from django.contrib.auth.models import Group
    from django.db import router

    if app_config is not None and app_config.label == "state" and router.allow_migrate_model(using, Group):
        sync_roles(using=using)
