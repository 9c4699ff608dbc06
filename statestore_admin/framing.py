"""Framing by Airflow's UI (issue 25, docs/airflow-plugin.md): ``STATESTORE_FRAME_ANCESTORS``, off by default.

Airflow shows a plugin's per-object pages in an iframe, so the dashboard may be framed by the origins listed
there and by no other. CSP ``frame-ancestors`` names them; ``X-Frame-Options`` cannot name an origin (its
``ALLOW-FROM`` is gone from browsers) and a ``DENY`` would refuse Airflow too, so it is not sent when framing
is on: browsers that enforce ``frame-ancestors`` ignore it anyway. The session and CSRF cookies must reach the
dashboard inside a frame of another site, which browsers allow only for ``SameSite=None; Secure`` cookies:
framing needs the dashboard on HTTPS. Those two cookies are also ``Partitioned`` (CHIPS): a browser that blocks
third-party cookies (Chromium does, for a frame of another site) keeps a partitioned cookie in a jar of the
top-level site, so signing in inside Airflow's frame works there.
"""

from http.cookies import Morsel
from urllib.parse import urlsplit

from django.conf import settings

XFRAME_MIDDLEWARE = "django.middleware.clickjacking.XFrameOptionsMiddleware"
PARTITIONED_MIDDLEWARE = "statestore_admin.framing.PartitionedCookiesMiddleware"


def frame_origin(text: str) -> str:
    """``scheme://host[:port]`` of an http(s) origin; ValueError for anything else (a path, a query, a
    wildcard, a CSP keyword)."""
    parts = urlsplit(text.strip())
    parts.port  # noqa: B018 (a malformed port raises ValueError here)
    if parts.scheme not in ("http", "https") or not parts.hostname or "*" in parts.netloc or "@" in parts.netloc:
        raise ValueError(f"{text!r} is not an origin such as https://airflow.example.com")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"{text!r} is not an origin: give scheme, host and port only")
    return f"{parts.scheme}://{parts.netloc}".lower()


def framing_settings(origins: list[str], *, middleware: list[str], csp: dict) -> dict:
    """The settings that change when ``origins`` may frame the dashboard; none when the list is empty."""
    if not origins:
        return {}
    directives = {**csp["DIRECTIVES"], "frame-ancestors": list(origins)}
    return {
        # First, so that it sees the cookies the session and CSRF middleware set on the way out.
        "MIDDLEWARE": [PARTITIONED_MIDDLEWARE, *(m for m in middleware if m != XFRAME_MIDDLEWARE)],
        "CONTENT_SECURITY_POLICY": {**csp, "DIRECTIVES": directives},
        "SESSION_COOKIE_SAMESITE": "None",
        "CSRF_COOKIE_SAMESITE": "None",
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
    }


class _PartitionedMorsel(Morsel):
    """A cookie whose ``Set-Cookie`` ends with ``Partitioned``: Python's Morsel has that attribute from 3.14 and
    Django's ``set_cookie`` none, so the line is completed here."""

    def OutputString(self, attrs=None):  # noqa: N802 (Morsel's name)
        return f"{super().OutputString(attrs)}; Partitioned"


class PartitionedCookiesMiddleware:
    """With framing on (``framing_settings``): the session and CSRF cookies, set or deleted, are ``Partitioned``.
    A partitioned cookie belongs to the top-level site it was set under: opened on its own the dashboard keeps
    its usual session; inside Airflow's frame (another site) the operator signs in once, in the frame. A
    deletion must carry the attribute too, or it would not reach the partitioned cookie (signing out in the
    frame). Browsers without CHIPS ignore the attribute."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        for name in (settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME):
            morsel = response.cookies.get(name)
            if morsel is not None:
                partitioned = _PartitionedMorsel()
                partitioned.update(morsel)
                partitioned.set(morsel.key, morsel.value, morsel.coded_value)
                response.cookies[name] = partitioned
        return response
