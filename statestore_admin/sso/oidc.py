"""OpenID Connect sign-in (docs/sign-in.md, "OpenID Connect"), through Authlib's Django client.

``OIDC_ISSUER`` turns it on. The login page links to ``start`` ("Sign in with <provider>"), which sends the
browser to the provider's authorization endpoint (found in its ``/.well-known/openid-configuration``) with a
state, a nonce and a PKCE S256 challenge, all three kept, with the page to go on to, in a signed cookie that
lives ``FLOW_MAX_AGE`` and is sent to the callback only: starting a sign-in writes no session row, so anonymous
requests cannot fill the session table. The provider sends the browser back
to ``callback``, which exchanges the code (with the PKCE verifier) at the token endpoint and verifies the ID
token: its signature against the provider's published keys (fetched again once when a token names a key they
do not hold: a rotation), its issuer, audience, expiry and nonce. Only then is anyone signed in:
``sign_in.sign_in_identity`` makes or finds the user and applies the group mapping.

Everything that can go wrong on the way answers a page that says what happened, with a log line, and
signs nobody in: a state that is missing, wrong or used already (a replayed callback), a refusal by the
provider (a code used twice), a token that fails verification, an answer that is not what the protocol says (not
JSON, an ID token that is no string, claims of the wrong type or with characters no name may hold), a provider
that is down or slow. A discovery document that could not be read is not asked for again for
``DISCOVERY_RETRY_AFTER`` seconds: sign-ins meanwhile are refused at once rather than each waiting on the provider.
"""

from __future__ import annotations

import logging
import threading
import time
from urllib.parse import urlsplit

import requests
from authlib.integrations.django_client import DjangoOAuth2App, OAuth, OAuthError
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import LogoutView
from django.core import signing
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.urls import reverse
from django.utils.crypto import constant_time_compare
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from joserfc.errors import JoseError

from statestore_admin.access.actors import Actor
from statestore_admin.identity import sign_in, usernames

log = logging.getLogger(__name__)

# The ID token signatures accepted, whatever the provider's metadata lists: asymmetric ones only, so never
# "none" and never an HMAC keyed with something the provider published.
SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
FLOW_COOKIE = "statestore_oidc"  # the sign-in under way: state, nonce, PKCE verifier, redirect URI, next page
FLOW_SALT = "statestore_admin.sso.oidc.flow"
FLOW_MAX_AGE = 600  # seconds a person may spend at the provider before coming back
ID_TOKEN_KEY = "oidc_id_token"  # the ID token, sent back to the provider as id_token_hint at logout


def enabled() -> bool:
    return bool(settings.OIDC_ISSUER)


def provider_name() -> str:
    return settings.OIDC_PROVIDER_NAME or urlsplit(settings.OIDC_ISSUER).hostname or settings.OIDC_ISSUER


def context(request) -> dict:
    """A context processor: the provider's name for the login page's "Sign in with …" (empty: no button)."""
    return {"oidc_provider": provider_name() if enabled() else ""}


# Authlib would keep the discovery document (and the keys read from it) for the life of the process. It is read
# again at the first sign-in or logout after this long, so a provider that moves an endpoint is followed without a
# restart; a provider down then fails that one sign-in, as it would at its token endpoint.
DISCOVERY_MAX_AGE = 3600.0
# A document that could not be read is not asked for again for this long: each sign-in meanwhile is refused at once
# instead of waiting OIDC_TIMEOUT on a provider that is down (which held a worker thread per sign-in).
DISCOVERY_RETRY_AFTER = 30.0


class _ProviderApp(DjangoOAuth2App):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._discovery_lock = threading.Lock()  # one reading of the document at a time in a process
        self.discovery_failed: tuple[float, _Failure] | None = None  # when (time.monotonic()) and why

    def load_server_metadata(self):
        with self._discovery_lock:
            if self.discovery_failed is not None:
                failed_at, failure = self.discovery_failed
                if time.monotonic() - failed_at < DISCOVERY_RETRY_AFTER:
                    raise failure
                self.discovery_failed = None
            try:
                return self._load_server_metadata()
            except _Failure as failure:
                self.server_metadata.clear()  # not kept: read again once the pause is over
                self.discovery_failed = (time.monotonic(), failure)
                raise

    def _load_server_metadata(self):
        loaded_at = self.server_metadata.get("_loaded_at")  # Authlib's mark of a document read
        if loaded_at is not None and time.time() - loaded_at > DISCOVERY_MAX_AGE:
            self.server_metadata.clear()  # read again below, the keys with it
        try:
            metadata = super().load_server_metadata()
        except requests.RequestException as exc:  # down, slow, or an HTTP error status
            raise _unreachable(exc) from exc
        except (ValueError, TypeError) as exc:  # not JSON, or JSON that is no object
            raise _malformed(f"discovery document unreadable: {type(exc).__name__}: {str(exc)!r}") from exc
        # OpenID Connect Discovery 1.0, 4.3: the document must name the issuer it was fetched for; the ID token's
        # "iss" is then checked against the configured issuer, not against what the document says.
        if str(metadata.get("issuer", "")).rstrip("/") != settings.OIDC_ISSUER.rstrip("/"):
            raise _Failure(
                400,
                _("The provider's discovery document names another issuer."),
                f"discovery document issuer {metadata.get('issuer')!r} is not OIDC_ISSUER {settings.OIDC_ISSUER!r}",
            )
        offered = metadata.get("id_token_signing_alg_values_supported") or ["RS256"]
        if not isinstance(offered, list):
            offered = ["RS256"]
        metadata["id_token_signing_alg_values_supported"] = [alg for alg in offered if alg in SIGNING_ALGORITHMS]
        return metadata

    def begin(self, redirect_uri: str) -> tuple[str, dict]:
        """The provider's authorization URL, and what the callback needs to finish (``flow``): Authlib's
        ``authorize_redirect`` without its keeping them in the session."""
        made = self.create_authorization_url(redirect_uri)
        flow = {"state": made["state"], "nonce": made["nonce"], "verifier": made["code_verifier"]}
        return made["url"], {**flow, "redirect_uri": redirect_uri}

    def finish(self, request, flow: dict | None, **kwargs) -> dict:
        """Authlib's ``authorize_access_token``, with ``flow`` (from ``begin``) instead of the session."""
        if request.GET.get("error"):
            raise OAuthError(error=request.GET["error"], description=request.GET.get("error_description"))
        state = request.GET.get("state") or ""
        if not flow or not state or not constant_time_compare(state, str(flow.get("state", ""))):
            raise OAuthError(error="mismatching_state")
        token = self.fetch_access_token(
            code=request.GET.get("code") or "",
            state=state,
            code_verifier=flow["verifier"],
            redirect_uri=flow["redirect_uri"],
        )
        if not isinstance(token, dict) or "id_token" not in token:
            return {}
        if not isinstance(token["id_token"], str):
            raise _malformed(f"id_token is a {type(token['id_token']).__name__}, not a string")
        token["userinfo"] = self.parse_id_token(token, nonce=flow["nonce"], **kwargs)
        return token


class _OAuth(OAuth):
    oauth2_client_cls = _ProviderApp


# One client per configuration: it keeps the discovery document (``DISCOVERY_MAX_AGE``) and the keys on it (fetched
# again when a token names one they do not hold).
_clients: dict[tuple, _ProviderApp] = {}


def _client() -> _ProviderApp:
    config = (
        settings.OIDC_ISSUER,
        settings.OIDC_CLIENT_ID,
        settings.OIDC_CLIENT_SECRET,
        tuple(settings.OIDC_SCOPES),
        settings.OIDC_TIMEOUT,
    )
    if config not in _clients:
        _clients[config] = _OAuth().register(
            "oidc",
            client_id=settings.OIDC_CLIENT_ID,
            client_secret=settings.OIDC_CLIENT_SECRET,
            server_metadata_url=settings.OIDC_ISSUER.rstrip("/") + "/.well-known/openid-configuration",
            client_kwargs={
                "scope": " ".join(settings.OIDC_SCOPES),
                "code_challenge_method": "S256",
                "default_timeout": settings.OIDC_TIMEOUT,
            },
        )
    return _clients[config]


class _Failure(Exception):
    """A sign-in that cannot go on: the page's status and message, and what the log says."""

    def __init__(self, status: int, message: str, detail: str):
        super().__init__(detail)
        self.status, self.message, self.detail = status, message, detail


def _failed(request, failure: _Failure):
    log.warning("OIDC sign-in refused (%s): %s", provider_name(), failure.detail)
    context = {"provider": provider_name(), "message": failure.message}
    return render(request, "registration/oidc_failed.html", context, status=failure.status)


def _safe_next(request) -> str:
    target = request.GET.get("next", "")
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return target
    return resolve_url(settings.LOGIN_REDIRECT_URL)


@login_not_required
def start(request):
    """Send the browser to the provider; the sign-in under way (with the safe ``next``) goes in a signed cookie
    that only the callback receives, not in a session."""
    if not enabled():
        raise Http404(_("OpenID Connect sign-in is not configured."))
    try:
        url, flow = _client().begin(request.build_absolute_uri(reverse("oidc_callback")))
    except _Failure as failure:
        return _failed(request, failure)
    except requests.RequestException as exc:
        return _failed(request, _unreachable(exc))
    response = HttpResponseRedirect(url)
    response.set_cookie(
        FLOW_COOKIE,
        signing.dumps({**flow, "next": _safe_next(request)}, salt=FLOW_SALT, compress=True),
        max_age=FLOW_MAX_AGE,
        path=reverse("oidc_callback"),
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",  # sent on the provider's redirect back (a top-level GET), not on a cross-site POST
    )
    return response


def _flow(request) -> dict | None:
    """The sign-in this browser started (``start``'s cookie), if it is ours, intact and recent."""
    try:
        flow = signing.loads(request.COOKIES.get(FLOW_COOKIE, ""), salt=FLOW_SALT, max_age=FLOW_MAX_AGE)
    except signing.BadSignature:  # missing, altered, or older than FLOW_MAX_AGE
        return None
    return flow if isinstance(flow, dict) else None


def _unreachable(exc: Exception) -> _Failure:
    return _Failure(
        503,
        _(
            "%(provider)s did not answer in time, or could not be reached. Try again in a moment; if it persists, "
            "tell whoever runs the dashboard."
        )
        % {"provider": provider_name()},
        f"provider unreachable: {type(exc).__name__}: {exc}",
    )


def _malformed(detail: str) -> _Failure:
    """An answer from the provider that is not what the protocol says: refused as one that fails verification."""
    return _Failure(
        400,
        _(
            "The answer from %(provider)s could not be verified, so nobody was signed in. Start again from the "
            "sign-in page; if it persists, tell whoever runs the dashboard."
        )
        % {"provider": provider_name()},
        f"malformed answer: {detail}",
    )


def _verified_claims(request, flow: dict | None) -> tuple[dict, str]:
    """The ID token's verified claims and the token itself, or ``_Failure``."""
    try:
        client = _client()
        issuer = client.load_server_metadata()["issuer"]  # the configured one (checked as the document is read)
        # Both named: Authlib checks "aud" only when told to (it checks "azp" against the client id, which a token
        # for another client may well carry too).
        claims_options = {
            "iss": {"essential": True, "values": [issuer]},
            "aud": {"essential": True, "values": [settings.OIDC_CLIENT_ID]},
        }
        token = client.finish(request, flow, claims_options=claims_options, leeway=60)
    except OAuthError as exc:
        if exc.error == "mismatching_state":
            raise _Failure(
                400,
                _(
                    "This sign-in answer does not belong to a sign-in started in this browser, or it was used "
                    "already. Start again from the sign-in page."
                ),
                "state missing, unknown or used already (a forged or replayed callback)",
            ) from exc
        raise _Failure(
            400,
            # The error comes from the callback's query string, which anyone can write: cut short on the page,
            # quoted in the log (no line of its own there).
            _("%(provider)s refused the sign-in (%(error)s). Start again from the sign-in page.")
            % {"provider": provider_name(), "error": str(exc.error)[:80]},
            f"provider error {exc.error!r}: {exc.description!r}",
        ) from exc
    except requests.JSONDecodeError as exc:  # a token endpoint that answered a page, not JSON
        raise _malformed(f"token response is not JSON: {str(exc)!r}") from exc
    except requests.RequestException as exc:
        raise _unreachable(exc) from exc
    except (JoseError, ValueError, TypeError, KeyError, AttributeError, UnicodeError) as exc:
        # A signature, claim or shape that fails verification; a token endpoint answering JSON of another shape.
        raise _malformed(f"ID token refused: {type(exc).__name__}: {str(exc)!r}") from exc
    if "userinfo" not in token:
        raise _Failure(
            400,
            _("%(provider)s sent no ID token, so nobody was signed in.") % {"provider": provider_name()},
            "token response without an ID token (is 'openid' in OIDC_SCOPES?)",
        )
    return dict(token["userinfo"]), token["id_token"]


def _identity(claims: dict) -> sign_in.Identity:
    username = claims.get(settings.OIDC_USERNAME_CLAIM)
    if not isinstance(username, str) or not username.strip():
        raise _Failure(
            400,
            _("%(provider)s sent no %(claim)r claim to use as your username.")
            % {"provider": provider_name(), "claim": settings.OIDC_USERNAME_CLAIM},
            f"ID token of sub {claims.get('sub')!r} without a string {settings.OIDC_USERNAME_CLAIM!r} claim",
        )
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject or usernames.unsafe_characters(subject):
        raise _malformed(f"ID token's sub {subject!r} is no string a person can be known by")
    groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
    if isinstance(groups, str):  # a provider that sends one group as a string (Google's "hd")
        groups = [groups]
    if not isinstance(groups, list):  # not a list of names: no group, so the no-access page rather than a 500
        groups = []
    email = claims.get("email")
    return sign_in.Identity(
        method=sign_in.OIDC,
        username=username.strip(),
        email=email if isinstance(email, str) else "",
        groups=tuple(str(group) for group in groups),
        provider=settings.OIDC_ISSUER,  # with sub, the person's link: the name on the button may change
        subject=subject,
        label=provider_name(),
    )


@login_not_required
def callback(request):
    """The provider's answer: verified, then the person signed in and sent on, or a page saying why not. The
    sign-in's cookie goes with either answer: each one is used once."""
    if not enabled():
        raise Http404(_("OpenID Connect sign-in is not configured."))
    flow = _flow(request)
    response = _callback(request, flow)
    response.delete_cookie(FLOW_COOKIE, path=reverse("oidc_callback"), samesite="Lax")
    return response


def _callback(request, flow: dict | None):
    try:
        claims, id_token = _verified_claims(request, flow)
        identity = _identity(claims)
    except _Failure as failure:
        return _failed(request, failure)
    try:
        user = sign_in.sign_in_identity(identity, actor=Actor.from_request(request))
    except sign_in.NoAccess as exc:  # sign_in logs it
        context = {"identity": identity, "message": str(exc)}
        return render(request, "registration/no_access.html", context, status=403)
    except sign_in.Refused as exc:
        return _failed(request, _Failure(403, str(exc), f"identity of {identity.username!r} refused: {exc}"))
    sign_in.start_session(request, user, identity)
    request.session[ID_TOKEN_KEY] = id_token
    target = (flow or {}).get("next")
    target = target if isinstance(target, str) else ""
    return HttpResponseRedirect(target or resolve_url(settings.LOGIN_REDIRECT_URL))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class OidcLogoutView(LogoutView):
    """Django's logout (POST, CSRF); after an OIDC sign-in, on to the provider's end-session endpoint when it
    publishes one, so that the provider's session ends too and the browser comes back to the login page."""

    def post(self, request, *args, **kwargs):
        id_token = request.session.get(ID_TOKEN_KEY)
        response = super().post(request, *args, **kwargs)
        if not (id_token and enabled()):
            return response
        try:
            end_session = _client().load_server_metadata().get("end_session_endpoint")
            if not end_session:
                return response
            if _origin(end_session) != _origin(settings.OIDC_ISSUER):
                # CSP's form-action allows the issuer's origin only (settings.allow_form_action): elsewhere the
                # browser would stop the redirect on a blank page.
                log.warning("OIDC logout: end_session_endpoint %s is not on the issuer's origin", end_session)
                return response
            return HttpResponseRedirect(
                _client().create_logout_url(
                    post_logout_redirect_uri=request.build_absolute_uri(resolve_url(settings.LOGOUT_REDIRECT_URL)),
                    id_token_hint=id_token,
                )["url"]
            )
        except (_Failure, requests.RequestException) as exc:
            # Signed out of the dashboard already; the provider's session stays, which the log says.
            log.warning("OIDC logout: the provider's end-session endpoint is unknown: %s", exc)
            return response
