"""What every view of the API shares: the OpenAPI schema class that makes a declared body required, the
views' bases, who acts (``actor``) and an integer parameter's schema."""

from drf_spectacular.openapi import AutoSchema
from rest_framework.views import APIView

from statestore_admin.access import permissions
from statestore_admin.access.actors import API, Actor
from statestore_admin.api.permissions import StorePermission


class BodyRequiredSchema(AutoSchema):
    """A declared request body is required (a missing one is 422, as in Airflow)."""

    def _get_request_body(self, direction="request"):
        body = super()._get_request_body(direction)
        if body:
            body["required"] = True
        return body


# Our own endpoints (``/api/statestore/v1``): by default, reading task state. (No docstring on a view's
# class: drf-spectacular would make it the description of every operation without one of its own.)
class OwnView(APIView):
    permission_classes = [StorePermission]
    store = permissions.TASK


def actor(request) -> Actor:
    return Actor.from_request(request, via=API)


def integer(minimum: int, maximum: int, default: int | None = None) -> dict:
    """An integer parameter's schema."""
    schema = {"type": "integer", "minimum": minimum, "maximum": maximum}
    return schema if default is None else {**schema, "default": default}
