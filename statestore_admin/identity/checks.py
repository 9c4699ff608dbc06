"""System checks of sign-in and accounts (``manage.py check``, and at every start)."""

from django.core import checks
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections


@checks.register("statestore")
def check_group_mapping(app_configs=None, **kwargs):
    """OIDC_GROUP_ROLES names roles that exist (docs/sign-in.md): a typo would grant nothing, silently."""
    from statestore_admin.identity.sign_in import GroupMapping

    return [
        checks.Error(problem, hint="Use Viewer, Operator, Admin or superuser (as written).", id="statestore.E030")
        for problem in GroupMapping.from_settings().problems()
    ]


@checks.register("statestore")
def check_look_alike_accounts(app_configs=None, databases=None, **kwargs):
    """Accounts made before names were compared as ``identity.usernames`` compares them may be two accounts with
    one name (``Admin`` and ``admin``): said here, for an administrator to rename or remove one, rather than
    merged by a migration that would have to guess whose they are."""
    from statestore_admin.identity.usernames import collisions, visible

    if databases is not None and DEFAULT_DB_ALIAS not in databases:
        return []
    try:
        if "auth_user" not in connections[DEFAULT_DB_ALIAS].introspection.table_names():
            return []  # before the first migrate
        found = collisions()
    except DatabaseError:  # an unreachable database fails on its own, loudly, at the first request
        return []
    return [
        checks.Warning(
            f"The accounts {', '.join(repr(visible(name)) for name in names)} have one name: user names are "
            "compared ignoring case and character width, so a command or a sign-in that names one of them may reach "
            "another.",
            hint="Rename or remove all but one of them in /admin/ (docs/sign-in.md, User names).",
            id="statestore.W005",
        )
        for names in found
    ]
