"""Login and token throttling (README, "Login and token throttling").

Sign-in is throttled by django-axes (settings: ``AXES_*``, from ``LOGIN_FAILURE_LIMIT`` and
``LOGIN_LOCKOUT_MINUTES``); ``LoginThrottleBackend`` is its authentication backend. Bearer tokens are
throttled here: every failed token authentication from an address is recorded in Django's cache, and once
``TOKEN_FAILURE_LIMIT`` failures fall within ``TOKEN_LOCKOUT_MINUTES``, further bearer requests from that
address answer 429 with ``Retry-After`` (DRF's ``Throttled``) until the oldest of them leaves the window.
A successful token use neither counts nor is refused while the address is not over the limit.
"""

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from rest_framework.exceptions import ErrorDetail, Throttled
from rest_framework.throttling import SimpleRateThrottle


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


class TokenFailureThrottle(SimpleRateThrottle):
    """DRF's cache-backed sliding window, counting failed bearer tokens per client address."""

    scope = "token_failure"
    cache_format = "throttle_%(scope)s_%(ident)s"

    def get_rate(self):
        return "unused"  # the limit and window come from settings, see parse_rate

    def parse_rate(self, rate):
        return settings.TOKEN_FAILURE_LIMIT, max(1, round(settings.TOKEN_LOCKOUT_MINUTES * 60))

    def get_cache_key(self, request, view=None):
        return self.cache_format % {"scope": self.scope, "ident": client_address(request)}

    def _recent(self, request) -> tuple[str, list[float]]:
        self.now = self.timer()
        key = self.get_cache_key(request)
        history = [t for t in self.cache.get(key, []) if t > self.now - self.duration]
        return key, history

    def over_limit(self, request) -> float | None:
        """Seconds to wait, or None while the address is under the limit."""
        if self.num_requests <= 0:  # TOKEN_FAILURE_LIMIT=0: no throttling
            return None
        _, self.history = self._recent(request)
        if len(self.history) >= self.num_requests:
            self.history = self.history[: self.num_requests]
            return self.wait() or self.duration
        return None

    def record(self, request) -> None:
        if self.num_requests <= 0:
            return
        key, history = self._recent(request)
        history.insert(0, self.now)
        self.cache.set(key, history[: self.num_requests], self.duration)


def check_token_failures(request) -> None:
    """Raise DRF's ``Throttled`` (429, Retry-After) while too many tokens from this address failed."""
    wait = TokenFailureThrottle().over_limit(request)
    if wait is not None:
        exc = Throttled(wait=wait)
        exc.detail = ErrorDetail(
            f"Too many failed authentication attempts; try again in {exc.wait} seconds", code="throttled"
        )
        raise exc


def record_token_failure(request) -> None:
    TokenFailureThrottle().record(request)
