"""The checks of a half-configured OpenID Connect sign-in (statestore_admin/sso/checks.py), each failing
``manage.py check`` as the server's start does."""

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from statestore_admin.sso.checks import check_oidc
from tests.operations.test_settings import run_manage

GOOD = {
    "OIDC_ISSUER": "https://login.example.com/realms/ops",
    "OIDC_CLIENT_ID": "dash",
    "OIDC_CLIENT_SECRET": "s",
    "OIDC_GROUP_ROLES": {"airflow-ops": "Operator"},
    "OIDC_GROUP_SCOPES": {},
}


def ids(settings, **overrides) -> list[str]:
    for name, value in {**GOOD, **overrides}.items():
        setattr(settings, name, value)
    return [message.id for message in check_oidc()]


def test_a_complete_configuration_and_none_at_all_pass(settings):
    assert ids(settings) == []
    assert ids(settings, OIDC_ISSUER="", OIDC_CLIENT_ID="", OIDC_CLIENT_SECRET="") == []
    assert ids(settings, OIDC_ISSUER="http://127.0.0.1:8080/") == []  # loopback: the tests' providers


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"OIDC_CLIENT_SECRET": ""}, ["statestore.E040"]),
        ({"OIDC_CLIENT_ID": "", "OIDC_CLIENT_SECRET": ""}, ["statestore.E040"]),
        ({"OIDC_ISSUER": "login.example.com"}, ["statestore.E041"]),
        ({"OIDC_ISSUER": "https://login.example.com/?tenant=1"}, ["statestore.E041"]),
        ({"OIDC_ISSUER": "http://login.example.com/realms/ops"}, ["statestore.E042"]),
        ({"OIDC_SCOPES": ["email", "groups"]}, ["statestore.E043"]),
        ({"OIDC_TIMEOUT": 0}, ["statestore.E044"]),
        ({"OIDC_ISSUER": ""}, ["statestore.W040"]),
        ({"OIDC_GROUP_ROLES": {}}, ["statestore.W041"]),
        ({"OIDC_GROUP_ROLES": {}, "OIDC_GROUP_SCOPES": {"team-etl": "scope-etl"}}, []),
    ],
)
def test_a_half_configured_sign_in_is_named(settings, overrides, expected):
    assert ids(settings, **overrides) == expected


@pytest.mark.django_db(databases=["default", "airflow"])
def test_manage_py_check_fails_on_it(settings):
    ids(settings, OIDC_CLIENT_SECRET="")
    with pytest.raises(SystemCheckError, match="statestore.E040.*OIDC_CLIENT_SECRET"):
        call_command("check")


def test_the_settings_from_the_environment(tmp_path):
    """In a fresh process: the scopes split on blanks or commas, and the Sign out form may lead to the issuer's
    origin (CSP form-action), where the provider's end-session endpoint is."""
    code = (
        "from django.conf import settings as s; "
        "print(s.OIDC_SCOPES, s.OIDC_TIMEOUT, s.CONTENT_SECURITY_POLICY['DIRECTIVES']['form-action'])"
    )
    env = {
        "HOME": str(tmp_path),
        "STATESTORE_VAR_DIR": str(tmp_path),
        "OIDC_ISSUER": "https://login.example.com/realms/ops",
        "OIDC_SCOPES": "openid,email  groups",
        "OIDC_TIMEOUT": "2.5",
    }
    result = run_manage("shell", "--no-imports", "-c", code, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['openid', 'email', 'groups'] 2.5 [\"'self'\", 'https://login.example.com']"


def test_roles_without_a_scope_group_or_default_scope_are_named(settings):
    """Fail closed: roles alone would let people in who see nothing (statestore.W042); the access settings
    themselves are checked too (statestore.E060, E061)."""
    from statestore_admin.access.checks import check_access_settings
    from statestore_admin.sso.checks import check_fail_closed_scopes

    for name, value in GOOD.items():
        setattr(settings, name, value)
    settings.DEFAULT_SCOPE = []
    assert [m.id for m in check_fail_closed_scopes()] == ["statestore.W042"]
    settings.DEFAULT_SCOPE = ["*"]
    assert check_fail_closed_scopes() == []
    settings.DEFAULT_SCOPE, settings.OIDC_GROUP_SCOPES = [], {"team-etl": "scope-etl"}
    assert check_fail_closed_scopes() == []
    settings.OIDC_ISSUER = ""
    settings.OIDC_GROUP_SCOPES = {}
    assert check_fail_closed_scopes() == []  # no single sign-on, no proxy: nothing to say

    assert check_access_settings() == []
    settings.DEFAULT_SCOPE = ["etl_*", " "]  # a trailing comma is no pattern
    assert check_access_settings() == []
    settings.DEFAULT_SCOPE, settings.TOKEN_IDP_MAX_AGE = ["etl_*", "x" * 251], 0
    assert [m.id for m in check_access_settings()] == ["statestore.E060", "statestore.E061"]
    settings.DEFAULT_SCOPE = []
    for overflowing in (3 * 10**11, 10**15):  # past the calendar's end: every request of such an account would be a 500
        settings.TOKEN_IDP_MAX_AGE = overflowing
        assert [m.id for m in check_access_settings()] == ["statestore.E061"]
    settings.TOKEN_IDP_MAX_AGE = 10 * 365 * 24 * 3600
    assert check_access_settings() == []
