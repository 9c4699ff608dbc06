"""identity.sign_in: who a person from a provider or proxy becomes, and the group mapping at every sign-in."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.urls import reverse

from statestore_admin.access import permissions, scopes
from statestore_admin.access.actors import Actor
from statestore_admin.identity.sign_in import OIDC, PROXY, GroupMapping, Identity, NoAccess, Refused, sign_in_identity
from statestore_admin.records.models import AccessScope, AuditEvent, ExternalIdentity

pytestmark = pytest.mark.django_db(databases=["default", "airflow"])

MAPPING = GroupMapping(
    roles={"airflow-viewers": "Viewer", "airflow-ops": "Operator", "airflow-admins": "Admin", "root": "superuser"},
    scopes={"team-etl": "scope-etl", "team-ml": "scope-ml"},
)
SIGN_IN = Actor(via="ui", host="192.0.2.7")  # the sign-in's request: an anonymous user from this address


def oidc(*groups, username="alice", subject="sub-alice", **fields):
    return Identity(method=OIDC, provider="Okta", subject=subject, username=username, groups=groups, **fields)


def names(user):
    return set(user.groups.values_list("name", flat=True))


def test_first_sign_in_creates_a_user_without_a_password_with_the_mapped_groups():
    user = sign_in_identity(
        oidc("airflow-ops", "team-etl", "unrelated", email="alice@example.com"), MAPPING, actor=SIGN_IN
    )

    assert names(user) == {"Operator", "scope-etl"}
    assert not user.has_usable_password()  # only the provider signs them in
    assert user.email == "alice@example.com"
    assert not user.is_staff and not user.is_superuser
    link = ExternalIdentity.objects.get(user=user)
    assert (link.method, link.provider, link.subject) == (OIDC, "Okta", "sub-alice")
    assert link.groups == ["airflow-ops", "team-etl", "unrelated"]
    assert user.has_perm(permissions.codename("task", "change"))


def test_gaining_and_losing_groups_across_two_sign_ins():
    AccessScope.objects.create(group=Group.objects.create(name="scope-etl"), kind="dag", pattern="etl_*")
    first = sign_in_identity(oidc("airflow-viewers", "team-etl"), MAPPING, actor=SIGN_IN)
    assert scopes.scope_of(first).dags == ("etl_*",)

    # left team-etl and the viewers, became admin
    second = sign_in_identity(oidc("airflow-admins"), MAPPING, actor=SIGN_IN)

    assert second.pk == first.pk
    assert names(second) == {"Admin"}
    assert second.is_staff  # the Admin role has things in /admin/
    # Fail closed: the scope group lost, the account sees nothing (not every DAG) until a grant or DEFAULT_SCOPE.
    assert scopes.scope_of(get_user_model().objects.get(pk=second.pk)) == scopes.Scope(dags=(), assets=())


def test_groups_given_by_hand_outside_the_mapping_stay():
    user = sign_in_identity(oidc("airflow-viewers"), MAPPING, actor=SIGN_IN)
    user.groups.add(Group.objects.create(name="on-call"))

    sign_in_identity(oidc("airflow-ops"), MAPPING, actor=SIGN_IN)

    assert names(user) == {"Operator", "on-call"}


def test_no_mapped_group_gets_nothing_and_loses_what_it_had():
    user = sign_in_identity(oidc("airflow-ops"), MAPPING, actor=SIGN_IN)

    with pytest.raises(NoAccess) as refused:
        sign_in_identity(oidc("marketing"), MAPPING, actor=SIGN_IN)

    assert names(user) == set()
    assert "marketing" in str(refused.value) and "Okta" in str(refused.value)


def test_superuser_only_through_an_explicit_mapping_and_then_also_taken_away():
    admin = sign_in_identity(oidc("root"), MAPPING, actor=SIGN_IN)
    assert admin.is_superuser and admin.is_staff

    again = sign_in_identity(oidc("airflow-viewers"), MAPPING, actor=SIGN_IN)
    assert not again.is_superuser and not again.is_staff


def test_a_mapping_without_superuser_never_touches_superuser_status(user_factory):
    mapping = GroupMapping(roles={"airflow-viewers": "Viewer"})
    user = sign_in_identity(oidc("airflow-viewers"), mapping, actor=SIGN_IN)
    user.is_superuser = True  # made superuser by hand in /admin/
    user.save()

    sign_in_identity(oidc("airflow-viewers", "root"), mapping, actor=SIGN_IN)

    assert get_user_model().objects.get(pk=user.pk).is_superuser


def test_a_local_account_of_the_same_name_is_not_taken_over(user_factory):
    local = user_factory("alice", perms=["task.view"])

    with pytest.raises(Refused, match="already exists"):
        sign_in_identity(oidc("airflow-admins"), MAPPING, actor=SIGN_IN)

    assert names(local) == set() and not ExternalIdentity.objects.exists()


def test_a_deactivated_account_stays_out():
    user = sign_in_identity(oidc("airflow-ops"), MAPPING, actor=SIGN_IN)
    user.is_active = False
    user.save()

    with pytest.raises(Refused, match="deactivated"):
        sign_in_identity(oidc("airflow-ops"), MAPPING, actor=SIGN_IN)


@pytest.mark.parametrize("username", ["", "   ", "x" * 151, "bob\nadmin", "bob\x7f"])
def test_unusable_user_names_are_refused_and_create_nothing(username):
    with pytest.raises(Refused):
        sign_in_identity(oidc("airflow-ops", username=username), MAPPING, actor=SIGN_IN)
    assert not get_user_model().objects.exists()


def test_control_characters_in_a_group_are_refused_and_create_nothing():
    with pytest.raises(Refused, match="control characters"):
        sign_in_identity(oidc("airflow-ops", "team\r\netl"), MAPPING, actor=SIGN_IN)
    assert not get_user_model().objects.exists()


def test_the_same_name_through_two_methods_are_two_links_not_one_account():
    sign_in_identity(Identity(method=PROXY, username="bob", groups=("airflow-ops",)), MAPPING, actor=SIGN_IN)

    with pytest.raises(Refused):  # an OIDC "bob" is not the proxy's "bob" unless an admin says so
        sign_in_identity(oidc("airflow-ops", username="bob", subject="sub-bob"), MAPPING, actor=SIGN_IN)


def test_a_sign_in_records_where_it_came_from_on_the_identity():
    sign_in_identity(oidc("airflow-ops"), MAPPING, actor=SIGN_IN)
    assert ExternalIdentity.objects.get().last_sign_in_from == "192.0.2.7"
    sign_in_identity(oidc("airflow-ops"), MAPPING, actor=Actor(via="ui", host="198.51.100.2"))
    assert ExternalIdentity.objects.get().last_sign_in_from == "198.51.100.2"  # the last sign-in's


def test_the_audit_records_how_the_actor_signed_in(client, user_factory, dag_run_factory, task_key_factory):
    key = task_key_factory(dag_run_factory(), key="cursor", value="1")
    user_factory("ops", perms=["task.view", "task.change", "task.add", "task.delete"])
    response = client.post(reverse("login"), {"username": "ops", "password": "pw-for-tests"})
    assert response.status_code == 302

    hx = {"HTTP_HX_REQUEST": "true"}
    dialog = client.get("/keys/task/expire/", {"ids": [key.pk]}, **hx)
    listed = dialog.content.decode().split('name="listed" value="')[1].split('"')[0]
    assert client.post("/keys/task/expire/", {"ids": [key.pk], "listed": listed}, **hx).status_code == 204

    event = AuditEvent.objects.get()
    assert event.signed_in == "password"
    assert "password" in client.get(f"/audit/{event.pk}/").content.decode()


def test_a_mapping_to_an_unknown_role_is_a_check_error(settings):
    settings.OIDC_GROUP_ROLES = {"airflow-ops": "Operators"}
    with pytest.raises(SystemCheckError, match="statestore.E030"):
        call_command("check", "--tag", "statestore")


def test_admin_shows_the_provider_groups_of_a_user_and_what_they_map_to(client, settings):
    settings.OIDC_GROUP_ROLES = dict(MAPPING.roles)
    settings.OIDC_GROUP_SCOPES = dict(MAPPING.scopes)
    user = sign_in_identity(oidc("airflow-ops", "team-ml", "<b>marketing</b>"), actor=SIGN_IN)
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-for-tests"))

    page = client.get(reverse("admin:auth_user_change", args=[user.pk])).content.decode()

    assert "&lt;b&gt;marketing&lt;/b&gt;, airflow-ops, team-ml" in page  # user data, escaped
    assert "Operator, scope-ml" in page
    listing = client.get(reverse("admin:auth_user_changelist")).content.decode()
    assert "Operator, scope-ml" in listing  # the groups column
