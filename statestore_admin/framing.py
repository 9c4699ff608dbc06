"""Framing by Airflow's UI (issue 25, docs/airflow-plugin.md): ``STATESTORE_FRAME_ANCESTORS``, off by default.

Airflow shows a plugin's per-object pages in an iframe, so the read pages the plugin embeds may be framed by the
origins listed there and by no other; every other page refuses every frame, framing on or off (issue 36): the
admin, the token pages, signing in, single sign-on, break-glass and every confirmation page shown as a page.
A view is framable only when ``dashboard.http.framed.framable`` marks it (an allow-list: a new page is not), and only
its GET answers are. Such an answer names the origins in CSP ``frame-ancestors`` and sends no
``X-Frame-Options`` (it cannot name an origin, its ``ALLOW-FROM`` is gone from browsers); every other answer keeps
``frame-ancestors 'none'`` and ``X-Frame-Options: DENY``. The dialogs of a framed page are htmx partials fetched
into it, not framed documents, so they need no exception.

An origin is https, or http on the loopback host (``localhost``, ``127.0.0.1``, any port) for a local trial:
an ``http://`` origin elsewhere would let anyone on the network path frame the pages, so it stops the start.

The session and CSRF cookies must reach the dashboard inside a frame of another site, which browsers allow only
for ``SameSite=None; Secure`` cookies: framing needs the dashboard on HTTPS. Those two cookies are also
``Partitioned`` (CHIPS): a browser that blocks third-party cookies (Chromium does, for a frame of another site)
keeps a partitioned cookie in a jar of the top-level site.
"""

import re
from http.cookies import Morsel
from urllib.parse import urlsplit

from django.conf import settings
from django.shortcuts import render, resolve_url
from django.urls import Resolver404, resolve
from django.utils.cache import add_never_cache_headers, patch_vary_headers

from statestore_admin.dashboard.http.framed import is_framable

XFRAME_MIDDLEWARE = "django.middleware.clickjacking.XFrameOptionsMiddleware"
PARTITIONED_MIDDLEWARE = "statestore_admin.framing.PartitionedCookiesMiddleware"
FRAMABLE_MIDDLEWARE = "statestore_admin.framing.FramableViewsMiddleware"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1")
# A host name (labels of letters, digits and inner hyphens), an IPv4 address or a bracketed IPv6 one, and a port.
_HOST_PORT = re.compile(
    r"(?:(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?|\[[0-9a-f:.]+\])(?::[0-9]{1,5})?",
    re.IGNORECASE,
)


def frame_origin(text: str) -> str:
    """``scheme://host[:port]`` of an http(s) origin; ValueError for anything else (a path, a query, a
    wildcard, a CSP keyword)."""
    parts = urlsplit(text.strip())
    parts.port  # noqa: B018 (a malformed port raises ValueError here)
    # The whole host and port, character by character: the origin goes into the CSP as it is, where a space
    # would start another source ("https://a.example.com http:" lets every http origin frame the pages) and a
    # ";" another directive.
    if parts.scheme not in ("http", "https") or not _HOST_PORT.fullmatch(parts.netloc):
        raise ValueError(f"{text!r} is not an origin such as https://airflow.example.com")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"{text!r} is not an origin: give scheme, host and port only")
    if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
        raise ValueError(f"{text!r}: give an https:// origin (http:// is accepted for localhost and 127.0.0.1 only)")
    return f"{parts.scheme}://{parts.netloc}".lower()


def framing_settings(origins: list[str], *, middleware: list[str]) -> dict:
    """The settings that change when ``origins`` may frame the framable pages; none when the list is empty."""
    if not origins:
        return {}
    at = middleware.index(XFRAME_MIDDLEWARE) + 1  # inside it: its DENY is skipped for the answers allowed here
    return {
        # The cookies' first, so that it sees the cookies the session and CSRF middleware set on the way out.
        "MIDDLEWARE": [PARTITIONED_MIDDLEWARE, *middleware[:at], FRAMABLE_MIDDLEWARE, *middleware[at:]],
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


class FramableViewsMiddleware:
    """With framing on (``framing_settings``): the GET answer of a framable view (``dashboard.http.framed.framable``),
    whatever it is (the page, its 404 or 503), may be framed by ``STATESTORE_FRAME_ANCESTORS``; nothing else.

    Someone not signed in is sent to the sign-in form, which is never framed: inside a frame (``request.framed``)
    that redirect becomes a page saying to sign in to the dashboard in a tab of its own, rather than the browser's
    refusal. It holds no form, so it may be framed."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.framable = False
        response = self.get_response(request)
        if request.method not in ("GET", "HEAD") or not settings.STATESTORE_FRAME_ANCESTORS:
            return response
        if getattr(request, "framed", False) and _to_sign_in(request, response):
            response = _sign_in_elsewhere(request)
            request.framable = True
        if request.framable:
            response.xframe_options_exempt = True  # XFrameOptionsMiddleware's own switch
            response._csp_replace = {"frame-ancestors": list(settings.STATESTORE_FRAME_ANCESTORS)}  # django-csp's
        return response

    def process_view(self, request, view_func, view_args, view_kwargs):
        # Signed in only: for anyone else the answer is Django's redirect to the sign-in form (or, framed, the
        # page above), and the redirect is not the read page.
        request.framable = is_framable(view_func) and request.user.is_authenticated


def _to_sign_in(request, response) -> bool:
    """Whether ``response`` sends someone not signed in from a framable page to the sign-in form (Django's
    LoginRequiredMiddleware answers before the view, so the view is looked up here)."""
    location = response.get("Location", "") if response.status_code == 302 else ""
    if request.user.is_authenticated or urlsplit(location).path != resolve_url(settings.LOGIN_URL):
        return False
    try:
        return is_framable(resolve(request.path_info).func)
    except Resolver404:
        return False


def _sign_in_elsewhere(request):
    query = request.GET.copy()
    query.pop("embed", None)  # in a tab of its own, the whole layout
    address = request.build_absolute_uri(request.path + (f"?{query.urlencode()}" if query else ""))
    response = render(request, "framing/sign_in_elsewhere.html", {"dashboard_url": address})
    add_never_cache_headers(response)  # the same address signed in, or in a window, is the page or the sign-in
    patch_vary_headers(response, ("Sec-Fetch-Dest", "Cookie"))
    return response
