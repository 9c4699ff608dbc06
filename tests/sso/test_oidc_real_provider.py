"""Single sign-on against the real test OpenID provider (tests/oidc_provider: panva's oidc-provider, over real HTTP)
without a browser: Django's test client is the dashboard's side, a requests session plays the person at the
provider (its login and consent forms), and the provider's redirect back is handed to the client. It shows the
whole sign-in working with the sign-in kept in a cookie rather than a session row (issue 36). In a browser:
tests/browser/shell/test_oidc_sign_in.py."""

import json
import re
from html import unescape
from urllib.parse import urljoin

import pytest
import requests
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session

from statestore_admin.sso import oidc
from tests.oidc_provider_process import running_provider

pytestmark = pytest.mark.django_db(databases=["default", "airflow"])

CLIENT_ID, CLIENT_SECRET = "statestore-sso-tests", "sso-tests-only-secret"
DASHBOARD = "http://testserver"  # Django's test client


@pytest.fixture(scope="module")
def real_provider(tmp_path_factory):
    accounts = tmp_path_factory.mktemp("oidc") / "accounts.json"
    accounts.write_text(json.dumps({"alice": {"email": "alice@example.com", "groups": ["ops-viewers"]}}))
    with running_provider(
        client_id=CLIENT_ID, client_secret=CLIENT_SECRET, dashboard=DASHBOARD, accounts=accounts
    ) as issuer:
        yield issuer


@pytest.fixture
def sso(real_provider, settings):
    settings.OIDC_ISSUER = real_provider
    settings.OIDC_CLIENT_ID = CLIENT_ID
    settings.OIDC_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = "Test IdP"
    settings.OIDC_GROUP_ROLES = {"ops-viewers": "Viewer"}
    settings.OIDC_GROUP_SCOPES = {}
    return real_provider


def _form(page: str, base: str) -> tuple[str, dict]:
    """The page's first form: where it posts, and its fields (the login form's filled in)."""
    action = unescape(re.search(r'<form[^>]*action="([^"]+)"', page).group(1))
    fields = {}
    for tag in re.findall(r"<input[^>]*>", page):
        attributes = dict(re.findall(r'(\w+)="([^"]*)"', tag))
        if "name" in attributes:
            fields[attributes["name"]] = unescape(attributes.get("value", ""))
    if "login" in fields:
        fields.update(login="alice", password="the test provider takes any password")
    return urljoin(base, action), fields


def at_the_provider(url: str) -> str:
    """The person at the provider: its login and consent forms, until it sends the browser back to the dashboard."""
    person = requests.Session()
    answer = person.get(url, allow_redirects=False, timeout=10)
    for _ in range(12):
        if answer.is_redirect:
            target = urljoin(answer.url, answer.headers["Location"])
            if target.startswith(DASHBOARD):
                return target.removeprefix(DASHBOARD)
            answer = person.get(target, allow_redirects=False, timeout=10)
        else:
            assert answer.status_code == 200, answer.text[:500]
            action, fields = _form(answer.text, answer.url)
            answer = person.post(action, data=fields, allow_redirects=False, timeout=10)
    pytest.fail("the provider never sent the browser back")


def test_a_full_sign_in_with_the_real_provider_writes_a_session_row_only_at_the_callback(client, sso):
    before = Session.objects.count()
    for _ in range(5):
        assert type(client)().get("/oidc/login/").status_code == 302
    started = client.get("/oidc/login/", {"next": "/dags/"})
    assert started.status_code == 302 and started["Location"].startswith(f"{sso}/auth?")
    assert Session.objects.count() == before  # six sign-ins started, no row

    callback = at_the_provider(started["Location"])
    assert callback.startswith("/oidc/callback/?code=")
    answer = client.get(callback)

    assert answer.status_code == 302 and answer["Location"] == "/dags/"
    assert Session.objects.count() == before + 1  # the signed-in person's session
    user = get_user_model().objects.get(pk=client.session["_auth_user_id"])
    assert (user.username, user.email) == ("alice", "alice@example.com")
    assert client.cookies[oidc.FLOW_COOKIE].value == ""  # the sign-in under way is over
    assert client.get("/dags/").status_code == 200

    replayed = client.get(callback)  # the provider's answer again: the cookie that matched it is gone
    assert replayed.status_code == 400 and "used already" in replayed.content.decode()
