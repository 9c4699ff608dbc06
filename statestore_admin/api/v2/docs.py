"""The OpenAPI description of Airflow's ``/api/v2`` state-store routes: their parameters, request bodies and
our response headers (the bodies they answer are ``serializers.state_store``)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

from statestore_admin.api.base import integer
from statestore_admin.api.parsing import MAX_BIGINT, MAX_INT
from statestore_admin.core.values import DEFAULT, MAX_DEPTH

PAGE_LIMIT, MAX_PAGE_LIMIT = 50, 100  # Airflow's [api] fallback_page_limit and maximum_page_limit
AUDIT_EVENT_HEADER = "X-Statestore-Audit-Event"
OBJECTS_DELETED_HEADER = "X-Statestore-Objects-Deleted"
OBJECTS_FAILED_HEADER = "X-Statestore-Objects-Failed"

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
