"""Login and token throttling (README, "Login and token throttling").

Sign-in is throttled by django-axes (settings: ``AXES_*``, from ``LOGIN_FAILURE_LIMIT`` and
``LOGIN_LOCKOUT_MINUTES``); ``LoginThrottleBackend`` is its authentication backend. Bearer tokens are
throttled here: every failed token authentication from an address is recorded in Django's cache (the one
every worker and server shares), and once ``TOKEN_FAILURE_LIMIT`` failures fall within
``TOKEN_LOCKOUT_MINUTES``, further wrong tokens from that address answer 429 with ``Retry-After`` (DRF's
``Throttled``) until the oldest of them leaves the window.

A valid token is never refused nor counted: the throttle is asked only once a token was not found. Unlike a
password, a token (``ApiToken.issue``: 256 random bits) cannot be guessed within any lockout, so refusing a
valid one would protect nothing, and would let whoever shares a client's address (a NAT, a proxy's egress)
lock its scripts out with wrong tokens. It also keeps the shared cache off the path of every valid API call.
"""

import math
import time

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.core.cache import cache
from rest_framework.exceptions import ErrorDetail, Throttled


def client_address(request) -> str:
    """The client's address: ``REMOTE_ADDR``, or, behind ``TRUSTED_PROXY_COUNT`` proxies, the address the
    outermost of them saw (counted from the right of ``X-Forwarded-For``, which a client cannot forge)."""
    meta = request.META
    remote = meta.get("REMOTE_ADDR") or ""
    proxies = settings.TRUSTED_PROXY_COUNT
    if proxies > 0:
        forwarded = [part.strip() for part in meta.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= proxies:
            return forwarded[-proxies]
    return remote


class LoginThrottleBackend(AxesStandaloneBackend):
    """django-axes' check, except for ``authenticate()`` calls without a request (a management command,
    the test client's ``login()``): no address to count, so nothing to throttle."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


class TokenFailureThrottle:
    """Failed bearer tokens per client address, counted in the cache that every worker and server shares.

    An address has ``TOKEN_FAILURE_LIMIT`` tickets, one cache key each, kept ``TOKEN_LOCKOUT_MINUTES``. A
    failure takes the first free ticket with ``cache.add``, which succeeds in one process only (Redis:
    ``SET NX``; the database cache: the primary key, statestore_admin/cache.py), so two failures that arrive
    at once on two workers or two servers take two tickets: every attempt counts once, wherever it lands.
    The address is over the limit while all its tickets are held, until the oldest of them expires.

    When the cache fails, the throttle fails **open**: the failures are not counted and nothing is refused.
    A wrong token is still a 401, and tokens are random (``ApiToken.issue``), far beyond guessing in the
    seconds a cache outage lasts; failing closed would refuse every script's valid token for as long as the
    cache is down, turning a cache outage into an API outage. Sign-in throttling (django-axes) keeps its
    counts in the dashboard's database and is unaffected.
    """

    key_format = "statestore:token-failure:{address}:{ticket}"
    timer = time.time

    def __init__(self):
        self.limit = settings.TOKEN_FAILURE_LIMIT
        self.duration = max(1, round(settings.TOKEN_LOCKOUT_MINUTES * 60))

    def _keys(self, request) -> list[str]:
        address = client_address(request)
        return [self.key_format.format(address=address, ticket=n) for n in range(self.limit)]

    def over_limit(self, request) -> float | None:
        """Seconds to wait, or None while the address is under the limit."""
        if self.limit <= 0:  # TOKEN_FAILURE_LIMIT=0: no throttling
            return None
        now = self.timer()
        # A ticket is the time of its failure: anything else there (another release's value) holds no ticket.
        tickets = [t for t in cache.get_many(self._keys(request)).values() if _is_time(t)]
        held = [t for t in tickets if t > now - self.duration]
        if len(held) < self.limit:
            return None
        return max(1.0, min(held) + self.duration - now)

    def record(self, request) -> bool:
        """Count one failure; False when no ticket was free (another process took the last one meanwhile)."""
        if self.limit <= 0:
            return True
        now = self.timer()
        return any(cache.add(key, now, self.duration) for key in self._keys(request))


def _is_time(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _throttled(wait: float) -> Throttled:
    exc = Throttled(wait=wait)
    exc.detail = ErrorDetail(
        f"Too many failed authentication attempts; try again in {exc.wait} seconds", code="throttled"
    )
    return exc


def check_token_failures(request) -> None:
    """Raise DRF's ``Throttled`` (429, Retry-After) while too many tokens from this address failed."""
    wait = TokenFailureThrottle().over_limit(request)
    if wait is not None:
        raise _throttled(wait)


def record_token_failure(request) -> None:
    """Count a wrong token; raise ``Throttled`` when the limit was reached by failures that arrived at the
    same time elsewhere (this one found no ticket left)."""
    throttle = TokenFailureThrottle()
    if not throttle.record(request):
        wait = throttle.over_limit(request)  # None when the cache failed: open, as above
        if wait is not None:
            raise _throttled(wait)
