"""User names that only look alike are one account (identity/usernames.py), wherever an account is made or named: the
admin's user forms, createsuperuser, break_glass, the scope and token commands, the authenticating proxy and
single sign-on (tests/sso/test_oidc.py); names with control or bidi characters are refused; existing look-alikes
are reported by a system check; the audit trail shows a name's invisible characters as escapes."""

import os
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core import checks
from django.core.management import call_command
from django.core.management.base import CommandError

from statestore_admin.access.actors import Actor
from statestore_admin.identity import usernames
from statestore_admin.records.models import ExternalIdentity
from statestore_admin.sso import proxy

pytestmark = pytest.mark.django_db(databases=["default", "airflow"])

LOOK_ALIKES = [
    pytest.param("ADMIN", id="case"),
    pytest.param("ａｄｍｉｎ", id="full-width"),
    pytest.param("Ａdmin", id="full-width capital"),
]
UNSAFE = [
    pytest.param("ad\u202emin", id="RTL override"),
    pytest.param("admin\u2066", id="bidi isolate"),
    pytest.param("ad\u0085min", id="C1 control"),
    pytest.param("ad\x1bmin", id="C0 control"),
    pytest.param("ad\u200bmin", id="zero-width space"),
    # Invisible too, though not formatting characters (Unicode's Default_Ignorable_Code_Point): each made a second
    # account that reads as "admin"
    pytest.param("admin\ufe0f", id="variation selector"),
    pytest.param("ad\U000e0100min", id="variation selector supplement"),
    pytest.param("ad\u034fmin", id="combining grapheme joiner"),
    pytest.param("ad\u3164min", id="hangul filler"),
    pytest.param("ad\uffa0min", id="halfwidth hangul filler"),
    pytest.param("\u115fadmin", id="hangul choseong filler"),
    pytest.param("ad\u17b4min", id="khmer inherent vowel"),
    pytest.param("ad\u180bmin", id="mongolian variation selector"),
]


def accounts():
    return sorted(get_user_model().objects.values_list("username", flat=True))


def test_the_rule():
    assert usernames.canonical("ＡＤＭＩＮ") == usernames.canonical("admin") == "admin"
    assert usernames.canonical("Straße") == usernames.canonical("STRASSE")
    assert usernames.canonical("\u00a0admin ") == "admin"  # a no-break space is a space, and spaces around go
    assert usernames.unsafe_characters("a\u202eb\x85c\u202e") == ["U+202E", "U+0085"]
    assert usernames.visible("ad\u202emin") == "ad\\u202emin"


INLINES = {
    f"{prefix}-{field}": "0"
    for prefix in ("external_identities", "statestore_scopes")
    for field in ("TOTAL_FORMS", "INITIAL_FORMS")
}


def refused_in_the_form(answer) -> bool:
    page = answer.content.decode()
    return answer.status_code == 200 and ("is the same name" in page or "already exists" in page)


# Django's own form catches an exact name and a case its database folds (SQLite folds ASCII only); the rest is ours.
@pytest.mark.parametrize("name", [*LOOK_ALIKES, "ÅSA", "Åsa", "A\u030aSA"])
def test_the_admin_refuses_a_look_alike_of_an_existing_account(admin_client, user_factory, name):
    user_factory("åsa")
    password = "a-long-password-42"
    form = {"username": name, "password1": password, "password2": password, "usable_password": "true", **INLINES}
    answer = admin_client.post("/admin/auth/user/add/", form)
    assert refused_in_the_form(answer)
    assert accounts() == ["admin", "åsa"]


def test_the_admin_refuses_renaming_to_a_look_alike_and_keeps_an_unchanged_name(admin_client, user_factory):
    bob = user_factory("bob")
    user_factory("åsa")
    form = {"username": "ÅSA", "is_active": "on", "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00", **INLINES}
    answer = admin_client.post(f"/admin/auth/user/{bob.pk}/change/", form)
    assert refused_in_the_form(answer)
    answer = admin_client.post(f"/admin/auth/user/{bob.pk}/change/", {**form, "username": "bob", "email": "b@x.org"})
    assert answer.status_code == 302
    assert get_user_model().objects.get(pk=bob.pk).email == "b@x.org"


@pytest.mark.parametrize("name", UNSAFE)
def test_createsuperuser_refuses_unsafe_names_and_look_alikes(user_factory, name, monkeypatch):
    user_factory("admin")
    monkeypatch.setitem(os.environ, "DJANGO_SUPERUSER_PASSWORD", "a-long-password-42")
    for refused in (name, "ADMIN"):
        with pytest.raises(CommandError):
            call_command("createsuperuser", "--noinput", "--username", refused, "--email", "a@x.org", stdout=StringIO())
    assert accounts() == ["admin"]


@pytest.mark.parametrize("name", UNSAFE)
def test_break_glass_create_refuses_unsafe_names(name):
    with pytest.raises(CommandError, match="control characters"):
        call_command("break_glass", name, "--create", stdout=StringIO(), stderr=StringIO())
    assert accounts() == []


@pytest.mark.parametrize("name", LOOK_ALIKES)
def test_break_glass_names_the_existing_account_and_creates_no_look_alike(name):
    get_user_model().objects.create_superuser("admin", "a@x.org", "pw-for-tests")
    out = StringIO()
    call_command("break_glass", name, "--create", stdout=out, stderr=StringIO())
    assert "/break-glass/" in out.getvalue()
    assert accounts() == ["admin"]


def test_the_scope_and_token_commands_find_the_account_a_name_looks_like(user_factory):
    alice = user_factory("alice")
    out = StringIO()
    call_command("grant_scope", "ＡＬＩＣＥ", "--user", "--dags", "etl_*", stdout=out)
    assert "user alice" in out.getvalue()
    token = StringIO()
    call_command("create_api_token", "Alice", stdout=token)
    listed = StringIO()
    call_command("list_api_tokens", "--user", "ALICE", stdout=listed)
    assert listed.getvalue().count("\talice\t") == 1
    assert alice.api_tokens.count() == 1


@pytest.fixture
def proxy_mode(settings):
    settings.TRUSTED_PROXY_ADDRESSES = ["10.0.0.5"]
    settings.OIDC_GROUP_ROLES = {"airflow-viewers": "Viewer"}
    settings.OIDC_GROUP_SCOPES = {}
    proxy._warned.clear()


def through_proxy(client, user):
    meta = {"REMOTE_ADDR": "10.0.0.5", "HTTP_X_FORWARDED_USER": user, "HTTP_X_FORWARDED_GROUPS": "airflow-viewers"}
    return client.get("/", **meta)


def test_the_proxy_signs_look_alikes_in_as_one_account(client, proxy_mode):
    assert through_proxy(client, "alice").wsgi_request.user.username == "alice"
    for name in ("ALICE", "ａｌｉｃｅ"):
        client.logout()
        assert through_proxy(client, name).wsgi_request.user.username == "alice"
    assert accounts() == ["alice"]
    assert ExternalIdentity.objects.get().subject == "alice"


def test_a_proxy_link_made_before_the_rule_is_still_found(client, proxy_mode, user_factory):
    bob = user_factory("Bob")
    ExternalIdentity.objects.create(user=bob, method="proxy", provider="", subject="Bob")
    assert through_proxy(client, "Bob").wsgi_request.user == bob
    assert ExternalIdentity.objects.get().subject == "bob"  # moved to the name as compared
    client.logout()
    assert through_proxy(client, "BOB").wsgi_request.user == bob


def test_the_proxy_does_not_take_a_local_look_alike(client, proxy_mode, user_factory):
    user_factory("admin")
    answer = through_proxy(client, "Admin")
    assert answer.status_code == 403 and "already exists and is not linked" in answer.content.decode()
    assert accounts() == ["admin"]


@pytest.mark.parametrize("name", UNSAFE)
def test_the_proxy_refuses_unsafe_names(client, proxy_mode, name):
    # WSGI hands header bytes over as Latin-1; the proxy reads them as UTF-8 (sso/proxy.py).
    answer = through_proxy(client, name.encode().decode("latin-1"))
    assert answer.status_code == 403 and "control characters" in answer.content.decode()
    assert accounts() == []


def test_a_system_check_reports_existing_look_alikes():
    for name in ("admin", "Admin", "ａｄｍｉｎ", "bob"):  # made before the rule, as they were (no normalising)
        get_user_model()(username=name).save()
    found = [m for m in checks.run_checks(tags=["statestore"]) if m.id == "statestore.W005"]
    assert len(found) == 1
    assert "'admin', 'Admin', 'ａｄｍｉｎ'" in found[0].msg


def test_the_audit_shows_invisible_characters_of_an_older_name_as_escapes(user_factory):
    user = user_factory("evil\u202enimda")  # made before the rule (create_user does not validate)
    assert Actor(via="ui", user=user).name == "evil\\u202enimda"
