"""The compact layout inside Airflow's UI (issue 25): a page framed by Airflow shows no header of its own.

A page is framed when the browser says so (``Sec-Fetch-Dest: iframe``, sent for every navigation inside the
frame, so links there stay compact without carrying a parameter) or when the link asks (``embed=1``, what the
Airflow plugin's links carry, for browsers that do not send Fetch metadata). The answer depends on the header,
hence ``Vary``. Whether the frame is allowed at all is the CSP's business (``statestore_admin/framing.py``).
"""

from django.utils.cache import patch_vary_headers

from statestore_admin.web import is_api


class FramedLayoutMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.framed = request.headers.get("Sec-Fetch-Dest") == "iframe" or request.GET.get("embed") == "1"
        response = self.get_response(request)
        if not is_api(request):  # the API answers the same JSON in a frame or not
            patch_vary_headers(response, ("Sec-Fetch-Dest",))
        return response
