"""state/0013: an account without any scope grant used to see every DAG and asset and now sees nothing. Upgrading
changes nothing for local accounts (those without a grant get the explicit "every DAG and asset" one), while accounts
that single sign-on or the proxy manages become fail-closed."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connections
from django.db.migrations.executor import MigrationExecutor

from statestore_admin.access import scopes
from statestore_admin.records.models import AccessScope

BEFORE = [("state", "0012_break_glass")]
AFTER = [("state", "0013_access_scope_all")]


def migrate(targets):
    executor = MigrationExecutor(connections["default"])
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader


@pytest.mark.django_db
def test_no_missing_migrations():
    call_command("makemigrations", "state", check=True, dry_run=True, stdout=io.StringIO())


@pytest.mark.django_db(transaction=True, databases=["default", "airflow"])
def test_local_accounts_without_a_grant_stay_unscoped_and_single_sign_on_ones_fail_closed():
    old = migrate(BEFORE).project_state(BEFORE).apps
    User, Group = old.get_model("auth", "User"), old.get_model("auth", "Group")
    OldScope, OldIdentity = old.get_model("state", "AccessScope"), old.get_model("state", "ExternalIdentity")
    team = Group.objects.create(name="team-etl")
    OldScope.objects.create(group=team, kind="dag", pattern="etl_*")
    User.objects.create(username="plain")
    in_team = User.objects.create(username="in-team")
    in_team.groups.add(team)
    own = User.objects.create(username="own")
    OldScope.objects.create(user=own, kind="dag", pattern="ml_*")
    in_role_only = User.objects.create(username="viewer")
    in_role_only.groups.add(Group.objects.get_or_create(name="Viewer")[0])
    sso = User.objects.create(username="sso")
    OldIdentity.objects.create(user=sso, method="oidc", provider="https://idp", subject="s")
    User.objects.create(username="root", is_superuser=True)

    migrate(AFTER)

    unscoped = set(AccessScope.objects.filter(kind="all").values_list("user__username", flat=True))
    assert unscoped == {"plain", "viewer"}
    users = {u.username: u for u in get_user_model().objects.all()}
    assert scopes.scope_of(users["plain"]) is scopes.EVERYTHING  # as before the upgrade
    assert scopes.scope_of(users["in-team"]).dags == ("etl_*",)
    assert scopes.scope_of(users["own"]).dags == ("ml_*",)
    assert scopes.scope_of(users["sso"]) == scopes.Scope(dags=(), assets=())  # fail closed from now on

    migrate(BEFORE)  # and back: the grants of every DAG and asset go, the rule without them returns
    assert not AccessScope.objects.filter(kind="all").exists()
    # Forward to the latest migration, not to AFTER: the tests after this one need every later column.
    loader = migrate(AFTER)
    migrate([node for node in loader.graph.leaf_nodes() if node[0] == "state"])
