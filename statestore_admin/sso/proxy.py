"""Behind an authenticating proxy (oauth2-proxy and the like): the proxy signs the person in and forwards who
they are in headers; the dashboard believes those headers only from ``TRUSTED_PROXY_ADDRESSES``.

Modelled on Django's ``RemoteUserMiddleware`` (the header names a user; a session made from the header ends
when the header changes or disappears), with three differences: the headers count only when the request's
peer (``REMOTE_ADDR``: the proxy's own connection, not ``X-Forwarded-For``, which a client writes) is a trusted
proxy; the person goes through ``identity.sign_in`` (created at first sign-in, roles and scope groups from their
groups); and the mapping runs again only when what the headers say changes (a hash kept in the session) or every
few minutes (which keeps the account's last sign-in recent: ``TOKEN_IDP_MAX_AGE``), not at every request. A
bearer token under ``/api/`` is the token's business: such requests are left alone.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import threading
import time
from collections import Counter

from django.conf import settings
from django.contrib.auth import logout
from django.core import checks
from django.http import HttpResponseBadRequest, HttpResponseForbidden
from django.shortcuts import render
from django.utils.translation import gettext

from statestore_admin.access.actors import Actor
from statestore_admin.identity import sign_in

log = logging.getLogger(__name__)

SESSION_KEY = "statestore_proxy"  # {"user": the header's user name, "hash": of every header it used, "at": when}
RECHECK_SECONDS = 300  # the mapping runs again this often while the headers stay the same
WARN_EVERY_SECONDS = 300  # one log line per untrusted address and headers in that time
WARNED_MAX = 1024
_warned: dict[tuple[str, tuple[str, ...]], float] = {}
_warned_lock = threading.Lock()


def meta_key(header: str) -> str:
    """``X-Forwarded-User`` → ``HTTP_X_FORWARDED_USER``, as WSGI names request headers."""
    return "HTTP_" + header.strip().upper().replace("-", "_")


def parse_addresses(entries) -> tuple[list, list[str]]:
    """``TRUSTED_PROXY_ADDRESSES`` as networks (an address is a /32 or /128), and the entries that are neither
    (left out, never widened: the system check refuses to start with them)."""
    networks, invalid = [], []
    for entry in (str(e).strip() for e in entries):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            invalid.append(entry)
    return networks, invalid


def trusted(request, networks) -> bool:
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


def repeated_headers(request, headers: dict[str, str]) -> list[str]:
    """The settings (``PROXY_USER_HEADER``...) of ``headers`` whose header the request carries more than once.

    A WSGI server joins a header sent twice into one value, with a comma: a second groups header would add groups.
    Under ``make serve`` (gunicorn's ASGI worker, a2wsgi) the request's header lines are in ``asgi.scope`` and are
    counted, by the name WSGI gives them (``X_Forwarded_User`` is ``X-Forwarded-User`` there). Under another WSGI
    server only the joined value is left: a comma in the user or email header (which no user name or address
    holds) is taken for a repeat; a repeated groups header cannot be told from a list there."""
    scope = request.META.get("asgi.scope")
    if isinstance(scope, dict):
        sent = Counter(meta_key(name.decode("latin-1")) for name, _ in scope.get("headers", ()))
        return [name for name, key in headers.items() if sent[key] > 1]
    single = ("PROXY_USER_HEADER", "PROXY_EMAIL_HEADER")
    return [name for name in single if "," in request.META.get(headers[name], "")]


def _peer(request) -> str:
    return request.META.get("REMOTE_ADDR", "")


def split_groups(value: str) -> tuple[str, ...]:
    """oauth2-proxy sends the groups comma-separated (several header lines arrive joined by commas too)."""
    seen = dict.fromkeys(part.strip() for part in value.split(","))
    return tuple(group for group in seen if group)


class ProxySignInMiddleware:
    """After ``AuthenticationMiddleware``: the trusted proxy's headers sign the request's session in."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.networks, _ = parse_addresses(settings.TRUSTED_PROXY_ADDRESSES)
        self.headers = {
            name: meta_key(getattr(settings, name))
            for name in ("PROXY_USER_HEADER", "PROXY_EMAIL_HEADER", "PROXY_GROUPS_HEADER")
        }

    def __call__(self, request):
        if self.networks:
            repeated = repeated_headers(request, self.headers)
            if repeated:
                names = ", ".join(getattr(settings, name) for name in repeated)
                log.warning("proxy headers sent more than once from %s: %s (refused)", _peer(request), names)
                return HttpResponseBadRequest(
                    gettext("The request carries %(headers)s more than once.") % {"headers": names},
                    content_type="text/plain; charset=utf-8",
                )
        if self.networks and not bearer_api_request(request):
            refusal = self.sign_in(request)
            if refusal is not None:
                return refusal
        return self.get_response(request)

    def sign_in(self, request):
        meta = request.META
        if not trusted(request, self.networks):
            sent = [name for name, key in self.headers.items() if key in meta]
            if sent:
                _warn_untrusted(meta.get("REMOTE_ADDR", ""), [getattr(settings, name) for name in sent])
            return None
        username = _header(meta, self.headers["PROXY_USER_HEADER"])
        kept = request.session.get(SESSION_KEY)
        if username is None:
            if kept is not None:  # signed in by the proxy, which no longer vouches for anyone: signed out
                log.info("proxy sign-in: the user header is gone; session of %s ended", kept.get("user"))
                logout(request)
            return None
        identity = sign_in.Identity(
            method=sign_in.PROXY,
            label=settings.PROXY_PROVIDER_NAME,
            username=username.strip(),
            email=(_header(meta, self.headers["PROXY_EMAIL_HEADER"]) or "").strip(),
            groups=split_groups(_header(meta, self.headers["PROXY_GROUPS_HEADER"]) or ""),
        )
        fingerprint = _fingerprint(identity)
        if (
            request.user.is_authenticated
            and kept is not None
            and kept.get("hash") == fingerprint
            and not _recheck_due(kept.get("at"))
        ):
            return None  # nothing changed since the mapping last ran for this session
        if request.user.is_authenticated and (kept is None or kept.get("user") != identity.username):
            # Another person at this browser, as far as the proxy knows: the old session ends entirely.
            log.info("proxy sign-in: user changed to %s; session of %s ended", identity.username, request.user)
            logout(request)
        try:
            user = sign_in.sign_in_identity(identity, actor=Actor.from_request(request))
        except sign_in.NoAccess as exc:  # sign_in logs it
            logout(request)
            return _refusal(request, "registration/no_access.html", identity, exc)
        except sign_in.Refused as exc:
            log.warning("proxy sign-in refused for %r: %s", identity.username, exc)
            logout(request)
            return _refusal(request, "registration/sign_in_refused.html", identity, exc)
        if request.user.is_authenticated:
            request.user = user  # this request already sees the new roles, not the user loaded before them
        else:
            sign_in.start_session(request, user, identity)
        request.session[SESSION_KEY] = {"user": identity.username, "hash": fingerprint, "at": time.time()}
        return None


def _refusal(request, template: str, identity: sign_in.Identity, exc: Exception):
    """The page (403); for htmx, which shows a 4xx answer's text as a toast, its one sentence."""
    if request.headers.get("HX-Request"):
        return HttpResponseForbidden(str(exc), content_type="text/plain; charset=utf-8")
    return render(request, template, {"identity": identity, "message": str(exc)}, status=403)


def _header(meta, key: str) -> str | None:
    """A header as the proxy wrote it: WSGI hands header bytes over decoded as Latin-1, oauth2-proxy sends UTF-8."""
    value = meta.get(key)
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def bearer_api_request(request) -> bool:
    """Whether ``request`` calls the API with a bearer token: it authenticates with the token alone, never with a
    session or the proxy's headers."""
    scheme = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")[0]
    return request.path.startswith("/api/") and scheme.lower() == "bearer"


def _recheck_due(at) -> bool:
    """Whether the proxy's word, taken at ``at`` (seconds since the epoch), is due again: every ``RECHECK_SECONDS``,
    and well within ``TOKEN_IDP_MAX_AGE``, so that the account's last sign-in (which keeps its tokens and
    sessions) follows a person who goes on using the dashboard through the proxy."""
    every = min(RECHECK_SECONDS, settings.TOKEN_IDP_MAX_AGE / 2)
    return not isinstance(at, int | float) or time.time() - at > every


def _fingerprint(identity: sign_in.Identity) -> str:
    parts = [identity.username, identity.email, *sorted(identity.groups)]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def _warn_untrusted(address: str, headers: list[str]) -> None:
    """Logged once per address and headers every few minutes in each process: a client probing, or a proxy
    missing from TRUSTED_PROXY_ADDRESSES, would otherwise write a line per request. Kept in the process, not the
    shared cache, so that a cache outage cannot silence it."""
    key, now = (address, tuple(headers)), time.monotonic()
    with _warned_lock:
        if now - _warned.get(key, -WARN_EVERY_SECONDS) < WARN_EVERY_SECONDS:
            return
        if len(_warned) >= WARNED_MAX:  # many addresses: forget them all rather than grow without bound
            _warned.clear()
        _warned[key] = now
    log.warning("proxy headers %s from %s ignored: not one of TRUSTED_PROXY_ADDRESSES", ", ".join(headers), address)


@checks.register("statestore")
def check_proxy_settings(app_configs=None, **kwargs):
    errors = []
    _, invalid = parse_addresses(settings.TRUSTED_PROXY_ADDRESSES)
    if invalid:
        errors.append(
            checks.Error(
                f"TRUSTED_PROXY_ADDRESSES holds {', '.join(map(repr, invalid))}: not an address or a CIDR network.",
                hint="List the authenticating proxy's addresses or networks, comma-separated: 10.0.0.5,10.1.0.0/24.",
                id="statestore.E045",
            )
        )
    empty = [
        name
        for name in ("PROXY_USER_HEADER", "PROXY_EMAIL_HEADER", "PROXY_GROUPS_HEADER")
        if not getattr(settings, name).strip()
    ]
    if settings.TRUSTED_PROXY_ADDRESSES and empty:
        errors.append(
            checks.Error(
                f"{', '.join(empty)} is empty: the proxy's headers need names.",
                hint="Leave them unset for oauth2-proxy's X-Forwarded-User, X-Forwarded-Email and X-Forwarded-Groups.",
                id="statestore.E046",
            )
        )
    return errors
