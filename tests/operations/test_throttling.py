"""Login and token throttling (README, "Login and token throttling"): django-axes for sign-in, a
cache-backed count of failed bearer tokens per address for the API."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.test import Client, override_settings
from django.urls import reverse

from statestore_admin.throttling import client_address
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

LIMIT = 3
STATS = "/api/statestore/v1/stats"


def sign_in(client, username, password, address="10.0.0.1"):
    return client.post(reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address)


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def fail(client, username, times, address="10.0.0.1"):
    for _ in range(times):
        response = sign_in(client, username, "wrong-password", address)
        assert response.status_code in (200, 429)


# Sign-in --------------------------------------------------------------------------------------------
@override_settings(AXES_FAILURE_LIMIT=LIMIT)
def test_wrong_passwords_lock_the_username_out_even_with_the_right_one(client, operator):
    fail(client, operator.username, LIMIT)
    response = sign_in(client, operator.username, operator.raw_password)
    assert response.status_code == 429
    assert "Too many failed sign-in attempts" in response.content.decode()
    assert "locked for 15 minutes after the last failure" in response.content.decode()
    assert not signed_in(client)
    # per username: from another address too
    response = sign_in(Client(), operator.username, operator.raw_password, address="10.0.0.2")
    assert response.status_code == 429


@override_settings(AXES_FAILURE_LIMIT=LIMIT)
def test_an_address_is_locked_out_for_every_username(client, operator, viewer):
    for n in range(LIMIT):
        sign_in(client, f"guess-{n}", "wrong-password")
    assert sign_in(client, viewer.username, viewer.raw_password).status_code == 429
    assert not signed_in(client)


@override_settings(AXES_FAILURE_LIMIT=LIMIT)
def test_another_user_from_another_address_is_not_affected(client, operator, viewer):
    fail(client, operator.username, LIMIT + 2)
    other = Client()
    response = sign_in(other, viewer.username, viewer.raw_password, address="10.0.0.9")
    assert response.status_code == 302 and signed_in(other)


@override_settings(AXES_FAILURE_LIMIT=LIMIT)
def test_successful_sign_ins_do_not_count(client, operator):
    for _ in range(LIMIT + 2):
        response = sign_in(Client(), operator.username, operator.raw_password)
        assert response.status_code == 302
    fail(client, operator.username, LIMIT - 1)
    fresh = Client()
    assert sign_in(fresh, operator.username, operator.raw_password).status_code == 302 and signed_in(fresh)


@override_settings(AXES_FAILURE_LIMIT=LIMIT)
def test_the_lockout_ends_after_the_window(client, operator):
    fail(client, operator.username, LIMIT)
    assert sign_in(client, operator.username, operator.raw_password).status_code == 429
    # the window passes: age the recorded failures beyond it
    for attempt in AccessAttempt.objects.all():
        attempt.attempt_time -= timedelta(minutes=16)
        attempt.save(update_fields=["attempt_time"])
    response = sign_in(client, operator.username, operator.raw_password)
    assert response.status_code == 302 and signed_in(client)


@override_settings(AXES_FAILURE_LIMIT=LIMIT)
def test_the_admin_login_is_throttled_too(client, operator):
    for _ in range(LIMIT):
        client.post("/admin/login/", {"username": operator.username, "password": "nope"}, REMOTE_ADDR="10.0.0.1")
    response = client.post(
        "/admin/login/", {"username": operator.username, "password": operator.raw_password}, REMOTE_ADDR="10.0.0.1"
    )
    assert response.status_code == 429


def test_the_configured_limits_reach_axes(settings):
    assert settings.AXES_FAILURE_LIMIT == settings.LOGIN_FAILURE_LIMIT == 10
    assert settings.AXES_COOLOFF_TIME == timedelta(minutes=settings.LOGIN_LOCKOUT_MINUTES) == timedelta(minutes=15)
    assert settings.AXES_LOCKOUT_PARAMETERS == ["username", "ip_address"]
    assert settings.AXES_RESET_ON_SUCCESS is False


# API tokens -----------------------------------------------------------------------------------------
def token_for(user) -> str:
    return ApiToken.issue(user, "tests")[1]


def call(token, address="10.0.0.1"):
    return Client().get(STATS, HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=address)


@override_settings(TOKEN_FAILURE_LIMIT=LIMIT, TOKEN_LOCKOUT_MINUTES=1)
def test_wrong_tokens_answer_429_with_retry_after(operator):
    for _ in range(LIMIT):
        response = call("ssa_wrong")
        assert response.status_code == 401
    response = call("ssa_wrong")
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert response.json() == {
        "detail": f"Too many failed authentication attempts; try again in {response['Retry-After']} seconds"
    }


@override_settings(TOKEN_FAILURE_LIMIT=LIMIT, TOKEN_LOCKOUT_MINUTES=1)
def test_a_valid_token_is_never_refused_for_wrong_ones_from_its_address(operator):
    """A token cannot be guessed within a lockout (256 random bits): refusing a valid one protects nothing, and
    would let whoever shares the address (a NAT, a proxy's egress) lock a script out with wrong tokens."""
    token = token_for(operator)
    for _ in range(LIMIT + 2):
        call("ssa_wrong")
    assert call("ssa_wrong").status_code == 429
    assert call(token).status_code == 200
    assert call("ssa_wrong").status_code == 429  # and the valid one lifted nothing


@override_settings(TOKEN_FAILURE_LIMIT=LIMIT, TOKEN_LOCKOUT_MINUTES=1)
def test_a_valid_token_from_another_address_still_works(operator):
    for _ in range(LIMIT + 2):
        call("ssa_wrong")
    assert call(token_for(operator), address="10.0.0.2").status_code == 200


@override_settings(TOKEN_FAILURE_LIMIT=LIMIT, TOKEN_LOCKOUT_MINUTES=1)
def test_successful_token_uses_do_not_count(operator):
    token = token_for(operator)
    for _ in range(LIMIT + 2):
        assert call(token).status_code == 200
    for _ in range(LIMIT - 1):
        assert call("ssa_wrong").status_code == 401
    assert call(token).status_code == 200


@override_settings(TOKEN_FAILURE_LIMIT=LIMIT, TOKEN_LOCKOUT_MINUTES=1)
def test_the_token_lockout_ends_after_the_window(operator, monkeypatch):
    import time

    from statestore_admin.throttling import TokenFailureThrottle

    for _ in range(LIMIT):
        call("ssa_wrong")
    assert call("ssa_wrong").status_code == 429
    later = time.time() + 61
    monkeypatch.setattr(TokenFailureThrottle, "timer", lambda self: later)
    assert call("ssa_wrong").status_code == 401  # counted again, no longer refused
    assert call(token_for(operator)).status_code == 200


@override_settings(TOKEN_FAILURE_LIMIT=LIMIT)
def test_requests_without_a_token_are_not_throttled(client, operator):
    for _ in range(LIMIT):
        call("ssa_wrong")
    client.force_login(operator)
    assert client.get(STATS, REMOTE_ADDR="10.0.0.1").status_code == 200


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, "1.1.1.1", "10.0.0.1"),  # no proxy trusted: X-Forwarded-For is the client's to forge
        (1, "6.6.6.6, 2.2.2.2", "2.2.2.2"),  # the one proxy's entry, not what the client prepended
        (2, "6.6.6.6, 2.2.2.2, 10.1.1.1", "2.2.2.2"),
        (2, "2.2.2.2", "10.0.0.1"),  # fewer entries than proxies: the direct peer
    ],
)
def test_client_address(rf, settings, proxies, forwarded, expected):
    settings.TRUSTED_PROXY_COUNT = proxies
    request = rf.get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_address(request) == expected
