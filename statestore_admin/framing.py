"""Framing by Airflow's UI (issue 25, docs/airflow-plugin.md): ``STATESTORE_FRAME_ANCESTORS``, off by default.

Airflow shows a plugin's per-object pages in an iframe, so the dashboard may be framed by the origins listed
there and by no other. CSP ``frame-ancestors`` names them; ``X-Frame-Options`` cannot name an origin (its
``ALLOW-FROM`` is gone from browsers) and a ``DENY`` would refuse Airflow too, so it is not sent when framing
is on: browsers that enforce ``frame-ancestors`` ignore it anyway. The session and CSRF cookies must reach the
dashboard inside a frame of another site, which browsers allow only for ``SameSite=None; Secure`` cookies:
framing needs the dashboard on HTTPS.
"""

from urllib.parse import urlsplit

XFRAME_MIDDLEWARE = "django.middleware.clickjacking.XFrameOptionsMiddleware"


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
        "MIDDLEWARE": [m for m in middleware if m != XFRAME_MIDDLEWARE],
        "CONTENT_SECURITY_POLICY": {**csp, "DIRECTIVES": directives},
        "SESSION_COOKIE_SAMESITE": "None",
        "CSRF_COOKIE_SAMESITE": "None",
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
    }
