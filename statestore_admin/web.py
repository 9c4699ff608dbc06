"""HTTP plumbing that every face shares and that belongs to none of them: whether a request is the API's
(``is_api``), and the JSON error answer in Airflow's shape (``json_error``) that the API, the error
handlers and the middleware give under ``/api/``. It imports nothing of ours, so the faces
(``dashboard``, ``api``, ``admin_site``, ``commands``) can use it without importing each other.
"""

from http import HTTPStatus

from django.http import JsonResponse

API_PREFIX = "/api/"


def is_api(request) -> bool:
    """Whether ``request`` is under ``/api/``: its errors are JSON, it has no display time zone or page cache."""
    return request.path.startswith(API_PREFIX)


def json_error(status_code: int, detail: str | None = None, headers: dict | None = None) -> JsonResponse:
    """An error answer outside DRF (unrouted path, 400, 413, 500) as Airflow's FastAPI gives it:
    ``{"detail": "<reason phrase>"}`` unless ``detail`` says more."""
    try:
        phrase = HTTPStatus(status_code).phrase
    except ValueError:
        phrase = "Error"
    return JsonResponse({"detail": detail or phrase}, status=status_code, headers=headers)
