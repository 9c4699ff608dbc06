"""Keep htmx partials out of the browser's cache, so Back always shows the full page.

A page and its htmx panel share one URL (``pages.render_page``): the panel is what an htmx request with
``HX-Request: true`` gets. A browser keys its cache by URL and, for history navigation (Back, Forward, a
reopened tab), reuses what it stored even when stale; when the last answer stored for a URL was the
panel, Back showed that bare fragment without the page's CSS, navigation or title.

``HtmxCacheMiddleware`` answers every page request with ``Vary: HX-Request`` (the answer depends on it: a
panel, a one-line error for a toast or a dialog instead of a page) and every htmx request, additionally,
with ``Cache-Control: no-store``: a fragment is never stored, so it can never stand in for the page. The
API under ``/api/`` never reads htmx's headers and is left alone. htmx's own history snapshots are off
(``static/js/app.js``: Back reloads the page from the server).
"""

from django.utils.cache import patch_cache_control, patch_vary_headers

from statestore_admin.web import is_api


class HtmxCacheMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if is_api(request):
            return response
        patch_vary_headers(response, ("HX-Request",))
        if request.headers.get("HX-Request") == "true":
            patch_cache_control(response, no_store=True)
        return response
