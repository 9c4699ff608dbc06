"""`manage.py break_glass`: a one-time, short-lived sign-in link for a superuser (sso/break_glass.py), with or
without local passwords; the audit records the session's changes as break-glass."""

import logging
from datetime import timedelta
from io import StringIO
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from statestore_admin.access.actors import Actor
from statestore_admin.identity import break_glass
from statestore_admin.identity.sign_in import SESSION_KEY
from statestore_admin.records.models import AuditEvent, BreakGlassLink

pytestmark = pytest.mark.django_db(databases=["default", "airflow"])


def make_link(username="root", *args):
    out = StringIO()
    call_command(
        "break_glass", username, "--url", "https://statestore.example.com/", *args, stdout=out, stderr=StringIO()
    )
    return out.getvalue().strip()


@pytest.fixture
def root(db):
    return get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests")


def path_of(link):
    assert link.startswith("https://statestore.example.com/break-glass/")
    return link.removeprefix("https://statestore.example.com")


def token_of(link):
    """The link's token: in its query string (before issue 36: the last part of its path)."""
    parts = urlsplit(link)
    return parse_qs(parts.query)["token"][0] if parts.query else parts.path.rstrip("/").rsplit("/", 1)[-1]


@pytest.mark.parametrize("passwords", [True, False])
def test_the_link_signs_in_once_and_is_logged(client, root, settings, caplog, passwords):
    settings.LOCAL_PASSWORDS = passwords
    settings.TRUSTED_PROXY_ADDRESSES = ["10.0.0.5"]
    with caplog.at_level(logging.WARNING, logger="statestore_admin.sso.break_glass"):
        path = path_of(make_link())
        shown = client.get(path)
        assert shown.status_code == 200 and "Sign in as root" in shown.content.decode()
        assert "_auth_user_id" not in client.session  # opening the link spends nothing

        signed_in = client.post(path)

    assert signed_in.status_code == 302 and signed_in["Location"] == reverse("home")
    assert client.session["_auth_user_id"] == str(root.pk)
    assert client.session[SESSION_KEY] == "break-glass"
    messages = [r.getMessage() for r in caplog.records]
    assert any("link made for root" in m for m in messages)
    assert any("break-glass sign-in: root" in m for m in messages)

    client.logout()
    again = client.post(path)
    assert again.status_code == 403 and "already used" in again.content.decode()
    assert "_auth_user_id" not in client.session


def test_the_database_keeps_only_a_hash(root):
    token = token_of(make_link())
    stored = BreakGlassLink.objects.get()
    assert token not in stored.token_hash and len(stored.token_hash) == 64


def test_the_link_records_who_made_it(root, caplog):
    with caplog.at_level(logging.WARNING, logger="statestore_admin.identity.break_glass"):
        make_link()
    command = Actor.command()
    assert BreakGlassLink.objects.get().issued_by == command.name == f"{command.os_user}@{command.host}"
    assert any(f"made for root by {command.name}," in record.getMessage() for record in caplog.records)
    break_glass.issue(root, 5, actor=Actor(via="command", os_user="ops", host="bastion"))
    assert BreakGlassLink.objects.order_by("pk").last().issued_by == "ops@bastion"


def test_an_expired_link_is_refused(client, root):
    path = path_of(make_link("root", "--minutes", "1"))
    BreakGlassLink.objects.update(expires=timezone.now() - timedelta(seconds=1))

    for page in (client.get(path), client.post(path)):
        assert page.status_code == 403 and "expired" in page.content.decode()
    assert "_auth_user_id" not in client.session
    assert BreakGlassLink.objects.get().used is None


def test_an_unknown_link_is_refused(client, root):
    page = client.post("/break-glass/", {"token": "not-a-token"})
    assert page.status_code == 403 and "unknown" in page.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_link_for_someone_no_longer_superuser_is_refused(client, root):
    path = path_of(make_link())
    root.is_superuser = False
    root.save()

    page = client.post(path)

    assert page.status_code == 403 and "no longer an active superuser" in page.content.decode()
    assert "_auth_user_id" not in client.session


def test_create_makes_a_superuser_without_a_usable_password(client):
    path = path_of(make_link("rescue", "--create"))

    user = get_user_model().objects.get(username="rescue")
    assert user.is_superuser and user.is_staff and not user.has_usable_password()
    assert client.post(path).status_code == 302


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nobody"], "No user 'nobody'"),
        (["root", "--minutes", "0"], "--minutes 0"),
        (["root", "--minutes", "1441"], "--minutes 1441"),
        (["root", "--url", "statestore.example.com"], "--url"),
        (["plain"], "not an active superuser"),
        (["plain", "--create"], "not an active superuser"),
    ],
)
def test_bad_input_is_a_clear_error_and_makes_no_link(root, user_factory, args, message):
    user_factory("plain")
    with pytest.raises(CommandError, match=message):
        call_command("break_glass", *args, stdout=StringIO(), stderr=StringIO())
    assert not BreakGlassLink.objects.exists()


def test_the_audit_records_break_glass(client, root, dag_run_factory, task_key_factory):
    key = task_key_factory(dag_run_factory(), key="cursor", value="1")
    client.post(path_of(make_link()))

    hx = {"HTTP_HX_REQUEST": "true"}
    dialog = client.get("/keys/task/expire/", {"ids": [key.pk]}, **hx)
    listed = dialog.content.decode().split('name="listed" value="')[1].split('"')[0]
    assert client.post("/keys/task/expire/", {"ids": [key.pk], "listed": listed}, **hx).status_code == 204

    assert AuditEvent.objects.get().signed_in == "break-glass"


@pytest.mark.parametrize("minutes", [1, 15, 1440])
def test_the_session_lasts_the_links_minutes(client, root, minutes):
    started = timezone.now()
    client.post(path_of(make_link("root", "--minutes", str(minutes))))
    session = Session.objects.get(session_key=client.session.session_key)
    lifetime = timedelta(minutes=minutes)
    assert started + lifetime - timedelta(seconds=5) <= session.expire_date <= timezone.now() + lifetime
    # A later request does not move the end (the session is saved again on a change).
    assert client.get(reverse("home")).status_code == 200
    assert Session.objects.get(session_key=client.session.session_key).expire_date <= timezone.now() + lifetime


def test_the_token_is_in_no_log_line(root, caplog, settings):
    """The lines Django writes for a refused or CSRF-less POST (django.request, django.security.csrf) and the
    login throttle's "successful login" line (django-axes), from real requests through the middleware."""
    link = make_link()
    token = token_of(link)
    with caplog.at_level(logging.DEBUG):
        strict = Client(enforce_csrf_checks=True)
        assert strict.get(path_of(link)).status_code == 200
        assert strict.post(path_of(link)).status_code == 403  # no CSRF token: Django's Forbidden line
        assert Client().post(path_of(link).replace(token, token[:-1])).status_code == 403  # unknown: refused
        signed_in = Client()
        assert signed_in.post(path_of(link)).status_code == 302
        assert signed_in.post(path_of(link)).status_code == 403  # used already
    lines = [record.getMessage() + str(record.args) for record in caplog.records]
    assert any("Forbidden" in line for line in lines) and any("Successful login" in line for line in lines)
    assert not [line for line in lines if token in line]
