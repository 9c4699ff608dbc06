"""The compact layout inside Airflow's UI (issue 25): a page framed by Airflow shows no header of its own.

A page is framed when the browser says so (``Sec-Fetch-Dest: iframe``, sent for every navigation inside the
frame, so links there stay compact without carrying a parameter) or when the link asks (``embed=1``, what the
Airflow plugin's links carry, for browsers that do not send Fetch metadata). The answer depends on the header,
hence ``Vary``. Whether the frame is allowed at all is the CSP's business (``statestore_admin/framing.py``): only
for the read pages marked ``framable`` here (``dashboard/urls.py``), never for a form that acts or signs in.
"""

from functools import wraps

from django.utils.cache import patch_vary_headers

from statestore_admin.web import is_api

FRAMABLE = "statestore_framable"


def framable(view):
    """``view`` (a read page the Airflow plugin may show, or one reached from it) may be framed by the origins
    ``STATESTORE_FRAME_ANCESTORS`` lists. Its actions open as htmx dialogs inside the frame; the same action
    without JavaScript is a page of its own, which is not framable."""

    @wraps(view)
    def wrapper(*args, **kwargs):
        return view(*args, **kwargs)

    setattr(wrapper, FRAMABLE, True)
    return wrapper


def is_framable(view) -> bool:
    return getattr(view, FRAMABLE, False) is True


class FramedLayoutMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.framed = request.headers.get("Sec-Fetch-Dest") == "iframe" or request.GET.get("embed") == "1"
        response = self.get_response(request)
        if not is_api(request):  # the API answers the same JSON in a frame or not
            patch_vary_headers(response, ("Sec-Fetch-Dest",))
        return response
