"""Single sign-on in a browser against a real OpenID provider (issue 24): panva's oidc-provider from npm
(tests/oidc_provider/, pinned by its package-lock.json; `npm ci` there, as `make install-dev` and .ci/run do),
started on loopback for these tests. Who signs in with which groups is its accounts file, which a test rewrites
between two sign-ins. The forgeries a real provider never makes: tests/sso/test_oidc.py."""

import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from statestore_admin.identity import roles
from statestore_admin.records.models import AccessScope
from statestore_admin.settings import allow_form_action
from tests.conftest import BOTH_DATABASES
from tests.oidc_provider_process import running_provider

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True)

CLIENT_ID, CLIENT_SECRET = "statestore-browser-tests", "browser-tests-only-secret"


@pytest.fixture(scope="session")
def oidc_provider(live_server, tmp_path_factory):
    """The provider's issuer URL and its accounts file (login -> {"email", "groups"})."""
    accounts = tmp_path_factory.mktemp("oidc") / "accounts.json"
    accounts.write_text("{}")
    with running_provider(
        client_id=CLIENT_ID, client_secret=CLIENT_SECRET, dashboard=live_server.url, accounts=accounts
    ) as issuer:
        yield issuer, accounts


@pytest.fixture
def sso(oidc_provider, settings):
    issuer, accounts = oidc_provider
    settings.OIDC_ISSUER = issuer
    settings.OIDC_CLIENT_ID = CLIENT_ID
    settings.OIDC_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = "Test IdP"
    settings.CONTENT_SECURITY_POLICY = allow_form_action(settings.CONTENT_SECURITY_POLICY, issuer)  # as settings.py
    settings.OIDC_GROUP_ROLES = {"ops-viewers": "Viewer", "ops-operators": "Operator"}
    settings.OIDC_GROUP_SCOPES = {"team-etl": "team-etl"}
    roles.sync_roles()  # a transactional test's flush emptied the roles' permissions
    team = Group.objects.create(name="team-etl")
    AccessScope.objects.create(group=team, kind=AccessScope.Kind.DAG, pattern="etl_*")

    def account(login: str, *groups: str) -> None:
        data = json.loads(accounts.read_text())
        data[login] = {"email": f"{login}@example.com", "groups": list(groups)}
        accounts.write_text(json.dumps(data))

    return account


@pytest.fixture(autouse=True)
def quiet_provider_pages(page, oidc_provider):
    """The provider's own pages (not ours) ask for a web font from Google, which a test machine cannot reach, and
    for a favicon it has not: answered here, so that the console check (conftest.py) sees our pages only."""
    page.route("https://fonts.googleapis.com/**", lambda route: route.fulfill(content_type="text/css", body=""))
    page.route(f"{oidc_provider[0]}/favicon.ico", lambda route: route.fulfill(status=204))


def sign_in_at_provider(page, live_server, login: str, next_path: str = "/dags/"):
    """From a dashboard page through the login page's button and the provider's own login and consent pages."""
    page.goto(f"{live_server.url}{next_path}")
    expect(page).to_have_url(re.compile(r"/login/"))
    page.get_by_role("link", name="Sign in with Test IdP").click()
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "the test provider takes any password")
    page.locator("button[type=submit]").click()
    page.get_by_role("button", name="Continue").click()  # the provider's consent page


def sign_out(page, oidc_provider):
    """The dashboard's Sign out, then the provider's end-session page ("Yes, sign me out"), back to our login."""
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(re.escape(oidc_provider[0]) + r"/session/end"))
    page.get_by_role("button", name="Yes, sign me out").click()
    expect(page).to_have_url(re.compile(r"/login/"))


def groups_of(django_user_model, username: str) -> set[str]:
    return set(django_user_model.objects.get(username=username).groups.values_list("name", flat=True))


def test_sign_in_group_changes_and_logout(page, live_server, sso, oidc_provider, django_user_model, screenshot):
    sso("alice", "ops-viewers", "team-etl", "an-unmapped-group")
    page.goto(f"{live_server.url}/login/")
    screenshot("oidc-login-page")
    sign_in_at_provider(page, live_server, "alice")
    expect(page).to_have_url(f"{live_server.url}/dags/")  # the page asked for, after the provider
    expect(page.locator("header")).to_contain_text("alice")
    expect(page.get_by_text("Read-only", exact=True)).to_be_visible()  # a Viewer
    assert groups_of(django_user_model, "alice") == {"Viewer", "team-etl"}
    screenshot("oidc-signed-in")

    # Logout ends the dashboard's session and the provider's, through its end-session endpoint.
    ended = []
    page.on("request", lambda r: ended.append(r.url) if "/session/end" in r.url and r.method == "GET" else None)
    sign_out(page, oidc_provider)
    (end_session,) = ended
    query = parse_qs(urlsplit(end_session).query)
    assert query["post_logout_redirect_uri"] == [f"{live_server.url}/login/"] and query["id_token_hint"]
    page.goto(f"{live_server.url}/dags/")
    expect(page).to_have_url(re.compile(r"/login/\?next="))

    # At the next sign-in the provider says Operator and no team: the role follows, the scope group goes.
    sso("alice", "ops-operators")
    sign_in_at_provider(page, live_server, "alice", next_path="/")
    expect(page.locator("h1")).to_have_text("Task & asset state")
    expect(page.get_by_text("Read-only", exact=True)).to_have_count(0)
    assert groups_of(django_user_model, "alice") == {"Operator"}


def test_someone_in_no_mapped_group_gets_the_no_access_page(page, live_server, sso, django_user_model, screenshot):
    sso("bob", "marketing", "everyone")
    answers = []
    page.on("response", lambda r: answers.append(r.status) if "/oidc/callback/" in r.url else None)
    sign_in_at_provider(page, live_server, "bob")
    expect(page.get_by_role("heading", level=1)).to_contain_text("No access")
    expect(page.locator("main")).to_contain_text("bob")
    expect(page.locator("main")).to_contain_text("Test IdP")
    expect(page.locator("main")).to_contain_text("marketing")
    assert answers == [403]
    screenshot("oidc-no-access")
    page.goto(f"{live_server.url}/dags/")
    expect(page).to_have_url(re.compile(r"/login/"))  # nobody signed in


def test_a_replayed_or_forged_callback_is_refused(page, live_server, sso, oidc_provider, screenshot):
    """The provider's real answer (a code and the state), sent again after use, and with another state."""
    sso("carol", "ops-viewers")
    callbacks = []
    page.on("request", lambda r: callbacks.append(r.url) if "/oidc/callback/" in r.url else None)
    sign_in_at_provider(page, live_server, "carol")
    expect(page).to_have_url(f"{live_server.url}/dags/")
    sign_out(page, oidc_provider)
    (answer,) = callbacks

    page.goto(answer)
    expect(page.get_by_test_id("oidc-failed")).to_contain_text("used already")
    screenshot("oidc-refused")
    page.goto(re.sub(r"state=[^&]+", "state=forged", answer))
    expect(page.get_by_test_id("oidc-failed")).to_contain_text("does not belong to a sign-in started in this browser")
    page.goto(f"{live_server.url}/dags/")
    expect(page).to_have_url(re.compile(r"/login/"))  # nobody signed in
