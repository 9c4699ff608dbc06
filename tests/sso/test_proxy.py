"""The trusted-header mode (sso/proxy.py) through Django's test client: which requests its headers sign in, the
mapping at a change of headers only, and the pages when the person cannot be signed in. Over real HTTP against
gunicorn: tests/sso/test_proxy_serving.py."""

import logging

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client
from django.urls import reverse

from statestore_admin.identity.sign_in import SESSION_KEY
from statestore_admin.records.models import ExternalIdentity
from statestore_admin.sso import proxy
from statestore_admin.tokens.models import ApiToken

pytestmark = pytest.mark.django_db(databases=["default", "airflow"])

PROXY = "10.0.0.5"
ROLES = {"airflow-viewers": "Viewer", "airflow-ops": "Operator", "airflow-admins": "Admin"}


@pytest.fixture(autouse=True)
def proxy_mode(settings):
    settings.TRUSTED_PROXY_ADDRESSES = ["10.0.0.0/29", "::1"]
    settings.OIDC_GROUP_ROLES = ROLES
    settings.OIDC_GROUP_SCOPES = {}
    proxy._warned.clear()  # the untrusted-header warnings are rate-limited per process


def headers(user="alice", groups="airflow-viewers", email="alice@example.com", address=PROXY):
    meta = {"REMOTE_ADDR": address, "HTTP_X_FORWARDED_USER": user}
    if groups is not None:
        meta["HTTP_X_FORWARDED_GROUPS"] = groups
    if email is not None:
        meta["HTTP_X_FORWARDED_EMAIL"] = email
    return meta


def groups_of(username):
    return set(get_user_model().objects.get(username=username).groups.values_list("name", flat=True))


def test_trusted_headers_sign_in_with_the_mapped_role_and_the_session_is_remembered(client):
    page = client.get("/", **headers(groups="airflow-ops, unrelated"))

    assert page.status_code == 200
    assert page.wsgi_request.user.username == "alice"
    assert groups_of("alice") == {"Operator"}
    link = ExternalIdentity.objects.get(user__username="alice")
    assert link.method == "proxy" and link.provider == ""
    assert link.groups == ["airflow-ops", "unrelated"]
    assert client.session[SESSION_KEY] == "authenticating proxy"
    assert get_user_model().objects.get(username="alice").email == "alice@example.com"
    assert link.last_sign_in_from == PROXY  # the request's address: the proxy's


def test_the_provider_name_is_configurable(client, settings):
    settings.PROXY_PROVIDER_NAME = "oauth2-proxy"
    client.get("/", **headers())
    assert client.session[SESSION_KEY] == "authenticating proxy (oauth2-proxy)"


def test_the_mapping_runs_again_only_when_the_headers_change(client, django_assert_max_num_queries):
    client.get("/", **headers(groups="airflow-viewers"))
    link = ExternalIdentity.objects.get()
    first = link.last_sign_in

    client.get("/", **headers(groups="airflow-viewers"))
    assert ExternalIdentity.objects.get().last_sign_in == first  # unchanged headers: no sign-in again

    client.get("/", **headers(groups="airflow-ops"))  # gained Operator, lost Viewer
    assert groups_of("alice") == {"Operator"}
    assert ExternalIdentity.objects.get().last_sign_in > first


def test_a_group_change_keeps_the_session(client):
    client.get("/", **headers(groups="airflow-viewers"))
    session = client.session.session_key

    page = client.get("/", **headers(groups="airflow-admins"))

    assert client.session.session_key == session
    assert groups_of("alice") == {"Admin"}
    assert page.wsgi_request.user.is_staff  # already this request, not the next one


def test_no_mapped_group_is_the_no_access_page_and_no_session(client):
    page = client.get("/", **headers(user="<b>mallory</b>", groups="marketing,<i>sales</i>"))

    assert page.status_code == 403
    html = page.content.decode()
    assert 'data-testid="no-access"' in html
    assert "&lt;b&gt;mallory&lt;/b&gt;" in html and "<b>mallory</b>" not in html  # user data, escaped
    assert "&lt;i&gt;sales&lt;/i&gt;" in html and "<i>sales</i>" not in html
    assert "authenticating proxy" in html
    assert "_auth_user_id" not in client.session
    assert page["X-Frame-Options"] == "DENY"  # answered before the views, still never framed


def test_losing_the_last_mapped_group_ends_the_session(client):
    client.get("/", **headers(groups="airflow-ops"))
    assert "_auth_user_id" in client.session

    page = client.get("/", **headers(groups="marketing"))

    assert page.status_code == 403 and 'data-testid="no-access"' in page.content.decode()
    assert "_auth_user_id" not in client.session
    assert groups_of("alice") == set()


def test_htmx_gets_the_sentence_not_the_page(client):
    client.get("/", **headers(groups="airflow-ops"))

    answer = client.get("/", HTTP_HX_REQUEST="true", **headers(groups="marketing"))

    assert answer.status_code == 403 and answer["Content-Type"].startswith("text/plain")
    assert answer.content.decode().startswith("alice signed in through authenticating proxy, but none of their groups")


def test_a_changed_user_header_ends_the_old_session(client):
    client.get("/", **headers(user="alice", groups="airflow-admins"))
    old = client.session.session_key

    page = client.get("/", **headers(user="bob", groups="airflow-viewers"))

    assert page.wsgi_request.user.username == "bob"
    assert client.session.session_key != old
    assert not client.session.exists(old)  # flushed, not just taken over
    assert groups_of("bob") == {"Viewer"}


def test_the_user_header_gone_from_a_trusted_request_signs_out(client):
    client.get("/", **headers())

    page = client.get("/", REMOTE_ADDR=PROXY)

    assert page.status_code == 302 and page["Location"].startswith(reverse("login"))
    assert "_auth_user_id" not in client.session


def test_a_password_session_without_headers_is_left_alone(client, user_factory):
    user_factory("carol")
    client.post(reverse("login"), {"username": "carol", "password": "pw-for-tests"}, REMOTE_ADDR=PROXY)

    assert client.get("/", REMOTE_ADDR=PROXY).status_code == 200


def test_headers_from_an_untrusted_address_are_ignored_and_logged(client, caplog):
    with caplog.at_level(logging.WARNING, logger="statestore_admin.sso.proxy"):
        page = client.get("/", **headers(groups="airflow-admins", address="10.0.0.9"))
        client.get("/", **headers(groups="airflow-admins", address="10.0.0.9"))

    assert page.status_code == 302 and page["Location"].startswith(reverse("login"))  # still anonymous
    assert not get_user_model().objects.exists()
    lines = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert len(lines) == 1  # rate-limited: once per address and headers
    assert "10.0.0.9" in lines[0] and "X-Forwarded-User" in lines[0]


def test_an_untrusted_address_keeps_its_session(client, user_factory):
    user_factory("carol")
    client.post(reverse("login"), {"username": "carol", "password": "pw-for-tests"}, REMOTE_ADDR="192.0.2.1")

    page = client.get("/", **headers(user="alice", groups="airflow-admins", address="192.0.2.1"))

    assert page.wsgi_request.user.username == "carol"


def test_an_ipv6_proxy_and_an_ipv4_mapped_address(client):
    assert client.get("/", **headers(address="::1")).wsgi_request.user.username == "alice"
    other = Client()
    assert other.get("/", **headers(user="bob", address="::ffff:10.0.0.5")).wsgi_request.user.username == "bob"


def test_the_mode_is_off_without_trusted_addresses(settings):
    settings.TRUSTED_PROXY_ADDRESSES = []
    page = Client().get("/", **headers(groups="airflow-admins"))
    assert page.status_code == 302 and not get_user_model().objects.exists()


def test_configured_header_names(client, settings):
    settings.PROXY_USER_HEADER = "X-Auth-Request-Preferred-Username"
    settings.PROXY_GROUPS_HEADER = "X-Auth-Request-Groups"
    meta = {
        "REMOTE_ADDR": PROXY,
        "HTTP_X_AUTH_REQUEST_PREFERRED_USERNAME": "dave",
        "HTTP_X_AUTH_REQUEST_GROUPS": "airflow-ops",
    }
    assert client.get("/", **meta).wsgi_request.user.username == "dave"
    assert groups_of("dave") == {"Operator"}


def test_a_utf8_user_name_as_wsgi_hands_it_over(client):
    latin1 = "josé".encode().decode("latin-1")  # what a WSGI server puts in META for UTF-8 bytes
    client.get("/", **headers(user=latin1))
    assert get_user_model().objects.filter(username="josé").exists()


@pytest.mark.parametrize("user", ["", "  ", "x" * 151, "eve\x01"])
def test_unusable_user_headers_are_refused_with_a_page(client, user):
    page = client.get("/", **headers(user=user))

    assert page.status_code == 403 and 'data-testid="sign-in-refused"' in page.content.decode()
    assert page["X-Frame-Options"] == "DENY"
    assert not get_user_model().objects.exists()


def test_a_local_account_of_the_same_name_is_refused_not_taken_over(client, user_factory):
    user_factory("alice")

    page = client.get("/", **headers(groups="airflow-admins"))

    assert page.status_code == 403
    assert "already exists" in page.content.decode()
    assert not ExternalIdentity.objects.exists()


def test_bearer_api_requests_ignore_the_headers(client, user_factory):
    owner = user_factory("robot", perms=["task.view"])
    _, token = ApiToken.issue(owner, name="script")

    answer = client.get(
        "/api/statestore/v1/audit-events", HTTP_AUTHORIZATION=f"Bearer {token}", **headers(groups="airflow-admins")
    )

    assert answer.status_code == 200
    assert not get_user_model().objects.filter(username="alice").exists()


def test_a_user_deactivated_while_sso_managed_loses_tokens_and_cannot_sign_in(client):
    client.get("/", **headers(groups="airflow-ops"))
    alice = get_user_model().objects.get(username="alice")
    ApiToken.issue(alice, name="laptop")

    alice.is_active = False
    alice.save()

    assert ApiToken.objects.get(user=alice).revoked_reason == "user deactivated"
    page = client.get("/", **headers(groups="airflow-ops"))  # same headers, same session as before
    assert page.status_code == 403 and "deactivated" in page.content.decode()
    assert "_auth_user_id" not in client.session


def test_check_refuses_invalid_addresses_and_empty_header_names(settings):
    settings.TRUSTED_PROXY_ADDRESSES = ["10.0.0.5", "proxy.internal"]
    with pytest.raises(SystemCheckError, match=r"statestore.E045.*proxy.internal"):
        call_command("check", "--tag", "statestore")
    settings.TRUSTED_PROXY_ADDRESSES = ["10.0.0.5"]
    settings.PROXY_GROUPS_HEADER = " "
    with pytest.raises(SystemCheckError, match=r"statestore.E046.*PROXY_GROUPS_HEADER"):
        call_command("check", "--tag", "statestore")


@pytest.mark.parametrize(
    "meta", [{"HTTP_X_FORWARDED_USER": "alice,root"}, {"HTTP_X_FORWARDED_EMAIL": "a@x.org,b@x.org"}]
)
def test_under_a_wsgi_server_a_joined_user_or_email_header_is_refused(client, meta, caplog):
    """A WSGI server joins a header sent twice with a comma (tests/sso/test_proxy_serving.py sends real repeats)."""
    answer = client.get("/", **{**headers(), **meta})
    assert answer.status_code == 400 and "more than once" in answer.content.decode()
    assert answer["X-Frame-Options"] == "DENY"
    assert "_auth_user_id" not in client.session and not get_user_model().objects.exists()
    assert any("sent more than once from 10.0.0.5" in r.getMessage() for r in caplog.records)
