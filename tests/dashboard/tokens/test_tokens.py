"""API tokens: expiry, read-only tokens, revocation on password change or deactivation, the page, last_used_at."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connections
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils import timezone

from statestore_admin.access.actors import Actor
from statestore_admin.core.errors import Invalid
from statestore_admin.exports import restore as restores
from statestore_admin.records.models import AuditEvent
from statestore_admin.tokens.models import ApiToken, digest
from tests.conftest import ALL_PERMS, BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
STATS = "/api/statestore/v1/stats"
RUN_ID = "scheduled__2026-11-29T00:00:00+00:00"
TASK_KEY = f"/api/v2/dags/etl/dagRuns/{RUN_ID.replace('+', '%2B')}/taskInstances/t/state-store/a"
RESTORE = "/api/statestore/v1/restore"


def with_token(token: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.fixture
def operator(user_factory):
    return user_factory("operator", perms=ALL_PERMS)


# Expiry ------------------------------------------------------------------------------------------
def test_a_new_token_expires_after_the_maximum_by_default(operator, settings):
    settings.API_TOKEN_MAX_AGE_DAYS = 365
    record, _ = ApiToken.issue(operator)
    assert record.expires_at - record.created_at == timedelta(days=365)


def test_an_expired_token_answers_401_saying_so(operator):
    record, token = ApiToken.issue(operator, expires_in=timedelta(hours=1))
    assert with_token(token).get(STATS).status_code == 200
    ApiToken.objects.filter(pk=record.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = with_token(token).get(STATS)
    assert response.status_code == 401 and response.json() == {"detail": "Token expired"}
    assert response["WWW-Authenticate"] == "Bearer"
    # Other failures keep Airflow's wording.
    assert with_token("ssa_not-a-token").get(STATS).json() == {"detail": "Not authenticated"}


@pytest.mark.parametrize(("text", "lifetime"), [("90d", timedelta(days=90)), ("12h", timedelta(hours=12))])
def test_create_api_token_expires_in(operator, text, lifetime):
    call_command("create_api_token", operator.username, expires_in=text, stdout=io.StringIO())
    record = ApiToken.objects.get()
    assert record.expires_at - record.created_at == lifetime


@pytest.mark.parametrize("text", ["366d", "9000h", "0d", "90", "d", "-1d", "1w"])
def test_create_api_token_refuses_a_lifetime_over_the_maximum_or_malformed(operator, text, settings):
    settings.API_TOKEN_MAX_AGE_DAYS = 365
    with pytest.raises(CommandError, match="maximum|days or hours"):
        call_command("create_api_token", operator.username, expires_in=text)
    assert not ApiToken.objects.exists()


def test_the_maximum_is_configurable(operator, settings):
    settings.API_TOKEN_MAX_AGE_DAYS = 30
    with pytest.raises(CommandError, match="maximum of 30 days"):
        call_command("create_api_token", operator.username, "--expires-in", "31d")
    call_command("create_api_token", operator.username, stdout=io.StringIO())
    record = ApiToken.objects.get()
    assert record.expires_at - record.created_at == timedelta(days=30)


def test_list_api_tokens_shows_expiry_access_and_revocation(operator):
    record, _ = ApiToken.issue(operator, "ci", expires_in=timedelta(days=90), read_only=True)
    out = io.StringIO()
    call_command("list_api_tokens", stdout=out)
    assert f"expires {record.expires_at:%Y-%m-%d %H:%M}" in out.getvalue() and "read-only" in out.getvalue()
    call_command("revoke_api_token", str(record.pk), stdout=io.StringIO())
    out = io.StringIO()
    call_command("list_api_tokens", "--all", stdout=out)
    assert "(revoked by " in out.getvalue()


# Read-only tokens --------------------------------------------------------------------------------
def test_read_only_token_reads_but_cannot_write(operator):
    call_command("create_api_token", operator.username, "--read-only", stdout=(out := io.StringIO()))
    client = with_token(out.getvalue().strip())
    assert ApiToken.objects.get().read_only
    assert client.get(STATS).status_code == 200
    response = client.put(TASK_KEY, json.dumps({"value": 1}), content_type="application/json")
    assert response.status_code == 403 and response.json() == {"detail": "This API token is read-only"}
    response = client.post(RESTORE, json.dumps({}), content_type="application/json")
    assert response.status_code == 403 and response.json() == {"detail": "This API token is read-only"}


def test_read_write_token_is_not_refused_as_read_only(operator):
    _, token = ApiToken.issue(operator)
    response = with_token(token).post(RESTORE, json.dumps({}), content_type="application/json")
    assert response.status_code != 403


# Revocation on password change or deactivation ---------------------------------------------------
def test_a_password_change_revokes_the_users_tokens(operator, user_factory):
    record, token = ApiToken.issue(operator)
    other, _ = ApiToken.issue(user_factory("someone"))
    operator.set_password("a-new-password")
    operator.save()
    record.refresh_from_db()
    assert record.revoked_at is not None and record.revoked_reason == "password changed"
    # Audited as the dashboard's rule, one event per token revoked, with the reason; the other user's is kept.
    (event,) = AuditEvent.objects.filter(action=AuditEvent.Action.REVOKE)
    assert (event.via, event.actor, event.user) == ("rule", Actor.rule().name, None)
    assert (event.details["token_id"], event.details["owner"], event.details["reason"]) == (
        record.pk, operator.username, "password changed",
    )  # fmt: skip
    assert with_token(token).get(STATS).status_code == 401
    other.refresh_from_db()
    assert other.revoked_at is None


def test_deactivation_revokes_the_users_tokens(operator):
    record, _ = ApiToken.issue(operator)
    operator.is_active = False
    operator.save()
    record.refresh_from_db()
    assert record.revoked_at is not None and record.revoked_reason == "user deactivated"


def test_saving_without_those_changes_revokes_nothing(operator):
    record, token = ApiToken.issue(operator)
    operator.first_name = "Op"
    operator.save()
    operator.save(update_fields=["last_login"])
    assert ApiToken.objects.get(pk=record.pk).revoked_at is None
    assert with_token(token).get(STATS).status_code == 200


def test_a_rehash_of_the_same_password_on_login_revokes_nothing(operator, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    operator.set_password("pw")
    operator.save()
    record, _ = ApiToken.issue(operator)
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        "django.contrib.auth.hashers.MD5PasswordHasher",
    ]
    assert operator.check_password("pw")  # Django upgrades the hash and saves it
    assert operator.password.startswith("pbkdf2_")
    assert ApiToken.objects.get(pk=record.pk).revoked_at is None


# The page ----------------------------------------------------------------------------------------
def test_page_creates_once_and_shows_the_token_once(client, operator):
    client.force_login(operator)
    response = client.post("/account/tokens/", {"name": "laptop", "expires_in_days": "30", "read_only": "1"})
    assert response.status_code == 302 and response["Location"] == "/account/tokens/"
    page = client.get("/account/tokens/").content.decode()
    token = page.split('data-testid="new-token">')[1].split("<")[0]
    record = ApiToken.objects.get()
    assert record.digest == digest(token) and record.read_only and record.name == "laptop"
    assert record.expires_at - record.created_at == timedelta(days=30)
    reloaded = client.get("/account/tokens/").content.decode()
    assert token not in reloaded and record.prefix in reloaded
    assert ApiToken.objects.count() == 1


def test_page_offers_lifetimes_capped_at_the_maximum(client, operator, settings):
    settings.API_TOKEN_MAX_AGE_DAYS = 60
    client.force_login(operator)
    page = client.get("/account/tokens/").content.decode()
    assert 'value="30"' in page and 'value="60"' in page and 'value="90"' not in page
    client.post("/account/tokens/", {"expires_in_days": "365"})
    assert not ApiToken.objects.exists()
    client.post("/account/tokens/", {"name": "default"})
    record = ApiToken.objects.get()
    assert record.expires_at - record.created_at == timedelta(days=60)


def test_revoke_asks_for_confirmation_first(client, operator, user_factory):
    client.force_login(operator)
    record, token = ApiToken.issue(operator, "ci")
    confirm = client.get(f"/account/tokens/{record.pk}/revoke/")
    assert confirm.status_code == 200 and record.prefix in confirm.content.decode()
    assert ApiToken.objects.get(pk=record.pk).revoked_at is None
    other, _ = ApiToken.issue(user_factory("someone"))
    assert client.get(f"/account/tokens/{other.pk}/revoke/").status_code == 404
    assert client.post("/account/tokens/", {"revoke": record.pk}).status_code == 302
    record.refresh_from_db()
    assert record.revoked_reason == "revoked by operator"
    assert with_token(token).get(STATS).status_code == 401


# Who issued and revoked ---------------------------------------------------------------------------
def token_events(action):
    return list(AuditEvent.objects.filter(action=action).order_by("pk"))


def test_the_page_audits_who_issued_and_revoked_a_token(client, operator):
    client.force_login(operator)
    client.post("/account/tokens/", {"name": "laptop", "expires_in_days": "30"})
    record = ApiToken.objects.get()
    client.post("/account/tokens/", {"revoke": record.pk})
    (issued,) = token_events(AuditEvent.Action.TOKEN)
    (revoked,) = token_events(AuditEvent.Action.REVOKE)
    for event in (issued, revoked):
        assert (event.actor, event.user, event.via, event.status) == ("operator", operator, "ui", "done")
        assert event.details["token_id"] == record.pk and event.details["owner"] == "operator"
        assert event.details["prefix"] == record.prefix and event.details["name"] == "laptop"
    assert issued.details["read_only"] is False
    assert revoked.details["reason"] == "revoked by operator"


def test_the_commands_audit_who_issued_and_revoked_a_token(operator):
    call_command("create_api_token", operator.username, "--name", "ci", stdout=io.StringIO())
    record = ApiToken.objects.get()
    call_command("revoke_api_token", str(record.pk), stdout=io.StringIO())
    command = Actor.command()
    for event in (*token_events(AuditEvent.Action.TOKEN), *token_events(AuditEvent.Action.REVOKE)):
        assert (event.actor, event.user, event.via) == (command.name, None, "command")
        assert (event.os_user, event.host, event.details["token_id"]) == (command.os_user, command.host, record.pk)
    assert len(token_events(AuditEvent.Action.TOKEN)) == len(token_events(AuditEvent.Action.REVOKE)) == 1
    record.refresh_from_db()
    assert record.revoked_reason == f"revoked by {command.name} (revoke_api_token)"


def test_the_admin_audits_who_revoked_a_token(client, operator, user_factory):
    record, _ = ApiToken.issue(operator, "laptop")
    client.force_login(user_factory("root", is_staff=True, is_superuser=True))
    client.post("/admin/tokens/apitoken/", {"action": "revoke", "_selected_action": [record.pk]})
    (event,) = token_events(AuditEvent.Action.REVOKE)
    assert (event.actor, event.via, event.details["owner"]) == ("root", "admin", "operator")
    client.post("/admin/tokens/apitoken/", {"action": "revoke", "_selected_action": [record.pk]})
    assert len(token_events(AuditEvent.Action.REVOKE)) == 1  # a revoked token is not revoked again


def test_token_and_prune_events_are_for_viewers_of_both_stores_and_not_restorable(client, operator, user_factory):
    call_command("create_api_token", operator.username, stdout=io.StringIO())
    call_command("revoke_api_token", str(ApiToken.objects.get().pk), stdout=io.StringIO())
    call_command("audit_prune", older_than=30, stdout=io.StringIO())
    events = list(AuditEvent.objects.order_by("pk"))
    assert [e.action for e in events] == ["token", "revoke", "prune"]
    client.force_login(user_factory("task-only", perms=["task.view"]))
    listed = client.get("/api/statestore/v1/audit-events").json()
    assert listed["items"] == []
    for event in events:
        assert client.get(f"/audit/{event.pk}/").status_code == 403
        assert not event.restorable
        with pytest.raises(Invalid, match="not restored|not a key|stays revoked"):
            restores.restore_event(actor=Actor.command(), event_id=event.pk)
    client.force_login(operator)
    assert [e["action"] for e in client.get("/api/statestore/v1/audit-events").json()["items"]] == [
        "prune",
        "revoke",
        "token",
    ]
    assert "its details name the API token" in client.get(f"/audit/{events[0].pk}/").content.decode()


# last_used_at ------------------------------------------------------------------------------------
def test_last_used_at_is_written_at_most_once_a_minute(operator):
    record, token = ApiToken.issue(operator)
    client = with_token(token)
    client.get(STATS)
    first = ApiToken.objects.get(pk=record.pk).last_used_at
    assert first is not None
    client.get(STATS)
    assert ApiToken.objects.get(pk=record.pk).last_used_at == first
    ApiToken.objects.filter(pk=record.pk).update(last_used_at=timezone.now() - timedelta(minutes=2))
    client.get(STATS)
    assert ApiToken.objects.get(pk=record.pk).last_used_at > first


# The data migration ------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_existing_tokens_expire_max_age_after_their_creation(user_factory, settings):
    settings.API_TOKEN_MAX_AGE_DAYS = 365
    before = [("tokens", "0001_initial")]
    executor = MigrationExecutor(connections["default"])
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    user = user_factory("alice")
    created = timezone.now() - timedelta(days=1000)
    old = old_apps.get_model("tokens", "ApiToken").objects.create(
        user_id=user.pk, name="old", prefix="ssa_old", digest=digest("ssa_old-token"), created_at=created
    )
    executor = MigrationExecutor(connections["default"])
    executor.loader.build_graph()
    executor.migrate([node for node in executor.loader.graph.leaf_nodes() if node[0] == "tokens"])
    record = ApiToken.objects.get(pk=old.pk)
    assert record.expires_at == created + timedelta(days=365) and not record.read_only
    response = with_token("ssa_old-token").get(STATS)
    assert response.status_code == 401 and response.json() == {"detail": "Token expired"}


def _session_rows() -> list[str]:
    """Every session row as stored and as decoded, for a search of its text."""
    from django.contrib.sessions.models import Session

    return [f"{row.session_data}\n{json.dumps(row.get_decoded())}" for row in Session.objects.all()]


def test_the_session_never_holds_a_new_token_in_plaintext(client, operator):
    client.force_login(operator)
    created = client.post("/account/tokens/", {"name": "ci", "expires_in_days": "30"})
    assert created.status_code == 302
    record = ApiToken.objects.get()
    after_post = _session_rows()
    page = client.get("/account/tokens/")
    token = page.content.decode().split('data-testid="new-token">')[1].split("<")[0]
    assert digest(token) == record.digest  # the page still shows the token once, after the redirect
    assert "no-store" in page["Cache-Control"]
    for rows in (after_post, _session_rows()):
        assert rows and not any(token in row or token[len(record.prefix) :] in row for row in rows)
    assert token not in client.get("/account/tokens/").content.decode()  # shown once


def test_a_new_token_is_shown_only_to_the_browser_that_created_it(client, operator):
    client.force_login(operator)
    client.post("/account/tokens/", {"name": "ci"})
    client.cookies.pop("tokens_new_key", None)  # the same session without the key the response gave the browser
    page = client.get("/account/tokens/").content.decode()
    assert 'data-testid="new-token"' not in page and "cannot be shown" in page
    assert ApiToken.objects.count() == 1
