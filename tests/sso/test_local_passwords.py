"""LOCAL_PASSWORDS off (sso/passwords.py): no password form, a password sent anyway refused before any
authentication (nothing counted by the login throttle), API tokens unaffected; allowed only with single sign-on
or the proxy."""

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.urls import reverse

from statestore_admin.sso.passwords import check_local_passwords
from statestore_admin.tokens.models import ApiToken

pytestmark = pytest.mark.django_db(databases=["default", "airflow"])


@pytest.fixture
def passwords_off(settings):
    settings.LOCAL_PASSWORDS = False
    settings.TRUSTED_PROXY_ADDRESSES = ["10.0.0.5"]


def test_the_login_page_has_no_password_form(client, passwords_off):
    page = client.get(reverse("login"))

    html = page.content.decode()
    assert page.status_code == 200
    assert 'data-testid="passwords-off"' in html
    assert 'name="password"' not in html


def test_with_passwords_on_the_form_is_there(client):
    html = client.get(reverse("login")).content.decode()
    assert 'name="password"' in html and 'data-testid="passwords-off"' not in html


@pytest.mark.parametrize("url", ["/login/", "/admin/login/"])
def test_a_password_is_refused_without_being_checked_or_counted(client, user_factory, passwords_off, url, settings):
    user_factory("root", is_superuser=True, is_staff=True)
    settings.LOGIN_FAILURE_LIMIT = settings.AXES_FAILURE_LIMIT = 1

    for password in ("pw-for-tests", "wrong", "wrong"):
        page = client.post(url, {"username": "root", "password": password})
        assert page.status_code == 403
        assert "Password sign-in is switched off" in page.content.decode()

    assert "_auth_user_id" not in client.session
    assert not AccessAttempt.objects.exists()  # no failure counted: nothing was attempted


def test_admin_login_sends_to_the_login_page(client, passwords_off):
    page = client.get("/admin/login/?next=/admin/auth/user/")
    assert page.status_code == 302
    assert page["Location"] == reverse("login") + "?next=/admin/auth/user/"


def test_admin_login_with_passwords_on_is_the_admins(client, user_factory):
    user_factory("root", is_superuser=True, is_staff=True)
    assert client.get("/admin/login/").status_code == 200
    page = client.post("/admin/login/", {"username": "root", "password": "pw-for-tests", "next": "/admin/"})
    assert page.status_code == 302 and "_auth_user_id" in client.session


def test_the_login_throttle_stays_for_passwords_on(client, user_factory, settings):
    user_factory("carol")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post(reverse("login"), {"username": "carol", "password": "wrong"})
    locked = client.post(reverse("login"), {"username": "carol", "password": "pw-for-tests"})
    assert locked.status_code == 429


def test_api_tokens_keep_working(client, user_factory, passwords_off):
    _, token = ApiToken.issue(user_factory("robot", perms=["task.view"]), name="script")
    answer = client.get("/api/statestore/v1/audit-events", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 200


def test_off_without_single_sign_on_or_proxy_is_a_check_error(settings):
    settings.LOCAL_PASSWORDS = False
    settings.TRUSTED_PROXY_ADDRESSES = []
    settings.OIDC_ISSUER = ""
    with pytest.raises(SystemCheckError, match="statestore.E047"):
        call_command("check", "--tag", "statestore")

    settings.OIDC_ISSUER = "https://idp.example.com"
    assert check_local_passwords() == []  # single sign-on alone is enough


def test_with_passwords_off_single_sign_on_is_offered(client, settings):
    settings.LOCAL_PASSWORDS = False
    settings.OIDC_ISSUER, settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET = "https://idp.example.com", "id", "s"
    settings.OIDC_PROVIDER_NAME = "Okta"

    html = client.get(reverse("login"), {"next": "/dags/"}).content.decode()

    assert 'name="password"' not in html
    assert 'data-testid="oidc-sign-in"' in html and "Sign in with Okta" in html
    assert 'href="/oidc/login/?next=/dags/"' in html
