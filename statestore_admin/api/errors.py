"""Errors as Airflow's FastAPI answers them: ``{"detail": "..."}`` or ``{"detail": [{type, loc, msg, input}]}``.

Validation messages of the domain (``core.values``) carry codes; here they get Airflow's wording, so a
client sees what Airflow would say. Nothing here decides what is valid.
"""

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from statestore_admin.airflow.availability import AirflowDatabaseUnavailable
from statestore_admin.core.errors import Ambiguous, Conflict, NotFound, Unaddressable
from statestore_admin.state.api_errors import AirflowRefused
from statestore_admin.tokens.authentication import OwnerSignInLapsed, ReadOnlyToken, TokenExpired

AIRFLOW_VALUE_ERRORS = {
    "null": "value cannot be null",
    "non_finite": "value contains non-finite numbers; NaN and Inf are not JSON representable",
    "too_large": "value exceeds max_value_storage_bytes ({limit}); raise [state_store] max_value_storage_bytes "
    "or set it to 0 to disable the limit",
}


class RequestInvalid(Exception):
    """One or more FastAPI-style validation errors (422)."""

    def __init__(self, *errors: dict):
        self.errors = list(errors)


class DetailInvalid(Exception):
    """A 422 with a message rather than a list (Airflow 3.4's ``map_index`` below -1 on a task route)."""


def error(kind: str, loc: list, msg: str, value=None, **extra) -> dict:
    item = {"type": kind, "loc": loc, "msg": msg, "input": value}
    item.update(extra)
    return item


def _from_domain(exc: DjangoValidationError, locations: dict[str, list]) -> list[dict]:
    items = []
    for field, errors in exc.error_dict.items() if hasattr(exc, "error_dict") else [("value", exc.error_list)]:
        for e in errors:
            code = e.code or "value_error"
            message = AIRFLOW_VALUE_ERRORS.get(code)
            if message:
                message = message.format(limit=getattr(exc, "limit", ""))
            else:
                message = " ".join(e.messages)
            items.append(
                error(
                    "value_error", locations.get(field, ["body", field]), f"Value error, {message}", ctx={"error": {}}
                )
            )
    return items


def handler(exc, context):
    view = context.get("view")
    locations = getattr(view, "error_locations", {})
    if isinstance(exc, RequestInvalid):
        return Response({"detail": exc.errors}, status=status.HTTP_422_UNPROCESSABLE_ENTITY)
    if isinstance(exc, DjangoValidationError):
        return Response({"detail": _from_domain(exc, locations)}, status=status.HTTP_422_UNPROCESSABLE_ENTITY)
    if isinstance(exc, exceptions.ParseError):
        return Response(
            {"detail": [error("json_invalid", ["body", 0], "JSON decode error", {}, ctx={"error": str(exc.detail)})]},
            status=status.HTTP_422_UNPROCESSABLE_ENTITY,
        )
    if isinstance(exc, (exceptions.NotAuthenticated, exceptions.AuthenticationFailed)):
        # Airflow's wording for every failure, except an expired token's and a lapsed owner's, which say so.
        detail = str(exc.detail) if isinstance(exc, (TokenExpired, OwnerSignInLapsed)) else "Not authenticated"
        response = Response({"detail": detail}, status=status.HTTP_401_UNAUTHORIZED)
        response["WWW-Authenticate"] = "Bearer"
        return response
    if isinstance(exc, ReadOnlyToken):
        return Response({"detail": str(exc.detail)}, status=status.HTTP_403_FORBIDDEN)
    if isinstance(exc, AirflowRefused):  # Airflow's 403 to the dashboard's token: say whose refusal it is
        return Response({"detail": str(exc)}, status=status.HTTP_403_FORBIDDEN)
    if isinstance(exc, (exceptions.PermissionDenied, DjangoPermissionDenied)):
        return Response({"detail": "Forbidden"}, status=status.HTTP_403_FORBIDDEN)
    if isinstance(exc, AirflowDatabaseUnavailable):
        return Response({"detail": exc.detail}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, DetailInvalid):
        return Response({"detail": str(exc)}, status=status.HTTP_422_UNPROCESSABLE_ENTITY)
    if isinstance(exc, Unaddressable):
        return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, Ambiguous):  # Airflow's 409 is a message alone
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, NotFound):
        return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, Conflict):
        return Response({"detail": str(exc), "conflicts": exc.details}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, Http404):
        return Response({"detail": str(exc) or "Not Found"}, status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, exceptions.MethodNotAllowed):
        return Response({"detail": "Method Not Allowed"}, status=status.HTTP_405_METHOD_NOT_ALLOWED)
    if isinstance(exc, exceptions.UnsupportedMediaType):
        return Response(
            {
                "detail": [
                    error(
                        "model_attributes_type",
                        ["body"],
                        "Input should be a valid dictionary or object to extract fields from",
                        None,
                    )
                ]
            },
            status=status.HTTP_422_UNPROCESSABLE_ENTITY,
        )
    return drf_exception_handler(exc, context)
