"""OpenID Connect sign-in refuses every bad answer (issue 24): Django's test client against a provider on loopback
that answers what each test tells it (tests/sso/hostile_provider.py), over real HTTP; down and slow providers
through tests/faults.py's TcpProxy. Each refusal is a page with a 4xx (503 for a provider that does not answer),
a log line, and nobody signed in. The sign-in itself, with a real provider in a browser:
tests/browser/shell/test_oidc_sign_in.py."""

import base64
import hashlib
import logging
import time
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.core import signing

from statestore_admin.identity import sign_in
from statestore_admin.records.models import AuditEvent, ExternalIdentity
from statestore_admin.sso import oidc
from tests.faults import TcpProxy

from .hostile_provider import CLIENT_ID, CLIENT_SECRET, HostileProvider, new_key

pytestmark = pytest.mark.django_db


FAULT_TIMEOUT = 1.0


@pytest.fixture
def faulty(settings):
    """The tests of a provider that does not answer wait ``FAULT_TIMEOUT`` for each request."""
    settings.OIDC_TIMEOUT = FAULT_TIMEOUT


@pytest.fixture
def provider(settings):
    # A new provider may get the port of an earlier test's, and so its issuer URL: the client (and the discovery
    # document it keeps) is per configuration, so forget those of earlier tests, as a restarted dashboard would.
    oidc._clients.clear()
    provider = HostileProvider()
    settings.OIDC_ISSUER = provider.issuer
    settings.OIDC_CLIENT_ID = CLIENT_ID
    settings.OIDC_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = "Hostile"
    # Generous for the provider's answers on a busy machine (a 1 s timeout once failed a sign-in in CI); the tests
    # of a provider that does not answer set FAULT_TIMEOUT themselves (``faulty``).
    settings.OIDC_TIMEOUT = 10.0
    settings.OIDC_GROUP_ROLES = {"ops-viewers": "Viewer"}
    settings.OIDC_GROUP_SCOPES = {}
    yield provider
    provider.stop()


def begin(client, provider, next_url="/dags/") -> dict:
    """Start a sign-in: the redirect to the provider, its parameters; the provider learns the nonce."""
    answer = client.get("/oidc/login/", {"next": next_url})
    assert answer.status_code == 302, answer.content
    url = urlsplit(answer["Location"])
    assert f"{url.scheme}://{url.netloc}{url.path}" == f"{provider.issuer}/authorize"
    params = {name: values[0] for name, values in parse_qs(url.query).items()}
    provider.nonce = params["nonce"]
    return params


def finish(client, state, code="code-1"):
    return client.get("/oidc/callback/", {"code": code, "state": state})


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def assert_refused(answer, client, caplog, status=400, says=""):
    assert answer.status_code == status, answer.content
    page = answer.content.decode()
    assert 'data-testid="oidc-failed"' in page
    assert says in page
    assert "Traceback" not in page
    assert not signed_in(client)
    assert any("OIDC sign-in refused" in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


def test_a_valid_answer_signs_in_with_pkce_state_and_nonce(client, provider):
    params = begin(client, provider)
    assert params["code_challenge_method"] == "S256"
    assert params["scope"] == "openid email profile groups"
    answer = finish(client, params["state"])
    assert answer.status_code == 302 and answer["Location"] == "/dags/"
    assert signed_in(client)
    user = get_user_model().objects.get(pk=client.session["_auth_user_id"])
    assert (user.username, user.email) == ("alice", "alice@example.com")
    assert list(user.groups.values_list("name", flat=True)) == ["Viewer"]
    # The code went back with the verifier whose S256 hash the authorization request carried.
    (form,) = [form for path, form in provider.seen if path == "/token"]
    verifier = form["code_verifier"][0]
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    assert challenge == params["code_challenge"] and form["code"] == ["code-1"]


def test_next_elsewhere_is_not_followed(client, provider):
    params = begin(client, provider, next_url="https://evil.example/steal")
    answer = finish(client, params["state"])
    assert answer.status_code == 302 and answer["Location"] == "/"


def test_wrong_state_is_refused(client, provider, caplog):
    begin(client, provider)
    answer = finish(client, "forged-state")
    assert_refused(answer, client, caplog, says="does not belong to a sign-in started in this browser")
    assert "/token" not in provider.paths()  # the code was never sent to the provider


def test_missing_state_is_refused(client, provider, caplog):
    begin(client, provider)
    answer = client.get("/oidc/callback/", {"code": "code-1"})
    assert_refused(answer, client, caplog, says="does not belong to a sign-in started in this browser")


def test_a_replayed_callback_is_refused(client, provider, caplog, django_user_model):
    params = begin(client, provider)
    assert finish(client, params["state"]).status_code == 302
    client.post("/logout/")
    assert not signed_in(client)
    # The same answer again, in the browser that used it and in another: the state was used up.
    assert_refused(finish(client, params["state"]), client, caplog, says="used already")
    other = type(client)()
    assert_refused(finish(other, params["state"]), other, caplog, says="used already")
    assert provider.paths().count("/token") == 1


def test_a_code_the_provider_refuses_is_refused(client, provider, caplog):
    """A code used twice (or expired): the provider answers invalid_grant, as a real one does."""
    params = begin(client, provider)
    provider.token_answer = (400, {"error": "invalid_grant", "error_description": "grant request is invalid"})
    assert_refused(finish(client, params["state"]), client, caplog, says="refused the sign-in (invalid_grant)")


def test_an_error_the_provider_sends_back_is_refused(client, provider, caplog):
    params = begin(client, provider)
    forged = {"error": "access_denied", "error_description": "x\nWARNING forged line", "state": params["state"]}
    answer = client.get("/oidc/callback/", forged)
    assert_refused(answer, client, caplog, says="refused the sign-in (access_denied)")
    assert not any("\n" in record.getMessage() for record in caplog.records)  # the description stays on its line


@pytest.mark.parametrize(
    "forgery",
    [
        pytest.param({"nonce": "another-nonce"}, id="wrong nonce"),
        pytest.param({"nonce": None}, id="no nonce"),
        pytest.param({"aud": "another-client"}, id="another audience"),
        # Authlib checks "azp" against the client id, and "aud" only when told to: the dashboard tells it.
        pytest.param({"aud": "another-client", "azp": CLIENT_ID}, id="another audience, our azp"),
        pytest.param({"aud": ["another-client", "a-third"]}, id="other audiences"),
        pytest.param({"iss": "http://127.0.0.1:9/"}, id="another issuer"),
        pytest.param({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, id="expired"),
    ],
)
def test_a_forged_id_token_is_refused(client, provider, caplog, forgery):
    params = begin(client, provider)
    provider.claims = forgery
    assert_refused(finish(client, params["state"]), client, caplog, says="could not be verified")


def test_an_id_token_signed_by_an_unknown_key_is_refused_after_fetching_the_keys_again(client, provider, caplog):
    params = begin(client, provider)
    provider.signing_key = new_key("key-1")  # the published key's id, another key: a forged signature
    assert_refused(finish(client, params["state"]), client, caplog, says="could not be verified")
    begin(client, provider)
    provider.signing_key = new_key("key-unknown")  # a key id the provider does not publish
    jwks_before = provider.paths().count("/jwks")
    assert_refused(finish(client, client_state(client)), client, caplog, says="could not be verified")
    assert provider.paths().count("/jwks") == jwks_before + 1  # fetched again before refusing


def client_state(client) -> str:
    """The state of the sign-in the client started last (in the sign-in's signed cookie)."""
    return signing.loads(client.cookies[oidc.FLOW_COOKIE].value, salt=oidc.FLOW_SALT)["state"]


def test_an_unsigned_id_token_is_refused_although_the_provider_offers_alg_none(client, provider, caplog):
    params = begin(client, provider)
    provider.token_answer = (
        200,
        {"access_token": "a", "token_type": "Bearer", "id_token": provider.unsigned_id_token()},
    )
    assert_refused(finish(client, params["state"]), client, caplog, says="could not be verified")


def test_a_token_answer_without_id_token_is_refused(client, provider, caplog):
    params = begin(client, provider)
    provider.token_answer = (200, {"access_token": "a", "token_type": "Bearer"})
    assert_refused(finish(client, params["state"]), client, caplog, says="sent no ID token")


def test_a_discovery_document_of_another_issuer_is_refused(client, provider, caplog):
    provider.discovery_overrides = {"issuer": "https://login.example.com"}
    answer = client.get("/oidc/login/")
    assert_refused(answer, client, caplog, says="names another issuer")
    provider.discovery_overrides = {}  # the provider's document put right: read again once the pause is over
    _end_discovery_pause()
    assert client.get("/oidc/login/").status_code == 302


def test_a_rotated_key_is_fetched_and_accepted(client, provider):
    params = begin(client, provider)
    assert finish(client, params["state"]).status_code == 302
    client.post("/logout/")
    provider.signing_key = new_key("key-2")  # the provider rotates: key-2 replaces key-1
    provider.published = [provider.signing_key]
    params = begin(client, provider)
    assert finish(client, params["state"]).status_code == 302
    assert signed_in(client)


def test_a_provider_that_is_down_is_a_page_not_a_500(client, provider, faulty, settings, caplog):
    with TcpProxy(provider.port) as proxy:
        proxy.refuse()
        settings.OIDC_ISSUER = provider.issuer = f"http://127.0.0.1:{proxy.port}"
        assert_refused(client.get("/oidc/login/"), client, caplog, status=503, says="could not be reached")


@pytest.mark.parametrize("fault", ["refuse", "black_hole"])
def test_a_provider_down_or_slow_at_the_token_endpoint_is_a_page(client, provider, faulty, settings, caplog, fault):
    with TcpProxy(provider.port) as proxy:
        settings.OIDC_ISSUER = provider.issuer = f"http://127.0.0.1:{proxy.port}"
        params = begin(client, provider)
        getattr(proxy, fault)()
        started = time.monotonic()
        assert_refused(finish(client, params["state"]), client, caplog, status=503, says="did not answer in time")
        assert time.monotonic() - started < 5  # OIDC_TIMEOUT (1 s) per request, not a hung worker


def test_a_provider_slow_at_discovery_is_a_page(client, provider, faulty, settings, caplog):
    with TcpProxy(provider.port) as proxy:
        proxy.black_hole()
        settings.OIDC_ISSUER = provider.issuer = f"http://127.0.0.1:{proxy.port}"
        started = time.monotonic()
        assert_refused(client.get("/oidc/login/"), client, caplog, status=503, says="did not answer in time")
        assert time.monotonic() - started < 5


def test_the_login_page_offers_the_provider_only_when_configured(client, provider, settings):
    assert "Sign in with Hostile" in client.get("/login/?next=/dags/").content.decode()
    settings.OIDC_ISSUER = ""
    page = client.get("/login/").content.decode()
    assert "Sign in with" not in page
    assert client.get("/oidc/login/").status_code == 404


def test_the_session_records_how_its_owner_signed_in(client, provider):
    params = begin(client, provider)
    finish(client, params["state"])
    assert client.session[sign_in.SESSION_KEY] == "single sign-on (Hostile)"


def test_the_identity_records_the_address_the_sign_in_came_from(client, provider):
    params = begin(client, provider)
    client.defaults["REMOTE_ADDR"] = "192.0.2.44"
    finish(client, params["state"])
    assert ExternalIdentity.objects.get().last_sign_in_from == "192.0.2.44"


def test_renaming_the_provider_keeps_people_linked_to_their_accounts(client, provider, settings):
    params = begin(client, provider)
    finish(client, params["state"])
    client.logout()
    settings.OIDC_PROVIDER_NAME = "Renamed"

    params = begin(client, provider)
    answer = finish(client, params["state"], code="code-2")

    assert answer.status_code == 302 and signed_in(client)
    assert client.session[sign_in.SESSION_KEY] == "single sign-on (Renamed)"
    assert get_user_model().objects.get().username == "alice"  # the same account, not refused as a stranger


def test_a_local_account_of_the_same_name_is_not_taken_over(client, provider, user_factory, caplog):
    user_factory("alice")
    params = begin(client, provider)
    answer = finish(client, params["state"])
    assert_refused(answer, client, caplog, status=403, says="already exists and is not linked")


def test_someone_in_no_mapped_group_gets_the_no_access_page(client, provider):
    provider.claims = {"groups": ["marketing"]}
    params = begin(client, provider)
    answer = finish(client, params["state"])
    assert answer.status_code == 403 and not signed_in(client)
    page = answer.content.decode()
    assert 'data-testid="no-access"' in page and "<code>marketing</code>" in page and "single sign-on (Hostile)" in page


def test_logout_goes_on_to_the_providers_end_session_endpoint(client, provider):
    params = begin(client, provider)
    finish(client, params["state"])
    id_token = client.session["oidc_id_token"]
    answer = client.post("/logout/")
    assert not signed_in(client)
    url = urlsplit(answer["Location"])
    assert f"{url.scheme}://{url.netloc}{url.path}" == f"{provider.issuer}/logout"
    query = parse_qs(url.query)
    assert query["id_token_hint"] == [id_token]
    assert query["post_logout_redirect_uri"] == ["http://testserver/login/"]


def test_logout_stays_here_when_the_end_session_endpoint_is_elsewhere_or_none(client, provider, user_factory):
    params = begin(client, provider)
    finish(client, params["state"])
    provider.discovery_overrides = {"end_session_endpoint": "https://elsewhere.example/logout"}
    _age_cached_discovery()
    answer = client.post("/logout/")
    assert answer.status_code == 302 and answer["Location"] == "/login/" and not signed_in(client)
    # A password sign-in has no ID token: Django's logout, whatever the provider offers.
    client.force_login(user_factory("bob"))
    assert client.post("/logout/")["Location"] == "/login/"


def _end_discovery_pause():
    """The pause after a failed reading of the discovery document (DISCOVERY_RETRY_AFTER), over at once."""
    failed_at, failure = oidc._client().discovery_failed
    oidc._client().discovery_failed = (failed_at - oidc.DISCOVERY_RETRY_AFTER, failure)


def _age_cached_discovery(seconds: float = oidc.DISCOVERY_MAX_AGE + 1):
    """Move the dashboard's reading of the provider's discovery document ``seconds`` into the past: an hour
    passing, without waiting an hour."""
    oidc._client().server_metadata["_loaded_at"] -= seconds  # the client of this test's provider


def test_the_discovery_document_is_kept_an_hour_then_read_again(client, provider):
    discovery = "/.well-known/openid-configuration"
    params = begin(client, provider)
    finish(client, params["state"])
    assert provider.paths().count(discovery) == 1
    provider.discovery_overrides = {"end_session_endpoint": f"{provider.issuer}/moved/logout"}
    _age_cached_discovery(oidc.DISCOVERY_MAX_AGE - 60)  # 59 minutes on: the document read at sign-in is kept
    assert urlsplit(client.post("/logout/")["Location"]).path == "/logout"
    assert provider.paths().count(discovery) == 1

    params = begin(client, provider)
    finish(client, params["state"])
    _age_cached_discovery()  # over an hour on: the next logout reads the provider's document again
    assert urlsplit(client.post("/logout/")["Location"]).path == "/moved/logout"
    assert provider.paths().count(discovery) == 2


@pytest.mark.django_db(databases=["default", "airflow"])
def test_the_audit_records_a_change_as_made_after_single_sign_on(
    client, provider, settings, dag_run_factory, task_key_factory
):
    key = task_key_factory(dag_run_factory(), key="cursor", value="1")
    settings.OIDC_GROUP_ROLES = {"ops-viewers": "Operator"}
    settings.DEFAULT_SCOPE = ["*"]  # no scope group mapped: every DAG only by the deployment's choice
    params = begin(client, provider)
    finish(client, params["state"])
    hx = {"HTTP_HX_REQUEST": "true"}
    dialog = client.get("/keys/task/expire/", {"ids": [key.pk]}, **hx)
    listed = dialog.content.decode().split('name="listed" value="')[1].split('"')[0]
    assert client.post("/keys/task/expire/", {"ids": [key.pk], "listed": listed}, **hx).status_code == 204
    assert AuditEvent.objects.get().signed_in == "single sign-on (Hostile)"


@pytest.mark.parametrize("groups", [{"ops-viewers": True}, 7])
def test_a_groups_claim_that_is_no_list_gives_no_access(client, provider, groups):
    provider.claims = {"groups": groups}
    params = begin(client, provider)
    answer = finish(client, params["state"])
    assert answer.status_code == 403 and 'data-testid="no-access"' in answer.content.decode()


def test_one_group_as_a_string_is_a_group(client, provider):
    provider.claims = {"groups": "ops-viewers"}
    params = begin(client, provider)
    assert finish(client, params["state"]).status_code == 302 and signed_in(client)


# Issue 36: a malformed answer from the provider is a refused sign-in, never a 500.
def signed_token_answer(provider) -> tuple[int, dict]:
    return 200, {"access_token": "a", "token_type": "Bearer", "id_token": provider.id_token()}


@pytest.mark.parametrize(
    "claims",
    [
        pytest.param({"preferred_username": "al\ud800ice"}, id="lone surrogate in the name"),
        pytest.param({"email": "alice\udfff@example.com"}, id="lone surrogate in the email"),
        pytest.param({"groups": ["ops-viewers", "\ud83d"]}, id="lone surrogate in a group"),
        pytest.param({"sub": "subject-\udc00"}, id="lone surrogate in sub"),
        pytest.param({"preferred_username": "ad\u202emin"}, id="RTL override in the name"),
        pytest.param({"preferred_username": "al\x85ice"}, id="C1 control in the name"),
        pytest.param({"preferred_username": None}, id="no name"),
        pytest.param({"preferred_username": ["alice"]}, id="a name that is a list"),
        pytest.param({"sub": {"id": 1}}, id="a sub that is no string"),
    ],
)
def test_malformed_claims_are_a_refused_sign_in(client, provider, caplog, claims):
    params = begin(client, provider)
    provider.claims = claims
    answer = finish(client, params["state"])
    assert answer.status_code in (400, 403), answer.content
    assert 'data-testid="oidc-failed"' in answer.content.decode() and not signed_in(client)
    assert any("OIDC sign-in refused" in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert get_user_model().objects.count() == 0


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"access_token": "a", "token_type": "Bearer", "id_token": 12345}, id="id_token a number"),
        pytest.param({"access_token": "a", "token_type": "Bearer", "id_token": {"alg": "none"}}, id="id_token object"),
        pytest.param({"access_token": "a", "token_type": "Bearer", "id_token": "not.a.jwt"}, id="id_token no JWT"),
        pytest.param({"access_token": "a", "token_type": "Bearer", "id_token": "\ud800.x.y"}, id="id_token surrogate"),
        pytest.param(["a", "list"], id="a JSON list"),
        pytest.param(b"<html>Gateway error</html>", id="not JSON"),
        pytest.param(b"\xff\xfe\x00garbage", id="not text"),
    ],
)
def test_a_malformed_token_answer_is_a_refused_sign_in(client, provider, caplog, body):
    params = begin(client, provider)
    provider.token_answer = (200, body)
    assert_refused(finish(client, params["state"]), client, caplog)


def test_a_token_answer_with_claims_of_the_wrong_type_is_refused(client, provider, caplog):
    params = begin(client, provider)
    provider.claims = {"exp": "tomorrow", "iat": "today"}
    assert_refused(finish(client, params["state"]), client, caplog)


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param((200, b"not json"), id="not JSON"),
        pytest.param((200, ["a", "list"]), id="a JSON list"),
        pytest.param((200, {"issuer": None}), id="no issuer"),
        pytest.param((500, {"error": "oops"}), id="a server error"),
    ],
)
def test_a_malformed_discovery_document_is_a_refused_sign_in(client, provider, caplog, answer):
    provider.discovery_answer = answer
    page = client.get("/oidc/login/")
    assert page.status_code in (400, 503) and 'data-testid="oidc-failed"' in page.content.decode()
    assert any("OIDC sign-in refused" in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)


# Issue 36: starting a sign-in writes no session row; a failed discovery is not asked again on every request.
def test_anonymous_starts_write_no_session_row_and_the_sign_in_still_works(client, provider):
    from django.contrib.sessions.models import Session

    before = Session.objects.count()
    for _ in range(20):
        answer = type(client)().get("/oidc/login/", {"next": "/dags/"})
        assert answer.status_code == 302 and "sessionid" not in answer.cookies
    assert Session.objects.count() == before
    cookie = answer.cookies[oidc.FLOW_COOKIE]
    assert cookie["httponly"] and cookie["samesite"] == "Lax" and cookie["path"] == "/oidc/callback/"
    assert int(cookie["max-age"]) == oidc.FLOW_MAX_AGE

    params = begin(client, provider)
    answer = finish(client, params["state"])
    assert answer.status_code == 302 and answer["Location"] == "/dags/" and signed_in(client)
    assert client.cookies[oidc.FLOW_COOKIE].value == ""  # used: the same answer again finds no sign-in


def test_a_flow_cookie_altered_or_too_old_is_refused(client, provider, caplog):
    params = begin(client, provider)
    flow = signing.loads(client.cookies[oidc.FLOW_COOKIE].value, salt=oidc.FLOW_SALT)
    client.cookies[oidc.FLOW_COOKIE] = signing.dumps({**flow, "state": "mine"}, salt="another-salt")
    assert_refused(finish(client, params["state"]), client, caplog, says="does not belong")
    # Signed as the dashboard signs it, but older than FLOW_MAX_AGE.
    old = signing.TimestampSigner(salt=oidc.FLOW_SALT).sign_object(flow, compress=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(time, "time", lambda: real_time() + oidc.FLOW_MAX_AGE + 5)
        client.cookies[oidc.FLOW_COOKIE] = old
        assert_refused(finish(client, params["state"]), client, caplog, says="does not belong")
    assert "/token" not in provider.paths()


real_time = time.time


@pytest.mark.parametrize("answer", [(200, b"<html>maintenance</html>"), (502, {"error": "bad gateway"})])
def test_a_failed_discovery_is_asked_for_once_a_while(client, provider, caplog, answer):
    discovery = "/.well-known/openid-configuration"
    provider.discovery_answer = answer
    for _ in range(8):
        page = client.get("/oidc/login/")
        assert page.status_code in (400, 503) and 'data-testid="oidc-failed"' in page.content.decode()
    assert provider.paths().count(discovery) == 1

    provider.discovery_answer = None  # the provider is back: asked again once the pause is over
    assert client.get("/oidc/login/").status_code in (400, 503)
    _end_discovery_pause()
    assert client.get("/oidc/login/").status_code == 302
    assert provider.paths().count(discovery) == 2


def test_sign_ins_do_not_each_wait_on_a_provider_that_does_not_answer(client, provider, faulty, settings, caplog):
    with TcpProxy(provider.port) as proxy:
        proxy.black_hole()
        settings.OIDC_ISSUER = provider.issuer = f"http://127.0.0.1:{proxy.port}"
        for _ in range(8):
            assert_refused(client.get("/oidc/login/"), client, caplog, status=503, says="did not answer in time")
        # One OIDC_TIMEOUT (1 s) for the first; the others are refused without asking the provider (each waited a
        # timeout of its own before: 8 s and more). Counted, not timed: a busy machine made 8 refusals take 6.8 s.
        deadline = time.monotonic() + 10
        while proxy.accepted < 1 and time.monotonic() < deadline:  # the proxy accepts in a thread of its own
            time.sleep(0.05)
        assert proxy.accepted == 1
