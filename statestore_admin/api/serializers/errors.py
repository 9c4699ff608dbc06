"""The error bodies (``errors.handler`` answers them): Airflow's ``{"detail": ...}``, and a restore's 409."""

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

VALIDATION_ITEM = {
    "type": "object",
    "properties": {
        "type": {"type": "string"},
        "loc": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
        "msg": {"type": "string"},
        "input": {},
        "ctx": {"type": "object", "additionalProperties": {}},
    },
    "required": ["type", "loc", "msg"],
}


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "array", "items": VALIDATION_ITEM}]})
class DetailField(serializers.JSONField):
    """A reason phrase, or FastAPI's list of validation errors (422)."""


@extend_schema_serializer(component_name="HTTPExceptionResponse")
class ErrorBody(serializers.Serializer):
    """Every error our API answers (400, 401, 403, 404, 405, 422, 429, 503): ``{"detail": ...}``."""

    detail = DetailField()


@extend_schema_serializer(component_name="RestoreConflictResponse")
class ConflictBody(serializers.Serializer):
    """A restore's 409: keys written again since the event, or created by another writer meanwhile."""

    detail = serializers.CharField()
    conflicts = serializers.ListField(child=serializers.DictField(child=serializers.JSONField()))


Detail = ErrorBody
# The errors each kind of operation documents. Airflow's /api/v2 routes: 401, 403, 404, 422; Airflow 3.4's
# task routes also 400 (coordinates that name no one task instance) and 409 (several).
ERRORS = {401: Detail, 403: Detail, 404: Detail, 422: Detail}
TASK_ERRORS = {400: Detail, **ERRORS, 409: Detail}
# Ours: 429 is too many failed tokens from the caller's address (throttling.py).
ANY_STORE_ERRORS = {401: Detail, 403: Detail, 429: Detail}
READ_ERRORS = {401: Detail, 403: Detail, 422: Detail, 429: Detail}
