"""Who manages access scopes in Django's admin: superusers only. A scoped Admin (the Admin role and a group
scoped to ``nope_*``) must not drop, edit or even list scopes, nor widen their own through users and
groups: leaving the scope's group, a new account, superuser status. Everything through real HTTP."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command

from statestore_admin import grants
from statestore_admin.access import scopes
from statestore_admin.access.actors import Actor
from statestore_admin.identity import roles
from statestore_admin.records.models import AccessScope, AuditEvent
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
SCOPES = "/admin/state/accessscope/"
USERS, GROUPS = "/admin/auth/user/", "/admin/auth/group/"
SCOPE_PERMS = [f"{action}_accessscope" for action in ("view", "add", "change", "delete")]


@pytest.fixture
def world(dag_run_factory, task_instance_factory, task_key_factory):
    for dag_id in ("nope_a", "wide_secret_dag"):
        run = dag_run_factory(dag_id=dag_id)
        task_instance_factory(run, task_id="t")
        task_key_factory(run, task_id="t", key=f"{dag_id}-key", value=f"{dag_id}-value")
    nope = Group.objects.create(name="nope team")
    grants.grant(nope, dags=["nope_*"], actor=Actor.command())
    other = Group.objects.create(name="other team")
    grants.grant(other, dags=["other_private_*"], actor=Actor.command())
    return {"nope": nope, "other": other}


def _perm(app_label, codename):
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


@pytest.fixture
def scoped_admin(user_factory, world):
    """Staff, the Admin role, and a scope of nope_* DAGs (through the group "nope team")."""
    user = user_factory("scoped-admin", is_staff=True, unscoped=False)
    user.groups.add(Group.objects.get(name=roles.ADMIN), world["nope"])
    return get_user_model().objects.get(pk=user.pk)


def user_form(username, **fields):
    """What the admin's user change form posts (its required fields, and ``fields``)."""
    form = {"username": username, "is_active": "on", "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"}
    for inline in ("statestore_scopes", "external_identities"):  # each inline's management form
        form.update({f"{inline}-{k}": v for k, v in {"TOTAL_FORMS": "0", "INITIAL_FORMS": "0"}.items()})
    return {**form, **fields}


def scope_rows():
    return sorted(AccessScope.objects.values_list("group__name", "user__username", "kind", "pattern"))


def test_the_admin_role_holds_no_scope_user_or_group_permission():
    admin_perms = set(
        Group.objects.get(name=roles.ADMIN).permissions.values_list("content_type__app_label", "codename")
    )
    assert not {p for p in admin_perms if p[1].endswith(("_accessscope", "_user", "_group"))}
    assert ("airflow", "delete_taskstatestore") in admin_perms  # the role is there, with its other permissions


def test_migrate_takes_scope_permissions_from_an_existing_admin_group():
    """A deployment whose Admin group holds them (the role as it was): the sync after migrate removes them."""
    admin = Group.objects.get(name=roles.ADMIN)
    extra = [_perm("state", c) for c in SCOPE_PERMS] + [_perm("auth", "view_user"), _perm("auth", "view_group")]
    admin.permissions.add(*extra)
    call_command("migrate", verbosity=0)
    held = set(admin.permissions.values_list("codename", flat=True))
    assert not held & {p.codename for p in extra}
    assert "delete_taskstatestore" in held


def test_a_scoped_admin_cannot_list_see_or_drop_their_scope(client, scoped_admin, world):
    row = AccessScope.objects.get(group=world["nope"])
    before = scope_rows()
    client.force_login(scoped_admin)
    assert client.get(SCOPES).status_code == 403
    assert client.get(f"{SCOPES}add/").status_code == 403
    assert client.get(f"{SCOPES}{row.pk}/change/").status_code == 403
    assert client.get(f"{SCOPES}{row.pk}/delete/").status_code == 403
    assert client.post(f"{SCOPES}{row.pk}/delete/", {"post": "yes"}).status_code == 403
    changed = client.post(f"{SCOPES}{row.pk}/change/", {"group": world["nope"].pk, "kind": "dag", "pattern": "*"})
    assert changed.status_code == 403
    bulk = client.post(SCOPES, {"action": "delete_selected", "_selected_action": [str(row.pk)], "post": "yes"})
    assert bulk.status_code == 403
    added = client.post(f"{SCOPES}add/", {"user": scoped_admin.pk, "kind": "dag", "pattern": "*"})
    assert added.status_code == 403
    assert scope_rows() == before
    index = client.get("/admin/").content.decode()
    assert SCOPES not in index and USERS not in index and GROUPS not in index
    # Nobody else's patterns through the pickers either.
    for field in ("group", "user"):
        picker = client.get(
            "/admin/autocomplete/", {"app_label": "state", "model_name": "accessscope", "field_name": field}
        )
        assert picker.status_code == 403
    # And the scope still holds: the out-of-scope DAG is not theirs.
    page = client.get("/dags/").content.decode()
    assert "nope_a" in page and "wide_secret_dag" not in page
    assert client.get("/dags/wide_secret_dag/").status_code == 403


def test_a_scoped_user_changes_no_account_even_with_the_permissions(client, user_factory, world):
    """Given change/add/delete on users and groups (a group of one's own making), a scoped user still cannot
    leave the scope's group, create an account, or drop the group."""
    user = user_factory("scoped-account-admin", is_staff=True, perms=["task.view"], unscoped=False)
    managers = Group.objects.create(name="account managers")
    managers.permissions.add(
        *[_perm("auth", f"{a}_{m}") for a in ("view", "add", "change", "delete") for m in ("user", "group")]
    )
    user.groups.add(managers, world["nope"])
    client.force_login(user)
    groups_before = set(user.groups.values_list("name", flat=True))
    users_before = get_user_model().objects.count()
    own = f"{USERS}{user.pk}/change/"
    assert client.get(own).status_code == 200  # view only: the page shows, without a save button
    assert 'name="_save"' not in client.get(own).content.decode()
    response = client.post(own, user_form(user.username, groups=[managers.pk], is_staff="on"))
    assert response.status_code == 403
    assert (
        client.post(
            f"{USERS}add/",
            {
                "username": "my-twin",
                "password1": "x-Twin-9a-pass",
                "password2": "x-Twin-9a-pass",
                "usable_password": "true",
            },
        ).status_code
        == 403
    )
    assert client.post(f"{GROUPS}{world['nope'].pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.post(f"{USERS}{user.pk}/password/", {"password1": "x", "password2": "x"}).status_code == 403
    user.refresh_from_db()
    assert set(user.groups.values_list("name", flat=True)) == groups_before
    assert get_user_model().objects.count() == users_before and Group.objects.filter(name="nope team").exists()
    assert not user.is_superuser
    assert "other_private_*" not in client.get(f"{GROUPS}{world['other'].pk}/change/").content.decode()


def test_an_unscoped_account_manager_cannot_make_a_superuser_or_edit_their_own_groups(client, user_factory, world):
    user = user_factory("account-admin", is_staff=True)
    managers = Group.objects.create(name="account managers")
    managers.permissions.add(*[_perm("auth", f"{a}_user") for a in ("view", "add", "change")])
    user.groups.add(managers)
    target = user_factory("colleague")
    client.force_login(user)
    # Another user's page: editable, but not superuser status; and no scope of anyone's is shown.
    page = client.get(f"{USERS}{target.pk}/change/").content.decode()
    assert 'name="is_superuser"' not in page and 'name="groups"' in page
    assert "State store scope" not in page
    form = user_form("colleague", is_superuser="on", groups=[world["nope"].pk])
    assert client.post(f"{USERS}{target.pk}/change/", form).status_code == 302
    target.refresh_from_db()
    assert not target.is_superuser and list(target.groups.values_list("name", flat=True)) == ["nope team"]
    # Their own page: neither superuser status nor their groups nor their permissions.
    own = client.get(f"{USERS}{user.pk}/change/").content.decode()
    assert 'name="groups"' not in own and 'name="user_permissions"' not in own and 'name="is_superuser"' not in own
    form = user_form("account-admin", is_staff="on", is_superuser="on", groups=[])
    assert client.post(f"{USERS}{user.pk}/change/", form).status_code == 302
    user.refresh_from_db()
    assert not user.is_superuser and list(user.groups.values_list("name", flat=True)) == ["account managers"]


def test_a_superuser_still_manages_scopes(client, user_factory, world):
    root = user_factory("root", is_staff=True, is_superuser=True)
    client.force_login(root)
    assert "nope_*" in client.get(SCOPES).content.decode()
    row = AccessScope.objects.get(group=world["nope"])
    assert client.post(f"{SCOPES}{row.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not AccessScope.objects.filter(pk=row.pk).exists()
    group_page = client.get(f"{GROUPS}{world['other'].pk}/change/").content.decode()
    assert "State store scope" in group_page and "other_private_*" in group_page
    target = user_factory("made-root")
    response = client.post(f"{USERS}{target.pk}/change/", user_form("made-root", is_superuser="on"))
    assert response.status_code == 302, response.content.decode()[:2000]
    target.refresh_from_db()
    assert target.is_superuser


def test_the_users_page_says_which_rule_applies_and_unscoped_is_granted_with_star(client, user_factory, world):
    from statestore_admin.records.models import ExternalIdentity

    client.force_login(user_factory("root", is_staff=True, is_superuser=True))
    local = user_factory("local-person", unscoped=False)
    page = client.get(f"{USERS}{local.pk}/change/").content.decode()
    assert "Local account" in page and "without any, nothing" in page
    assert "its API tokens work until they expire or are revoked" in page
    sso = user_factory("sso-person", unscoped=False)
    ExternalIdentity.objects.create(user=sso, method="oidc", provider="https://idp", subject="s")
    page = client.get(f"{USERS}{sso.pk}/change/").content.decode()
    assert "Managed by single sign-on" in page and "nothing (no DEFAULT_SCOPE is set)" in page
    assert "TOKEN_IDP_MAX_AGE after its last sign-in there" in page

    refused = client.post(f"{SCOPES}add/", {"user": local.pk, "kind": "all", "pattern": "etl_*"})
    assert refused.status_code == 200 and "with the pattern *" in refused.content.decode()
    assert client.post(f"{SCOPES}add/", {"user": local.pk, "kind": "all", "pattern": "*"}).status_code == 302
    assert scopes.scope_of(get_user_model().objects.get(pk=local.pk)) is scopes.EVERYTHING
    # A pattern beside every DAG and asset would restrict nothing: refused, saying what to do.
    mixed = client.post(f"{SCOPES}add/", {"user": local.pk, "kind": "dag", "pattern": "etl_*"})
    assert mixed.status_code == 200 and "delete that first to restrict it to patterns" in mixed.content.decode()
    mixed = client.post(f"{SCOPES}add/", {"group": world["nope"].pk, "kind": "all", "pattern": "*"})
    assert mixed.status_code == 200 and "This holder has patterns" in mixed.content.decode()
    assert AccessScope.objects.filter(kind="all").count() == 1


# Who granted and revoked: the admin goes through grants, as the commands do ----------------------------------
def scope_events():
    return [
        (e.action, e.actor, e.via, e.details)
        for e in AuditEvent.objects.filter(action__in=["grant", "ungrant"]).order_by("pk")
    ]


def group_form(group, *rows, initial=()):
    """What the admin's group change form posts: its name, and the scope inline's ``initial`` rows (AccessScope
    objects, kept as they are) then ``rows`` ((kind, pattern) to add)."""
    form = {"name": group.name, "statestore_scopes-INITIAL_FORMS": str(len(initial))}
    form["statestore_scopes-TOTAL_FORMS"] = str(len(initial) + len(rows))
    for i, row in enumerate(initial):
        form.update({f"statestore_scopes-{i}-id": str(row.pk), f"statestore_scopes-{i}-group": str(group.pk)})
        form.update({f"statestore_scopes-{i}-kind": row.kind, f"statestore_scopes-{i}-pattern": row.pattern})
    for i, (kind, pattern) in enumerate(rows, start=len(initial)):
        form.update({f"statestore_scopes-{i}-kind": kind, f"statestore_scopes-{i}-pattern": pattern})
    return form


def dag(pattern):
    return [{"kind": "dag", "pattern": pattern}]


def test_the_admin_records_who_granted_changed_and_revoked_a_scope(client, user_factory, world):
    client.force_login(user_factory("root", is_staff=True, is_superuser=True))
    before = scope_events()
    team = Group.objects.create(name="team-etl")
    assert client.post(f"{SCOPES}add/", {"group": team.pk, "kind": "dag", "pattern": "etl_*"}).status_code == 302
    row = AccessScope.objects.get(group=team)
    changed = client.post(f"{SCOPES}{row.pk}/change/", {"group": team.pk, "kind": "dag", "pattern": "etl_a*"})
    assert changed.status_code == 302 and scope_rows()[-1] == ("team-etl", None, "dag", "etl_a*")
    row = AccessScope.objects.get(group=team)
    assert client.post(f"{SCOPES}{row.pk}/delete/", {"post": "yes"}).status_code == 302
    other = AccessScope.objects.get(group=world["other"])
    bulk = client.post(SCOPES, {"action": "delete_selected", "_selected_action": [str(other.pk)], "post": "yes"})
    assert bulk.status_code == 302 and not AccessScope.objects.filter(group__in=[team, world["other"]]).exists()
    assert scope_events()[len(before) :] == [
        ("grant", "root", "admin", {"group": "team-etl", "added": dag("etl_*"), "removed": []}),
        ("ungrant", "root", "admin", {"group": "team-etl", "added": [], "removed": dag("etl_*")}),
        ("grant", "root", "admin", {"group": "team-etl", "added": dag("etl_a*"), "removed": []}),
        ("ungrant", "root", "admin", {"group": "team-etl", "added": [], "removed": dag("etl_a*")}),
        ("ungrant", "root", "admin", {"group": "other team", "added": [], "removed": dag("other_private_*")}),
    ]


def test_the_group_page_grants_and_revokes_as_its_user(client, user_factory, world):
    client.force_login(user_factory("root", is_staff=True, is_superuser=True))
    team = Group.objects.create(name="team-etl")
    before = scope_events()
    added = client.post(f"{GROUPS}{team.pk}/change/", group_form(team, ("dag", "etl_*"), ("asset", "etl.*")))
    assert added.status_code == 302, added.content.decode()[:2000]
    assert scopes.patterns_of(team) == scopes.Scope(dags=("etl_*",), assets=("etl.*",))
    rows = list(AccessScope.objects.filter(group=team).order_by("kind"))  # asset, dag
    form = group_form(team, initial=rows)
    form.update({"statestore_scopes-0-DELETE": "on", "statestore_scopes-1-pattern": "etl_a*"})
    assert client.post(f"{GROUPS}{team.pk}/change/", form).status_code == 302
    assert scopes.patterns_of(team) == scopes.Scope(dags=("etl_a*",), assets=())
    events = scope_events()[len(before) :]
    assert [(action, actor, via) for action, actor, via, _ in events] == [
        ("grant", "root", "admin"),
        ("grant", "root", "admin"),
        ("ungrant", "root", "admin"),
        ("ungrant", "root", "admin"),
        ("grant", "root", "admin"),
    ]
    assert [details["added"] or details["removed"] for *_, details in events] == [
        [{"kind": "dag", "pattern": "etl_*"}],
        [{"kind": "asset", "pattern": "etl.*"}],
        [{"kind": "asset", "pattern": "etl.*"}],
        [{"kind": "dag", "pattern": "etl_*"}],
        [{"kind": "dag", "pattern": "etl_a*"}],
    ]


def test_the_group_page_refuses_a_pattern_beside_every_dag_and_asset_and_changes_nothing(client, user_factory, world):
    """As ``grant_scope --unscoped --dags …`` is refused: each row alone passes its own check, not both."""
    client.force_login(user_factory("root", is_staff=True, is_superuser=True))
    team = Group.objects.create(name="team-etl")
    before = (scope_rows(), scope_events())
    mixed = client.post(f"{GROUPS}{team.pk}/change/", group_form(team, ("all", "*"), ("dag", "etl_*")))
    assert mixed.status_code == 200 and "not both" in mixed.content.decode()
    assert (scope_rows(), scope_events()) == before
    page = f"{USERS}add/"
    form = {"username": "new-person", "password1": "a-Long-pw-91", "password2": "a-Long-pw-91"}
    form["usable_password"] = "true"
    form.update({"statestore_scopes-TOTAL_FORMS": "2", "statestore_scopes-INITIAL_FORMS": "0"})
    form.update({"external_identities-TOTAL_FORMS": "0", "external_identities-INITIAL_FORMS": "0"})
    form.update({"statestore_scopes-0-kind": "dag", "statestore_scopes-0-pattern": "etl_*"})
    form.update({"statestore_scopes-1-kind": "all", "statestore_scopes-1-pattern": "*"})
    mixed = client.post(page, form)
    assert mixed.status_code == 200 and "not both" in mixed.content.decode()
    assert (scope_rows(), scope_events()) == before
    assert not get_user_model().objects.filter(username="new-person").exists()
