"""Access follows the identity provider (issue 36, item 2), through Django's test client over real HTTP against the
test OpenID provider on loopback (tests/sso/hostile_provider.py) and the trusted proxy's headers:

- an API token acts with what its owner has now: for an account single sign-on manages, what its last sign-in there
  set, and nothing once that sign-in is older than TOKEN_IDP_MAX_AGE;
- a session reads roles and scope at every request, and a single sign-on session ends past the same bound;
- fail closed: an account from single sign-on or the proxy without a scope group sees nothing unless DEFAULT_SCOPE.
"""

from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from statestore_admin import grants
from statestore_admin.access.actors import Actor
from statestore_admin.identity import sign_in
from statestore_admin.records.models import AccessScope, ExternalIdentity
from statestore_admin.sso import proxy
from statestore_admin.tokens.models import ApiToken
from tests import factories

from .hostile_provider import HostileProvider
from .test_oidc import begin, finish
from .test_oidc import provider as oidc_provider  # noqa: F401 - the fixture, under the name it has there

pytestmark = pytest.mark.django_db(databases=["default", "airflow"])

RUN_ID = "manual__idp"
ROLES = {"ops": "Operator", "viewers": "Viewer", "admins": "Admin", "root": "superuser"}
SCOPE_GROUPS = {"team-etl": "scope-etl"}


@pytest.fixture
def world():
    """Two DAGs with a key each; the scope group of team-etl sees etl_*."""
    keys = {}
    for dag_id in ("etl_a", "ml_x"):
        run = factories.make_dag_run(dag_id, run_id=RUN_ID)
        factories.make_task_instance(run, task_id="t")
        keys[dag_id] = factories.make_task_key(run, task_id="t", key=f"k_{dag_id}", value=f"VALUE-{dag_id}")
    grants.grant(Group.objects.create(name="scope-etl"), dags=["etl_*"], assets=["etl.*"], actor=Actor.command())
    return keys


@pytest.fixture
def provider(oidc_provider, settings):  # noqa: F811
    settings.OIDC_GROUP_ROLES = ROLES
    settings.OIDC_GROUP_SCOPES = SCOPE_GROUPS
    return oidc_provider


def sign_in_through(provider: HostileProvider, *groups: str) -> Client:
    """A browser that signed in at the provider as alice, in ``groups`` there."""
    provider.claims = {"groups": list(groups)}
    browser = Client()
    params = begin(browser, provider)
    answer = finish(browser, params["state"])
    assert answer.status_code == 302, answer.content
    return browser


def key_url(dag_id: str) -> str:
    return f"/api/v2/dags/{dag_id}/dagRuns/{RUN_ID}/taskInstances/t/state-store/k_{dag_id}"


def bearer(token: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def alice():
    return get_user_model().objects.get(username="alice")


def age_last_sign_in(user, by: timedelta) -> None:
    ExternalIdentity.objects.filter(user=user).update(last_sign_in=timezone.now() - by)


# Tokens ---------------------------------------------------------------------------------------------------
def test_a_token_loses_the_role_and_the_scope_that_the_next_sign_in_removed(client, provider, world):
    sign_in_through(provider, "ops", "team-etl")
    _, token = ApiToken.issue(alice(), "ci")
    assert client.get(key_url("etl_a"), **bearer(token)).json()["value"] == "VALUE-etl_a"
    assert client.get(key_url("ml_x"), **bearer(token)).status_code == 403
    put = client.put(key_url("etl_a"), {"value": "from-ci"}, content_type="application/json", **bearer(token))
    assert put.status_code == 204, put.content

    sign_in_through(provider, "viewers")  # left team-etl and ops at the provider, then signed in once

    for dag_id in ("etl_a", "ml_x"):  # no scope group left: nothing, never every DAG
        assert client.get(key_url(dag_id), **bearer(token)).status_code == 403
    listed = client.get("/api/statestore/v1/search/task-keys", {"key": "k_"}, **bearer(token)).json()
    assert listed["items"] == []
    refused = client.put(key_url("etl_a"), {"value": "x"}, content_type="application/json", **bearer(token))
    assert refused.status_code == 403


def test_a_token_is_rechecked_against_the_last_sign_ins_groups(client, provider, world, settings):
    """What the last sign-in's groups map to today, whatever was given since: the deployment's mapping changed (ops
    are Viewers now, viewers Operators), or a mapped role given by hand in /admin/, which the provider never said."""
    sign_in_through(provider, "ops", "team-etl")
    _, token = ApiToken.issue(alice(), "ci")
    put = client.put(key_url("etl_a"), {"value": "v1"}, content_type="application/json", **bearer(token))
    assert put.status_code == 204
    settings.OIDC_GROUP_ROLES = {**ROLES, "ops": "Viewer", "viewers": "Operator"}
    refused = client.put(key_url("etl_a"), {"value": "v2"}, content_type="application/json", **bearer(token))
    assert refused.status_code == 403
    assert set(alice().groups.values_list("name", flat=True)) == {"Viewer", "scope-etl"}

    alice().groups.add(Group.objects.get(name="Admin"))  # by hand: not what the provider said
    assert client.delete(key_url("etl_a"), **bearer(token)).status_code == 403
    assert set(alice().groups.values_list("name", flat=True)) == {"Viewer", "scope-etl"}


def test_a_token_stops_when_its_owner_has_not_signed_in_for_token_idp_max_age(client, provider, world, settings):
    settings.DEFAULT_SCOPE = ["*"]
    sign_in_through(provider, "viewers")
    _, token = ApiToken.issue(alice(), "ci")
    assert client.get(key_url("ml_x"), **bearer(token)).status_code == 200

    age_last_sign_in(alice(), timedelta(seconds=settings.TOKEN_IDP_MAX_AGE - 60))
    assert client.get(key_url("ml_x"), **bearer(token)).status_code == 200  # within the bound
    age_last_sign_in(alice(), timedelta(seconds=settings.TOKEN_IDP_MAX_AGE + 60))
    refused = client.get(key_url("ml_x"), **bearer(token))
    assert refused.status_code == 401
    assert "signed in through single sign-on" in refused.json()["detail"]
    assert refused["WWW-Authenticate"] == "Bearer"

    sign_in_through(provider, "viewers")  # signing in again brings the token back
    assert client.get(key_url("ml_x"), **bearer(token)).status_code == 200


def test_the_bound_is_the_setting(client, provider, world, settings):
    settings.DEFAULT_SCOPE = ["*"]
    settings.TOKEN_IDP_MAX_AGE = 3600
    sign_in_through(provider, "viewers")
    _, token = ApiToken.issue(alice(), "ci")
    age_last_sign_in(alice(), timedelta(hours=2))
    assert client.get(key_url("ml_x"), **bearer(token)).status_code == 401


def test_a_local_accounts_token_works_as_long_as_the_token(client, user_factory, world):
    local = user_factory("local-ci", perms=["task.view"])
    record, token = ApiToken.issue(local, "ci")
    ApiToken.objects.filter(pk=record.pk).update(created_at=timezone.now() - timedelta(days=300))
    assert client.get(key_url("ml_x"), **bearer(token)).status_code == 200
    assert local.last_login is None and sign_in.last_sign_in(local) is None


def test_a_proxy_accounts_token_follows_the_proxy_sign_ins(client, settings, world):
    settings.TRUSTED_PROXY_ADDRESSES = ["10.0.0.5"]
    settings.OIDC_GROUP_ROLES = ROLES
    settings.OIDC_GROUP_SCOPES = SCOPE_GROUPS
    headers = {"REMOTE_ADDR": "10.0.0.5", "HTTP_X_FORWARDED_USER": "pat", "HTTP_X_FORWARDED_GROUPS": "ops,team-etl"}
    browser = Client()
    assert browser.get("/", **headers).status_code == 200
    pat = get_user_model().objects.get(username="pat")
    _, token = ApiToken.issue(pat, "ci")
    assert client.get(key_url("etl_a"), **bearer(token)).status_code == 200
    age_last_sign_in(pat, timedelta(seconds=settings.TOKEN_IDP_MAX_AGE + 60))
    assert client.get(key_url("etl_a"), **bearer(token)).status_code == 401
    # The person goes on using the dashboard through the proxy: the proxy's word, taken again, renews the sign-in.
    session = browser.session
    session[proxy.SESSION_KEY] = {**session[proxy.SESSION_KEY], "at": 0}
    session.save()
    assert browser.get("/", **headers).status_code == 200
    assert client.get(key_url("etl_a"), **bearer(token)).status_code == 200


# Sessions -------------------------------------------------------------------------------------------------
class _FormFields(HTMLParser):
    """The fields of a page's form as a browser would send them (text, hidden, checked boxes, selected options)."""

    def __init__(self):
        super().__init__()
        self.data: dict[str, list[str]] = {}
        self._select = None
        self._textarea = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        name = a.get("name")
        if tag == "input" and name:
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio") and "checked" not in a:
                return
            if kind not in ("submit", "button", "file"):
                self.data.setdefault(name, []).append(a.get("value", "on" if kind == "checkbox" else ""))
        elif tag == "select" and name:
            self._select = name
            self.data.setdefault(name, [])
        elif tag == "option" and self._select and "selected" in a:
            self.data[self._select].append(a.get("value", ""))
        elif tag == "textarea" and name:
            self._textarea = name
            self.data[name] = [""]

    def handle_data(self, data):
        if self._textarea:
            self.data[self._textarea][0] += data

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None


def form_of(response) -> dict[str, list[str]]:
    parser = _FormFields()
    parser.feed(response.content.decode())
    return parser.data


def test_a_session_loses_a_role_and_a_scope_removed_in_the_admin_at_its_next_request(client, user_factory, world):
    operator = user_factory("olga", unscoped=False)
    operator.groups.add(Group.objects.get(name="Operator"), Group.objects.get(name="scope-etl"))
    client.force_login(operator)
    assert client.get("/dags/etl_a/").status_code == 200
    assert client.get(key_url("etl_a")).status_code == 200

    admin = Client()
    admin.force_login(user_factory("root", is_staff=True, is_superuser=True))
    page = admin.get(f"/admin/auth/user/{operator.pk}/change/")
    data = form_of(page)
    data["groups"] = [str(Group.objects.get(name="Viewer").pk), str(Group.objects.get(name="scope-etl").pk)]
    saved = admin.post(f"/admin/auth/user/{operator.pk}/change/", data)
    assert saved.status_code == 302, saved.content.decode()[:3000]

    put = client.put(key_url("etl_a"), {"value": "x"}, content_type="application/json")
    assert put.status_code == 403  # the Operator role is gone at the next request: a Viewer now
    assert client.get(key_url("etl_a")).status_code == 200

    for row in AccessScope.objects.filter(group__name="scope-etl"):
        assert admin.post(f"/admin/state/accessscope/{row.pk}/delete/", {"post": "yes"}).status_code == 302
    # The last grant gone: nothing at the next request, never every DAG.
    for dag_id in ("etl_a", "ml_x"):
        assert client.get(f"/dags/{dag_id}/").status_code == 403
        assert client.get(key_url(dag_id)).status_code == 403


def test_a_single_sign_on_session_ends_past_the_bound(provider, world, settings):
    settings.DEFAULT_SCOPE = ["*"]
    browser = sign_in_through(provider, "ops")
    assert browser.get("/dags/ml_x/").status_code == 200
    settings.OIDC_GROUP_ROLES = {**ROLES, "ops": "Viewer", "viewers": "Operator"}  # the mapping changed
    assert browser.get("/dags/ml_x/").status_code == 200
    assert set(alice().groups.values_list("name", flat=True)) == {"Viewer"}  # at the session's next request
    age_last_sign_in(alice(), timedelta(seconds=settings.TOKEN_IDP_MAX_AGE + 60))

    page = browser.get("/dags/ml_x/")
    assert page.status_code == 302 and page["Location"].startswith("/login/")
    assert "_auth_user_id" not in browser.session  # signed out, not only turned away
    assert browser.get(key_url("ml_x")).status_code in (401, 403)


def test_a_password_session_of_a_local_account_is_not_bounded(client, user_factory, world):
    local = user_factory("lou", perms=["task.view"])
    assert client.post("/login/", {"username": "lou", "password": "pw-for-tests"}).status_code == 302
    get_user_model().objects.filter(pk=local.pk).update(last_login=timezone.now() - timedelta(days=30))
    assert client.get("/dags/ml_x/").status_code == 200


def test_a_password_session_of_an_account_the_proxy_manages_keeps_only_what_the_provider_still_vouches_for(
    settings, world
):
    """An account the proxy (or single sign-on) made, given a password by an administrator: its password session
    goes on, but the roles and scope groups the provider gave follow the provider as in a token's request: what the
    last sign-in's groups map to today (a mapped role given by hand is taken back), and none of them once that
    sign-in is older than TOKEN_IDP_MAX_AGE. Someone removed at the provider does not keep its roles through a
    password."""
    settings.TRUSTED_PROXY_ADDRESSES = ["10.0.0.5"]
    settings.OIDC_GROUP_ROLES = ROLES
    settings.OIDC_GROUP_SCOPES = SCOPE_GROUPS
    proxied = Client(REMOTE_ADDR="10.0.0.5", HTTP_X_FORWARDED_USER="pat", HTTP_X_FORWARDED_GROUPS="ops,team-etl")
    assert proxied.get("/dags/etl_a/").status_code == 200
    pat = get_user_model().objects.get(username="pat")
    pat.set_password("pat-s-own-password-1")
    pat.save()
    pat.groups.add(Group.objects.get(name="Admin"))  # a mapped role, given by hand

    browser = Client()  # not through the proxy: a password sign-in
    answer = browser.post("/login/", {"username": "pat", "password": "pat-s-own-password-1"})
    assert answer.status_code == 302
    assert browser.get("/dags/etl_a/").status_code == 200
    assert set(pat.groups.values_list("name", flat=True)) == {"Operator", "scope-etl"}  # Admin taken back

    age_last_sign_in(pat, timedelta(seconds=settings.TOKEN_IDP_MAX_AGE + 60))
    assert browser.get("/dags/etl_a/").status_code == 403  # signed in still, with no role the provider gave
    assert set(pat.groups.values_list("name", flat=True)) == set()
    assert "_auth_user_id" in browser.session


def test_using_a_token_does_not_count_as_a_sign_in(client, provider, world, settings):
    settings.DEFAULT_SCOPE = ["*"]
    sign_in_through(provider, "viewers")
    _, token = ApiToken.issue(alice(), "ci")
    age_last_sign_in(alice(), timedelta(hours=1))
    before = sign_in.last_sign_in(alice())
    last_login = alice().last_login
    assert client.get(key_url("ml_x"), **bearer(token)).status_code == 200
    assert sign_in.last_sign_in(alice()) == before and alice().last_login == last_login


# Fail closed ----------------------------------------------------------------------------------------------
NO_SCOPE_NOTICE = 'data-testid="no-scope"'


def assert_sees_nothing(browser: Client, bearer_headers: dict | None = None) -> None:
    """No DAG and no key on the pages and the API: lists empty, a DAG by name 403, a key by id 404; the pages
    say why (the no-scope notice), rather than look like an empty Airflow."""
    dags = browser.get("/dags/").content.decode()
    assert "etl_a" not in dags and "ml_x" not in dags
    assert NO_SCOPE_NOTICE in dags and "no access scope has been granted" in dags
    for dag_id in ("etl_a", "ml_x"):
        assert browser.get(f"/dags/{dag_id}/").status_code == 403
        assert browser.get(key_url(dag_id), **(bearer_headers or {})).status_code == 403
        listed = browser.get(key_url(dag_id).rsplit("/", 1)[0], **(bearer_headers or {}))
        assert listed.status_code == 403
    search = browser.get("/api/statestore/v1/search/task-keys", {"key": "k_"}, **(bearer_headers or {}))
    assert search.json()["items"] == []
    assert "VALUE-" not in browser.get("/search/", {"key": "k_"}).content.decode()
    stats = browser.get("/api/statestore/v1/stats", **(bearer_headers or {})).json()
    assert stats["task_keys"] == 0


def test_a_single_sign_on_account_without_a_scope_group_sees_nothing(provider, world, client, task_key_factory):
    browser = sign_in_through(provider, "ops")
    _, token = ApiToken.issue(alice(), "ci")
    assert_sees_nothing(browser)
    assert_sees_nothing(browser, bearer(token))
    key = world["ml_x"]
    assert browser.get(f"/keys/task/{key.pk}/").status_code == 404


def test_with_default_scope_star_a_single_sign_on_account_sees_every_dag(provider, world, settings):
    settings.DEFAULT_SCOPE = ["*"]
    browser = sign_in_through(provider, "ops")
    for dag_id in ("etl_a", "ml_x"):
        assert browser.get(f"/dags/{dag_id}/").status_code == 200
        assert browser.get(key_url(dag_id)).json()["value"] == f"VALUE-{dag_id}"
    settings.DEFAULT_SCOPE = ["ml_*"]
    assert browser.get(key_url("ml_x")).status_code == 200
    assert browser.get(key_url("etl_a")).status_code == 403


def test_a_proxy_account_without_a_scope_group_sees_nothing(settings, world):
    settings.TRUSTED_PROXY_ADDRESSES = ["10.0.0.5"]
    settings.OIDC_GROUP_ROLES = ROLES
    settings.OIDC_GROUP_SCOPES = SCOPE_GROUPS
    browser = Client(REMOTE_ADDR="10.0.0.5", HTTP_X_FORWARDED_USER="pat", HTTP_X_FORWARDED_GROUPS="ops")
    assert_sees_nothing(browser)
    settings.DEFAULT_SCOPE = ["*"]
    assert browser.get("/dags/ml_x/").status_code == 200
    assert NO_SCOPE_NOTICE not in browser.get("/dags/").content.decode()


def test_a_local_account_sees_everything_only_when_made_unscoped(client, user_factory, world):
    local = user_factory("lena", perms=["task.view"], unscoped=False)
    client.force_login(local)
    assert_sees_nothing(client)
    grants.grant(local, unscoped=True, actor=Actor.command())
    assert client.get("/dags/ml_x/").status_code == 200
    assert NO_SCOPE_NOTICE not in client.get("/dags/").content.decode()
    assert client.get(key_url("etl_a")).json()["value"] == "VALUE-etl_a"
