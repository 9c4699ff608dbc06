"""Airflow 3.3's ``/api/v2`` state-store endpoints (docs/airflow.md), on the shared domain services.

Same paths, parameters, bodies, status codes, defaults and error bodies as Airflow 3.3.2, so that
Airflow's Python client and scripts written for Airflow work unchanged. Where Airflow errs (NaN → 500,
a 513-character key → a database error), the answer is a 422 with a validation message instead.

Our extensions (docs/api.md), invisible to Airflow's clients: ``?resolve=true`` on a key's GET (the value
behind a worker-side reference), and ``X-Statestore-*`` headers on the 204 of a delete or clear.
"""

import re
from uuid import UUID

from django.http import HttpResponse
from django.utils.dateparse import parse_datetime
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import permissions as drf_permissions
from rest_framework import serializers
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import APIView

from statestore_admin.access import permissions, policies
from statestore_admin.access.actors import API, Actor
from statestore_admin.access.scopes import scope_of
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.api.errors import DetailInvalid, ErrorBody, RequestInvalid, error
from statestore_admin.core import formatting, values
from statestore_admin.core.values import AT, DEFAULT, MAX_DEPTH, NEVER, Expiry, json_depth, parse_datetime_aware
from statestore_admin.objects import store as objects
from statestore_admin.state import selectors, services
from statestore_admin.state.selectors import TaskAddress

PAGE_LIMIT, MAX_PAGE_LIMIT = 50, 100  # Airflow's [api] fallback_page_limit and maximum_page_limit
TRUE = {"1", "true", "t", "yes", "y", "on"}
FALSE = {"0", "false", "f", "no", "n", "off"}


BODY_DEPTH = MAX_DEPTH + 3  # a value in a body ({"keys": [{"value": …}]}); the domain checks the value itself


class LenientJSONParser(JSONParser):
    """Accepts NaN and Infinity tokens so that the domain can refuse them with a message (Airflow: a 500).
    A body nested deeper than any allowed value is refused before parsing (the parser recurses), and so
    is an object that names a key twice (``values.loads``: JSON parsers keep the last one silently)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:  # invalid UTF-8 is refused, never stored with replacement characters
            text = stream.read().decode((parser_context or {}).get("encoding") or "utf-8")
            if not text.strip():
                return None
            if json_depth(text, BODY_DEPTH) > BODY_DEPTH:
                raise RequestInvalid(
                    error(
                        "value_error",
                        ["body"],
                        f"Value error, arrays and objects nest more than {MAX_DEPTH} levels deep in a value; "
                        f"at most {MAX_DEPTH} are allowed",
                        None,
                        ctx={"error": {}},
                    )
                )
            return values.loads(text)
        except ValueError as exc:  # UnicodeDecodeError and values.DuplicateKey are ValueErrors
            raise RequestInvalid(
                error(
                    "json_invalid",
                    ["body", getattr(exc, "pos", 0)],
                    "JSON decode error",
                    {},
                    ctx={"error": getattr(exc, "msg", str(exc))},
                )
            ) from None


class StorePermission(drf_permissions.BasePermission):
    """The policy of each method (``access.policies``): view for GET, set for PUT (add or change: the service
    checks which for the key it finds), edit for PATCH (change and view), delete for DELETE."""

    ACTIONS = {
        "GET": "view",
        "HEAD": "view",
        "OPTIONS": "view",
        "PUT": policies.SET,
        "PATCH": "edit",
        "DELETE": "delete",
    }

    def has_permission(self, request, view):
        return policies.allows(request.user, view.store, self.ACTIONS.get(request.method, "overwrite"))


# Airflow's /api/v2 writes its times in UTC ending in Z too: our one format is its wire format.
iso = formatting.iso


decoded = values.decoded


MAX_INT = 2**31 - 1  # an integer column (map_index)
MAX_BIGINT = 2**63 - 1  # the largest OFFSET the database takes
MIN_BIGINT = -(2**63)


def query_int(request, name: str, default: int, minimum: int, maximum: int = MAX_INT) -> int:
    """An integer query parameter within [minimum, maximum] (a value the database can compare), else 422."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        number = int(raw)
    except ValueError:
        raise RequestInvalid(
            error(
                "int_parsing",
                ["query", name],
                "Input should be a valid integer, unable to parse string as an integer",
                raw,
            )
        ) from None
    if number < minimum:
        raise RequestInvalid(
            error(
                "greater_than_equal",
                ["query", name],
                f"Input should be greater than or equal to {minimum}",
                raw,
                ctx={"ge": minimum},
            )
        )
    if number > maximum:
        raise RequestInvalid(
            error(
                "less_than_equal",
                ["query", name],
                f"Input should be less than or equal to {maximum}",
                raw,
                ctx={"le": maximum},
            )
        )
    return number


def path_int(raw: str, name: str) -> int:
    """An integer path parameter as FastAPI parses it: anything else is Airflow's 422 ``int_parsing``."""
    if not re.fullmatch(r"[+-]?[0-9]+", raw):
        raise RequestInvalid(
            error(
                "int_parsing",
                ["path", name],
                "Input should be a valid integer, unable to parse string as an integer",
                raw,
            )
        )
    return int(raw)


def query_bool(request, name: str) -> bool:
    raw = request.query_params.get(name)
    if raw is None:
        return False
    if raw.lower() in TRUE | FALSE:
        return raw.lower() in TRUE
    raise RequestInvalid(
        error("bool_parsing", ["query", name], "Input should be a valid boolean, unable to interpret input", raw)
    )


_HEX = frozenset("0123456789abcdefABCDEF")
_UUID_GROUPS, _UUID_STARTS = (8, 4, 4, 4, 12), (0, 9, 14, 19, 24)


def query_uuid(request, name: str) -> UUID | None:
    """A UUID query parameter in the forms pydantic accepts (hyphenated, 32 digits, braced, ``urn:uuid:``);
    anything else is 422 ``uuid_parsing`` with pydantic's reason, word for word."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    value, reason = parse_uuid(raw)
    if value is None:
        raise RequestInvalid(
            error(
                "uuid_parsing", ["query", name], f"Input should be a valid UUID, {reason}", raw, ctx={"error": reason}
            )
        )
    return value


def parse_uuid(raw: str) -> tuple[UUID | None, str | None]:
    """``raw`` as a UUID, or None and why not, as pydantic-core (the Rust ``uuid`` crate) reports it."""
    size = len(raw.encode())
    if size > 45:
        return None, f"invalid length: found {size}"
    hyphenated = None
    if size == 36:
        hyphenated = raw
    elif size == 38 and raw[0] == "{" and raw[-1] == "}":
        hyphenated = raw[1:-1]
    elif size == 45 and raw.startswith("urn:uuid:"):
        hyphenated = raw[9:]
    if hyphenated is not None:
        digits = hyphenated.replace("-", "")
        if all(hyphenated[i] == "-" for i in (8, 13, 18, 23)) and len(digits) == 32 and set(digits) <= _HEX:
            return UUID(digits), None
        return None, _uuid_reason(hyphenated, hyphenated, 0, False)
    if size == 32 and set(raw) <= _HEX:
        return UUID(raw), None
    if len(raw) >= 2 and raw[0] == "{" and raw[-1] == "}":
        return None, _uuid_reason(raw, raw[1:-1], 1, False)
    if raw.startswith("urn:uuid:"):
        return None, _uuid_reason(raw, raw[9:], 9, False)
    return None, _uuid_reason(raw, raw, 0, True)


def _uuid_reason(whole: str, text: str, offset: int, simple: bool) -> str:
    hyphens, bounds, index = 0, [0, 0, 0, 0], 0
    for char in text:
        if char == "-":
            if hyphens < 4:
                bounds[hyphens] = index
            hyphens += 1
        elif char not in _HEX:
            return f"invalid character: found `{char}` at {index + offset}"
        index += len(char.encode())  # the crate counts bytes
    if hyphens == 0 and simple:
        return f"invalid length: found {len(whole.encode())}"
    if hyphens != 4:
        return f"invalid group count: expected 5, found {hyphens + 1}"
    for group in range(4):
        if bounds[group] != _UUID_STARTS[group + 1] - 1:
            found = bounds[group] - _UUID_STARTS[group]
            return f"invalid group length in group {group}: expected {_UUID_GROUPS[group]}, found {found}"
    return f"invalid group length in group 4: expected 12, found {len(whole.encode()) - _UUID_STARTS[4]}"


def errors_of(*parsers) -> list[dict]:
    """The validation errors of ``parsers``, in order (none when all parse)."""
    try:
        all_parsed(*parsers)
    except RequestInvalid as exc:
        return exc.errors
    return []


def all_parsed(*parsers) -> list:
    """Each parser's value; the errors of all of them in one 422, as FastAPI reports one dependency's
    parameters."""
    values, problems = [], []
    for parse in parsers:
        try:
            values.append(parse())
        except RequestInvalid as exc:
            values.append(None)
            problems += exc.errors
    if problems:
        raise RequestInvalid(*problems)
    return values


def body_fields(request, allowed: set[str], required: set[str]) -> dict:
    """A strict JSON object body: unknown fields and missing required ones are 422, as in Airflow."""
    data = request.data
    if data is None or (not data and not int(request.META.get("CONTENT_LENGTH") or 0)):  # no body at all
        raise RequestInvalid(error("missing", ["body"], "Field required", None))
    return object_fields(data, allowed, required)


def object_fields(data, allowed: set[str], required: set[str]) -> dict:
    """``data`` as a strict JSON object: not an object, unknown fields and missing required ones are 422."""
    if not isinstance(data, dict):
        raise RequestInvalid(
            error(
                "model_attributes_type",
                ["body"],
                "Input should be a valid dictionary or object to extract fields from",
                data,
            )
        )
    problems = [error("missing", ["body", name], "Field required", data) for name in sorted(required - data.keys())]
    problems += [
        error("extra_forbidden", ["body", name], "Extra inputs are not permitted", data[name])
        for name in data
        if name not in allowed
    ]
    if problems:
        raise RequestInvalid(*problems)
    return data


def parse_expires_at(data: dict) -> Expiry:
    """``"default"``, null (never) or a timezone-aware datetime; errors as pydantic reports the union."""
    raw = data.get("expires_at", DEFAULT)
    if raw == DEFAULT:
        return Expiry(DEFAULT)
    if raw is None:
        return Expiry(NEVER)
    if isinstance(raw, str):
        try:
            return Expiry(AT, parse_datetime_aware(raw))
        except Exception:
            naive = _naive(raw)
            problem = (
                error("timezone_aware", ["body", "expires_at", "datetime"], "Input should have timezone info", raw)
                if naive
                else error(
                    "datetime_from_date_parsing",
                    ["body", "expires_at", "datetime"],
                    "Input should be a valid datetime or date",
                    raw,
                )
            )
            raise RequestInvalid(
                problem,
                error(
                    "literal_error",
                    ["body", "expires_at", "literal['default']"],
                    "Input should be 'default'",
                    raw,
                    ctx={"expected": "'default'"},
                ),
            ) from None
    raise RequestInvalid(
        error("datetime_type", ["body", "expires_at", "datetime"], "Input should be a valid datetime", raw),
        error(
            "literal_error",
            ["body", "expires_at", "literal['default']"],
            "Input should be 'default'",
            raw,
            ctx={"expected": "'default'"},
        ),
    )


def _naive(text: str) -> bool:
    try:
        parsed = parse_datetime(text)
    except ValueError:
        return False
    return parsed is not None and parsed.tzinfo is None


def task_entry(row: TaskStateStore) -> dict:
    return {
        "key": row.key,
        "value": decoded(row.value),
        "updated_at": iso(row.updated_at),
        "expires_at": iso(row.expires_at),
    }


def asset_entry(row: AssetStateStore, regions: bool | None = None) -> dict:
    """An asset key as Airflow answers it. On Airflow 3.4 (``regions``; asked of the database when not
    given) the writer gains the task writer's identity, its region left out when it had none."""
    writer = None
    if row.last_updated_by_kind is not None:
        writer = {
            "kind": row.last_updated_by_kind,
            "dag_id": row.last_updated_by_dag_id,
            "run_id": row.last_updated_by_run_id,
            "task_id": row.last_updated_by_task_id,
            "map_index": row.last_updated_by_map_index,
        }
        if selectors.addresses_regions() if regions is None else regions:
            writer.update(regional_writer(row))
    return {"key": row.key, "value": decoded(row.value), "updated_at": iso(row.updated_at), "last_updated_by": writer}


def regional_writer(row: AssetStateStore) -> dict:
    """Airflow 3.4's fields of a writer, in its order; ``region_id`` and ``region_index`` omitted (not null)
    outside any region (``OmitsMissingRegion``)."""
    instance = row.last_updated_by_task_instance_id
    fields = {"task_instance_id": None if instance is None else str(instance)}
    region = row.last_updated_by_region_id
    if region is not None and region != SENTINEL_REGION_ID:
        fields.update(region_id=str(region), region_index=row.last_updated_by_region_index)
    fields["try_number"] = row.last_updated_by_try_number
    return fields


def actor(request) -> Actor:
    return Actor.from_request(request, via=API)


def no_content(outcome: services.Outcome | None = None) -> HttpResponse:
    """Airflow's empty 204; after a delete or clear, our headers (an extension Airflow's clients ignore): the
    audit event that recorded it, and when worker-side objects were involved, how many were deleted and how
    many could not be (those are orphans; the event names them)."""
    response = HttpResponse(status=204)
    if outcome is not None:
        if outcome.event is not None:
            response[AUDIT_EVENT_HEADER] = str(outcome.event.pk)
        if outcome.objects is not None:
            response[OBJECTS_DELETED_HEADER] = str(outcome.objects.deleted)
            response[OBJECTS_FAILED_HEADER] = str(outcome.objects.failed_count)
    return response


AUDIT_EVENT_HEADER = "X-Statestore-Audit-Event"
OBJECTS_DELETED_HEADER = "X-Statestore-Objects-Deleted"
OBJECTS_FAILED_HEADER = "X-Statestore-Objects-Failed"


def with_resolved(entry: dict, resolved: objects.Resolved | None) -> dict:
    """``?resolve=true`` (our extension): the entry with ``reference`` (the worker-side reference, or null
    for a plain value), ``resolved`` (whether ``value`` is the real value) and ``resolve_error`` (why not);
    a resolved reference's ``value`` is the value behind it (read with ``WORKER_BACKEND_READ`` only)."""
    if resolved is None:  # a plain value: it is the real one
        return {**entry, "reference": None, "resolved": True, "resolve_error": None}
    if resolved.text is None:
        return {**entry, "reference": resolved.reference.ref, "resolved": False, "resolve_error": resolved.error}
    value = decoded(resolved.text)
    return {**entry, "value": value, "reference": resolved.reference.ref, "resolved": True, "resolve_error": None}


# Documentation of the shapes (drf-spectacular) ------------------------------------------------------
def _task_fields() -> dict:
    return {
        "key": serializers.CharField(),
        "value": serializers.JSONField(),
        "updated_at": serializers.DateTimeField(),
        "expires_at": serializers.DateTimeField(allow_null=True),
    }


TaskEntry = inline_serializer("TaskStateStoreResponse", _task_fields())
RESOLVED_FIELDS = {
    "reference": serializers.CharField(
        allow_null=True,
        required=False,
        help_text="With ?resolve=true: the worker-side reference, null for a plain value.",
    ),
    "resolved": serializers.BooleanField(
        required=False, help_text="With ?resolve=true: whether `value` is the real value."
    ),
    "resolve_error": serializers.CharField(
        allow_null=True,
        required=False,
        help_text="With ?resolve=true: why the value behind the reference is not given.",
    ),
}
TaskItem = inline_serializer("TaskStateStoreItemResponse", {**_task_fields(), **RESOLVED_FIELDS})
TaskCollection = inline_serializer(
    "TaskStateStoreCollectionResponse",
    {"task_state_store": TaskEntry.__class__(many=True), "total_entries": serializers.IntegerField()},
)
Writer = inline_serializer(
    "AssetStateStoreLastUpdatedBy",
    {
        "kind": serializers.ChoiceField(["task", "watcher", "api"]),
        "dag_id": serializers.CharField(allow_null=True),
        "run_id": serializers.CharField(allow_null=True),
        "task_id": serializers.CharField(allow_null=True),
        "map_index": serializers.IntegerField(allow_null=True),
        # Airflow 3.4's task writer identity (absent on 3.3); region_id and region_index are left out,
        # never null, when the writer sat in no region.
        "task_instance_id": serializers.UUIDField(allow_null=True, required=False, help_text="Airflow 3.4."),
        "region_id": serializers.UUIDField(
            required=False, help_text="Airflow 3.4, when the task writer sat in a dynamic region."
        ),
        "region_index": serializers.IntegerField(required=False, help_text="Airflow 3.4, with region_id."),
        "try_number": serializers.IntegerField(allow_null=True, required=False, help_text="Airflow 3.4."),
    },
)


def _asset_fields() -> dict:
    return {
        "key": serializers.CharField(),
        "value": serializers.JSONField(),
        "updated_at": serializers.DateTimeField(),
        "last_updated_by": Writer.__class__(allow_null=True),
    }


AssetEntry = inline_serializer("AssetStateStoreResponse", _asset_fields())
AssetItem = inline_serializer("AssetStateStoreItemResponse", {**_asset_fields(), **RESOLVED_FIELDS})
AssetCollection = inline_serializer(
    "AssetStateStoreCollectionResponse",
    {"asset_state_store": AssetEntry.__class__(many=True), "total_entries": serializers.IntegerField()},
)
# Request bodies as raw schemas: what is really accepted (a non-null value, no other field), so that a
# schema-valid request is never refused for its shape (schemathesis' positive_data_acceptance).
JSON_VALUE = {
    "description": f"Any JSON value but null, nesting arrays and objects at most {MAX_DEPTH} levels deep; "
    "NaN and Infinity are refused.",
    "anyOf": [{"type": t} for t in ("object", "array", "string", "number", "boolean")],
}


def body_schema(name: str, properties: dict, required: list[str]) -> dict:
    return {
        "title": name,
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


TaskBody = {
    "application/json": body_schema(
        "TaskStateStoreBody",
        {
            "value": JSON_VALUE,
            "expires_at": {
                "description": '"default", null (never), or a timezone-aware date-time',
                "nullable": True,
                "anyOf": [{"type": "string", "enum": [DEFAULT]}, {"type": "string", "format": "date-time"}],
                "default": DEFAULT,
            },
        },
        ["value"],
    )
}
PatchBody = {"application/json": body_schema("TaskStateStorePatchBody", {"value": JSON_VALUE}, ["value"])}
AssetBody = {"application/json": body_schema("AssetStateStoreBody", {"value": JSON_VALUE}, ["value"])}
Detail = ErrorBody
ERRORS = {401: Detail, 403: Detail, 404: Detail, 422: Detail}
# Airflow 3.4's task routes also answer 400 (coordinates that name no one task instance) and 409 (several).
TASK_ERRORS = {400: Detail, **ERRORS, 409: Detail}


def integer(minimum: int, maximum: int, default: int | None = None) -> dict:
    schema = {"type": "integer", "minimum": minimum, "maximum": maximum}
    return schema if default is None else {**schema, "default": default}


MAP_INDEX = OpenApiParameter(
    "map_index",
    integer(-1, MAX_INT, -1),
    description="-1 for an unmapped task; 0 or more: the public map index (on Airflow 3.4, of the mapped task's "
    "current expansion).",
)
REGION_ID = OpenApiParameter(
    "region_id",
    OpenApiTypes.UUID,
    description="Airflow 3.4: a dynamic region (a loop's execution, a mapped task's or task group's expansion). "
    "With region_index, the stored address as given; alone, the region of a mapped task's expansion, with map_index. "
    "A task inside a loop needs both (400 otherwise). Ignored on Airflow 3.3.",
)
REGION_INDEX = OpenApiParameter(
    "region_index",
    integer(-1, MAX_INT),
    description="Airflow 3.4, with region_id (400 without): the index in the region (a loop's iteration, a map "
    "index); map_index, if given, must be -1 or the same (400). Ignored on Airflow 3.3.",
)
COORDINATES = [MAP_INDEX, REGION_ID, REGION_INDEX]
PAGING = [
    OpenApiParameter(
        "limit", integer(0, MAX_INT, PAGE_LIMIT), description=f"Larger values give {MAX_PAGE_LIMIT} entries."
    ),
    OpenApiParameter("offset", integer(0, MAX_BIGINT, 0)),
]
ASSET_ID = OpenApiParameter(
    "asset_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="Not an integer: 422, as in Airflow."
)
KEY = OpenApiParameter("key", OpenApiTypes.STR, OpenApiParameter.PATH, description="Any characters; URL-encode '/'.")
RESOLVE = OpenApiParameter(
    "resolve",
    bool,
    default=False,
    description="Our extension (not Airflow's): when the value is a worker-side reference, give the value behind "
    "it (read only with the dashboard's WORKER_BACKEND_READ) and add `reference`, `resolved` and `resolve_error`. "
    "Without it the answer is Airflow's.",
)
DELETE_HEADERS = [
    OpenApiParameter(
        AUDIT_EVENT_HEADER,
        str,
        OpenApiParameter.HEADER,
        response=[204],
        description="Our extension: the id of the audit event that recorded the delete (absent when nothing changed).",
    ),
    OpenApiParameter(
        OBJECTS_DELETED_HEADER,
        int,
        OpenApiParameter.HEADER,
        response=[204],
        description="Our extension, when deleted rows held worker-side references: objects deleted after the rows.",
    ),
    OpenApiParameter(
        OBJECTS_FAILED_HEADER,
        int,
        OpenApiParameter.HEADER,
        response=[204],
        description="Our extension, with the previous one: objects that could not be deleted (now orphans; the rows "
        "stay deleted).",
    ),
]


class BodyRequiredSchema(AutoSchema):
    """A declared request body is required (a missing one is 422, as in Airflow)."""

    def _get_request_body(self, direction="request"):
        body = super()._get_request_body(direction)
        if body:
            body["required"] = True
        return body


class AirflowView(APIView):
    schema = BodyRequiredSchema()
    parser_classes = [LenientJSONParser]
    permission_classes = [StorePermission]
    error_locations = {"key": ["path", "key"], "value": ["body", "value"], "expires_at": ["body", "expires_at"]}


# Task state -----------------------------------------------------------------------------------------
class TaskView(AirflowView):
    store = permissions.TASK

    def initial(self, request, *args, **kwargs):
        """After authentication and permissions, a DAG out of the user's scope is 403 whatever the rest of
        the request, as Airflow's auth manager answers per DAG (whether the DAG exists or not)."""
        super().initial(request, *args, **kwargs)
        scope_of(request.user).require_dag(self.kwargs["dag_id"])

    def scope(self, request, dag_id, dag_run_id, task_id, *after) -> TaskAddress:
        """The address the query names: on Airflow 3.3 ``map_index``; on 3.4 ``map_index``, ``region_id``
        and ``region_index`` as Airflow 3.4 resolves them (``selectors.resolve_address``), before any other
        parameter or the body. When they do not parse, the 422 lists their errors and then those of the
        parsers ``after`` (the route's other parameters, its body), as FastAPI reports them together."""
        if not selectors.addresses_regions():
            return TaskAddress(dag_id, dag_run_id, task_id, query_int(request, "map_index", -1, -1))
        try:
            map_index, region_id, region_index = all_parsed(
                lambda: query_int(request, "map_index", -1, MIN_BIGINT),
                lambda: query_uuid(request, "region_id"),
                lambda: query_int(request, "region_index", None, -1),
            )
        except RequestInvalid as exc:
            raise RequestInvalid(*exc.errors, *errors_of(*after)) from None
        if map_index < -1:  # Airflow 3.4 refuses it after parsing, with a message rather than a list
            raise DetailInvalid("map_index must be greater than or equal to -1")
        return selectors.resolve_address(
            dag_id, dag_run_id, task_id, map_index=map_index, region_id=region_id, region_index=region_index
        )

    def clear_scope(self, request, dag_id, dag_run_id, task_id) -> tuple[TaskAddress, bool]:
        """A clear's address and whether it takes every index of the address's region: on 3.4,
        ``all_map_indices`` clears one task's expansion (``selectors.clears_expansion``)."""
        if not selectors.addresses_regions():
            return self.scope(request, dag_id, dag_run_id, task_id), query_bool(request, "all_map_indices")
        try:
            map_index, region_id, region_index, all_map_indices = all_parsed(
                lambda: query_int(request, "map_index", -1, -1),
                lambda: query_uuid(request, "region_id"),
                lambda: query_int(request, "region_index", None, -1),
                lambda: query_bool(request, "all_map_indices"),
            )
        except RequestInvalid as exc:
            # Airflow 3.4's clear reads these through three dependencies (the scope, its validation, and
            # _clear_all_map_indices, which reads all_map_indices again) and FastAPI reports each time.
            scope, own = exc.errors, errors_of(lambda: query_bool(request, "all_map_indices"))
            raise RequestInvalid(*scope, *scope, *own, *scope, *own) from None
        address = selectors.resolve_address(
            dag_id,
            dag_run_id,
            task_id,
            map_index=map_index,
            region_id=region_id,
            region_index=region_index,
            all_map_indices=all_map_indices,
        )
        return address, selectors.clears_expansion(address, all_map_indices)


class TaskStateStoreCollection(TaskView):
    @extend_schema(
        operation_id="list_task_state_store",
        parameters=[*COORDINATES, *PAGING],
        responses={200: TaskCollection, **TASK_ERRORS},
        tags=["Task State Store"],
    )
    def get(self, request, dag_id, dag_run_id, task_id):
        def limit():
            return min(query_int(request, "limit", PAGE_LIMIT, 0), MAX_PAGE_LIMIT)

        def offset():
            return query_int(request, "offset", 0, 0, MAX_BIGINT)

        scope = self.scope(request, dag_id, dag_run_id, task_id, limit, offset)
        limit, offset = limit(), offset()
        rows, total = selectors.task_keys_page(scope, offset, limit, scope=scope_of(request.user))
        return Response({"task_state_store": [task_entry(r) for r in rows], "total_entries": total})

    @extend_schema(
        operation_id="clear_task_state_store",
        parameters=[
            *COORDINATES,
            OpenApiParameter(
                "all_map_indices",
                bool,
                default=False,
                description="Every map index of the task (on Airflow 3.4: of the addressed expansion of the task; "
                "in a loop's or a mapped task group's region, only the addressed index).",
            ),
            *DELETE_HEADERS,
        ],
        responses={204: None, **TASK_ERRORS},
        tags=["Task State Store"],
    )
    def delete(self, request, dag_id, dag_run_id, task_id):
        scope, all_map_indices = self.clear_scope(request, dag_id, dag_run_id, task_id)
        outcome = services.clear_task_instance(actor=actor(request), scope=scope, all_map_indices=all_map_indices)
        return no_content(outcome)


class TaskStateStoreItem(TaskView):
    def body_of(self, scope: TaskAddress, body) -> dict:
        """The write's body. On Airflow 3.4 a missing task instance is answered before a malformed body
        (its check is a dependency, the body the route's own parameter): one more query, on refusals only."""
        try:
            return body()
        except RequestInvalid:
            if selectors.addresses_regions():
                selectors.require_task_instance(scope)
            raise

    @extend_schema(
        operation_id="get_task_state_store",
        parameters=[*COORDINATES, KEY, RESOLVE],
        responses={200: TaskItem, **TASK_ERRORS},
        tags=["Task State Store"],
    )
    def get(self, request, dag_id, dag_run_id, task_id, key):
        scope = self.scope(request, dag_id, dag_run_id, task_id)
        resolve = query_bool(request, "resolve")
        row = selectors.task_key_in(scope, key, scope=scope_of(request.user))
        if not resolve:
            return Response(task_entry(row))
        return Response(with_resolved(task_entry(row), objects.resolve_task_row(row)))

    @extend_schema(
        operation_id="set_task_state_store",
        parameters=[*COORDINATES, KEY],
        request=TaskBody,
        responses={204: None, **TASK_ERRORS},
        tags=["Task State Store"],
    )
    def put(self, request, dag_id, dag_run_id, task_id, key):
        def body():
            return body_fields(request, {"value", "expires_at"}, {"value"})

        scope = self.scope(request, dag_id, dag_run_id, task_id, body)
        data = self.body_of(scope, body)
        services.set_task_key(
            actor=actor(request), scope=scope, key=key, value=data["value"], expiry=parse_expires_at(data)
        )
        return no_content()

    @extend_schema(
        operation_id="patch_task_state_store",
        parameters=[*COORDINATES, KEY],
        request=PatchBody,
        responses={200: None, **TASK_ERRORS},
        tags=["Task State Store"],
    )
    def patch(self, request, dag_id, dag_run_id, task_id, key):
        def body():
            return body_fields(request, {"value"}, {"value"})

        scope = self.scope(request, dag_id, dag_run_id, task_id, body)
        data = self.body_of(scope, body)
        services.patch_task_key(
            actor=actor(request), ref=services.TaskKeyRef(scope=scope, key=key), value=data["value"]
        )
        return HttpResponse(b"null", content_type="application/json")  # Airflow answers 200 with a JSON null

    @extend_schema(
        operation_id="delete_task_state_store",
        parameters=[*COORDINATES, KEY, *DELETE_HEADERS],
        responses={204: None, **TASK_ERRORS},
        tags=["Task State Store"],
    )
    def delete(self, request, dag_id, dag_run_id, task_id, key):
        scope = self.scope(request, dag_id, dag_run_id, task_id)
        selection = services.TaskSelection(scope=scope, keys=(key,))  # needs the task instance, as in Airflow
        return no_content(services.delete_task_keys(actor=actor(request), selection=selection))


# Asset state ----------------------------------------------------------------------------------------
class AssetView(AirflowView):
    store = permissions.ASSET

    def initial(self, request, *args, **kwargs):
        """After authentication and permissions (as in Airflow), ``asset_id`` becomes an integer or a 422.
        ``self.kwargs`` is the dict the handler is called with."""
        super().initial(request, *args, **kwargs)
        self.kwargs["asset_id"] = path_int(self.kwargs["asset_id"], "asset_id")


class AssetStateStoreCollection(AssetView):
    @extend_schema(
        operation_id="list_asset_state_store",
        parameters=[ASSET_ID, *PAGING],
        responses={200: AssetCollection, **ERRORS},
        tags=["Asset State Store"],
    )
    def get(self, request, asset_id):
        limit = min(query_int(request, "limit", PAGE_LIMIT, 0), MAX_PAGE_LIMIT)
        offset = query_int(request, "offset", 0, 0, MAX_BIGINT)
        rows, total = selectors.asset_keys_page(asset_id, offset, limit, scope=scope_of(request.user))
        return Response({"asset_state_store": [asset_entry(r) for r in rows], "total_entries": total})

    @extend_schema(
        operation_id="clear_asset_state_store",
        parameters=[ASSET_ID, *DELETE_HEADERS],
        responses={204: None, **ERRORS},
        tags=["Asset State Store"],
    )
    def delete(self, request, asset_id):
        return no_content(services.clear_asset(actor=actor(request), asset_id=asset_id))


class AssetStateStoreItem(AssetView):
    @extend_schema(
        operation_id="get_asset_state_store",
        parameters=[ASSET_ID, KEY, RESOLVE],
        responses={200: AssetItem, **ERRORS},
        tags=["Asset State Store"],
    )
    def get(self, request, asset_id, key):
        resolve = query_bool(request, "resolve")
        row = selectors.asset_key_in(asset_id, key, scope=scope_of(request.user))
        if not resolve:
            return Response(asset_entry(row))
        return Response(with_resolved(asset_entry(row), objects.resolve_asset_row(row, row.asset)))

    @extend_schema(
        operation_id="set_asset_state_store",
        parameters=[ASSET_ID, KEY],
        request=AssetBody,
        responses={204: None, **ERRORS},
        tags=["Asset State Store"],
    )
    def put(self, request, asset_id, key):
        data = body_fields(request, {"value"}, {"value"})
        services.set_asset_key(actor=actor(request), asset_id=asset_id, key=key, value=data["value"])
        return no_content()

    @extend_schema(
        operation_id="delete_asset_state_store",
        parameters=[ASSET_ID, KEY, *DELETE_HEADERS],
        responses={204: None, **ERRORS},
        tags=["Asset State Store"],
    )
    def delete(self, request, asset_id, key):
        return no_content(services.delete_asset_keys(actor=actor(request), asset_id=asset_id, keys=[key]))
