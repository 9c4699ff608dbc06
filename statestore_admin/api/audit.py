"""The audit trail and undo over the API (``/api/statestore/v1``): list and read audit events, restore
one event, restore an export document. The same selectors and services as the Audit page.

Only events of stores the caller may ``view`` are shown; a restore needs ``add``, ``change`` and
``delete`` on the store it writes (the service decides, per store). Errors in Airflow's shape (``errors``).
"""

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import permissions as drf_permissions
from rest_framework import serializers
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from statestore_admin.access import policies
from statestore_admin.access.actors import API, Actor
from statestore_admin.access.scopes import scope_of
from statestore_admin.api.airflow_v2 import (
    MAX_INT,
    BodyRequiredSchema,
    LenientJSONParser,
    decoded,
    integer,
    iso,
    object_fields,
    query_bool,
    query_int,
)
from statestore_admin.api.errors import ConflictBody, ErrorBody, RequestInvalid, error
from statestore_admin.audit import events as audit
from statestore_admin.core.pagination import MAX_PAGE_SIZE, encode_cursor
from statestore_admin.exports import documents as exports
from statestore_admin.exports import restore as restores
from statestore_admin.records.models import AuditEvent, AuditKey
from statestore_admin.state import selectors

PAGE_LIMIT, MAX_LIMIT = 50, 200
OPTIONAL_DATETIME = {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "string", "enum": [""]}]}
LIST_KEYS = 100  # keys shown per event in the list (keys_truncated beyond)
DETAIL_KEYS = 1000  # keys per answer of one event; keys_next_cursor for the rest
NUL_MESSAGE = "Value error, NUL characters (\\x00) are not allowed"


def viewable_event(request, event_id: int) -> AuditEvent:
    """The event, if the caller may view its store (403 otherwise, as the Audit page answers)."""
    return selectors.viewable_audit_event(event_id, user=request.user)


class AuditPermission(drf_permissions.BasePermission):
    """Reading: ``view`` on a store. Restoring: ``add``, ``change`` and ``delete`` on a store (the service
    checks each store it writes)."""

    def has_permission(self, request, view):
        if request.method in drf_permissions.SAFE_METHODS:
            return bool(policies.viewable_stores(request.user))
        return bool(policies.restorable_stores(request.user))


def actor(request) -> Actor:
    return Actor.from_request(request, via=API)


# Shapes -----------------------------------------------------------------------------------------------
def _state(value: str | None, expires_at, asset: bool) -> dict | None:
    if value is None:  # no row
        return None
    state = {"value": decoded(value)}
    if not asset:
        state["expires_at"] = iso(expires_at)
    return state


def key_entry(key: AuditKey) -> dict:
    asset = key.asset_id is not None
    return {
        "key": key.key,
        "map_index": key.map_index,
        "region_id": str(key.region_id) if key.region_id is not None else None,
        "dag_id": key.dag_id,
        "run_id": key.run_id,
        "task_id": key.task_id,
        "asset_id": key.asset_id,
        "before": _state(key.before_value, key.before_expires_at, asset),
        "after": _state(key.after_value, key.after_expires_at, asset),
        "truncated": key.truncated,
    }


def event_entry(event: AuditEvent, keys: list[AuditKey], keys_next_cursor: str | None) -> dict:
    return {
        **audit.event_entry(event),
        "keys": [key_entry(k) for k in keys],
        "keys_truncated": keys_next_cursor is not None,
        "keys_next_cursor": keys_next_cursor,
    }


def event_keys(event: AuditEvent, cursor: str | None, limit: int) -> tuple[list[AuditKey], str | None]:
    """Up to ``limit`` keys of the event after ``cursor`` (pages of the selector's size), and the cursor
    of the rest (None when these are the last)."""
    keys: list[AuditKey] = []
    while len(keys) < limit:
        page = selectors.audit_keys(event, cursor, min(MAX_PAGE_SIZE, limit - len(keys)))
        keys += page.items
        cursor = page.next_cursor
        if cursor is None:
            break
    return keys, cursor


def outcome_entry(outcome: restores.RestoreOutcome) -> dict:
    return outcome.as_dict()


def audit_query(request) -> selectors.AuditQuery:
    return selectors.AuditQuery.from_params(request.query_params)


def listed_keys(keys: list[AuditKey]) -> tuple[list[AuditKey], str | None]:
    """An event's first keys for a list entry (``selectors.first_keys_of`` gives one more when there are
    others), and the ``keys_cursor`` of the rest."""
    if len(keys) <= LIST_KEYS:
        return keys, None
    return keys[:LIST_KEYS], encode_cursor([keys[LIST_KEYS - 1].pk])


def query_limit(request) -> int:
    limit = query_int(request, "limit", PAGE_LIMIT, 1)
    if limit > MAX_LIMIT:
        raise RequestInvalid(
            error(
                "less_than_equal",
                ["query", "limit"],
                f"Input should be less than or equal to {MAX_LIMIT}",
                request.query_params["limit"],
                ctx={"le": MAX_LIMIT},
            )
        )
    return limit


# Documentation of the shapes (drf-spectacular) --------------------------------------------------------
REGION_HELP = (
    "Airflow 3.4's dynamic region of the task instance (map_index is then its index there); "
    "null outside any region, as for every event recorded on Airflow 3.3."
)
KeyState = inline_serializer(
    "AuditKeyState",
    {
        "value": serializers.JSONField(help_text="The decoded JSON value (the raw text if it is not JSON)."),
        "expires_at": serializers.DateTimeField(
            allow_null=True, required=False, help_text="Task keys only (null: never expires)."
        ),
    },
    allow_null=True,
)
KeyEntry = inline_serializer(
    "AuditKeyResponse",
    {
        "key": serializers.CharField(),
        "map_index": serializers.IntegerField(allow_null=True),
        "region_id": serializers.UUIDField(allow_null=True, help_text=REGION_HELP),
        "dag_id": serializers.CharField(allow_null=True),
        "run_id": serializers.CharField(allow_null=True),
        "task_id": serializers.CharField(allow_null=True),
        "asset_id": serializers.IntegerField(allow_null=True),
        "before": KeyState,
        "after": KeyState.__class__(allow_null=True),
        "truncated": serializers.BooleanField(help_text="A value was kept truncated; not restorable."),
    },
)
EventEntry = inline_serializer(
    "AuditEventResponse",
    {
        "id": serializers.IntegerField(),
        "at": serializers.DateTimeField(),
        "finished_at": serializers.DateTimeField(allow_null=True),
        "outcome": serializers.ChoiceField(["done", "failed", "pending", "unknown"]),
        "actor": serializers.CharField(),
        "token": inline_serializer(
            "AuditEventToken", {"id": serializers.IntegerField(), "name": serializers.CharField()}, allow_null=True
        ),
        "os_user": serializers.CharField(),
        "host": serializers.CharField(),
        "via": serializers.ChoiceField(AuditEvent.Via.values),
        "action": serializers.ChoiceField(AuditEvent.Action.values),
        "store": serializers.CharField(),
        "dag_id": serializers.CharField(allow_null=True),
        "run_id": serializers.CharField(allow_null=True),
        "task_id": serializers.CharField(allow_null=True),
        "map_index": serializers.IntegerField(allow_null=True),
        "region_id": serializers.UUIDField(allow_null=True, help_text=REGION_HELP),
        "asset_id": serializers.IntegerField(allow_null=True),
        "asset_name": serializers.CharField(),
        "asset_uri": serializers.CharField(),
        "key_count": serializers.IntegerField(),
        "details": serializers.JSONField(),
        "error": serializers.CharField(),
        "restored_from": serializers.IntegerField(allow_null=True),
        "keys": KeyEntry.__class__(many=True),
        "keys_truncated": serializers.BooleanField(),
        "keys_next_cursor": serializers.CharField(
            allow_null=True, help_text="Pass as keys_cursor to GET /audit-events/{id} for the next keys."
        ),
    },
)
EventPage = inline_serializer(
    "AuditEventPage",
    {"items": EventEntry.__class__(many=True), "next_cursor": serializers.CharField(allow_null=True)},
)
RestoreResult = inline_serializer(
    "RestoreResponse",
    {
        "restored": serializers.IntegerField(),
        "unchanged": serializers.IntegerField(),
        "kept": serializers.ListField(child=serializers.DictField()),
        "missing": serializers.ListField(
            child=serializers.DictField(), help_text="Keys whose DAG run or asset no longer exists: not restored."
        ),
        "events": serializers.ListField(child=serializers.IntegerField()),
    },
)
ConflictDetail = ConflictBody
Detail = ErrorBody
RestoreBody = inline_serializer(
    "RestoreEventBody",
    {
        "resolutions": serializers.DictField(
            child=serializers.ChoiceField([restores.KEEP, restores.OVERWRITE]),
            required=False,
            help_text='Per conflicting key (the "id" of a conflict): "keep" its current value or "overwrite" it.',
        )
    },
)
ExportDocument = inline_serializer(
    "KeyExportDocument",
    {
        "format": serializers.ChoiceField(["statestore-admin/keys"]),
        "version": serializers.ChoiceField([1]),
        "keys": serializers.ListField(
            child=serializers.DictField(),
            help_text='{"store": "task", dag_id, run_id, task_id, map_index, region_id (null or absent: outside '
            "any region), key, value, expires_at} or "
            '{"store": "asset", asset_id, key, value}',
        ),
    },
)
Upload = inline_serializer("KeyExportUpload", {"file": serializers.FileField(help_text="An export document (JSON).")})
ERRORS = {401: Detail, 403: Detail, 422: Detail, 429: Detail}
OVERWRITE = OpenApiParameter(
    "overwrite", bool, default=False, description="Overwrite keys written again since (otherwise 409)."
)
ID = OpenApiParameter("id", int, OpenApiParameter.PATH, description="The audit event's id.")
TAGS = ["statestore-admin"]


class AuditView(APIView):
    permission_classes = [AuditPermission]
    error_locations = {name: ["query", name] for name in selectors.AUDIT_FILTERS} | {"event": ["path", "id"]}


class AuditEvents(AuditView):
    @extend_schema(
        operation_id="list_audit_events",
        tags=TAGS,
        responses={200: EventPage, **ERRORS},
        parameters=[
            OpenApiParameter("actor", str, description="User name, or os_user@host for commands"),
            OpenApiParameter("action", str, enum=["", *AuditEvent.Action.values], description="Empty: any"),
            OpenApiParameter("via", str, enum=["", *AuditEvent.Via.values], description="Empty: any"),
            OpenApiParameter("dag_id", str),
            OpenApiParameter("run_id", str),
            OpenApiParameter("task_id", str),
            OpenApiParameter("asset_id", integer(1, MAX_INT)),
            OpenApiParameter("key", str, description="Events that changed this key (exact)"),
            OpenApiParameter("since", OPTIONAL_DATETIME, description="Timezone-aware; at or after (empty: any)"),
            OpenApiParameter("until", OPTIONAL_DATETIME, description="Timezone-aware; before (empty: any)"),
            OpenApiParameter("cursor", str, description="next_cursor of the previous page"),
            OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": PAGE_LIMIT}),
        ],
    )
    def get(self, request):
        """Audit events, newest first, keyset-paginated (no total count); each with its first 100 keys."""
        query, limit = audit_query(request), query_limit(request)
        stores = policies.viewable_stores(request.user)
        page = selectors.audit_events(
            query, stores, request.query_params.get("cursor"), limit, scope=scope_of(request.user)
        )
        first_keys = selectors.first_keys_of(page.items, LIST_KEYS)
        items = [event_entry(event, *listed_keys(first_keys[event.pk])) for event in page.items]
        return Response({"items": items, "next_cursor": page.next_cursor})


class AuditEventDetail(AuditView):
    @extend_schema(
        operation_id="get_audit_event",
        tags=TAGS,
        responses={200: EventEntry, 404: Detail, **ERRORS},
        parameters=[
            ID,
            OpenApiParameter("keys_cursor", str, description="keys_next_cursor of the previous answer"),
        ],
    )
    def get(self, request, id):
        """One event with its keys (up to 1,000 per answer; keys_next_cursor for more)."""
        event = viewable_event(request, id)
        return Response(event_entry(event, *event_keys(event, request.query_params.get("keys_cursor"), DETAIL_KEYS)))


class RestoreEvent(AuditView):
    parser_classes = [LenientJSONParser, FormParser, MultiPartParser]  # an empty form post is no body

    @extend_schema(
        operation_id="restore_audit_event",
        tags=TAGS,
        parameters=[ID, OVERWRITE],
        request={"application/json": RestoreBody},
        responses={200: RestoreResult, 404: Detail, 409: ConflictDetail, **ERRORS},
    )
    def post(self, request, id):
        """Bring the event's keys back to their state before it. A key written again since is a 409
        listing both values, unless overwrite=true or a resolution decides it."""
        event = viewable_event(request, id)
        outcome = restores.restore_event(
            actor=actor(request),
            event_id=event.pk,
            overwrite=query_bool(request, "overwrite"),
            resolutions=resolutions(request.data),
        )
        return Response(outcome_entry(outcome))


def resolutions(data) -> dict[str, str]:
    if data is None:
        return {}
    data = object_fields(data, {"resolutions"}, set())
    chosen = data.get("resolutions", {})
    if not isinstance(chosen, dict):
        raise RequestInvalid(error("dict_type", ["body", "resolutions"], "Input should be a valid dictionary", chosen))
    choices = (restores.KEEP, restores.OVERWRITE)
    problems = [
        error("enum", ["body", "resolutions", k], "Input should be 'keep' or 'overwrite'", v)
        for k, v in chosen.items()
        if v not in choices
    ]
    if problems:
        raise RequestInvalid(*problems)
    return dict(chosen)


class RestoreDocument(AuditView):
    schema = BodyRequiredSchema()
    parser_classes = [LenientJSONParser, MultiPartParser]

    @extend_schema(
        operation_id="restore_key_export",
        tags=TAGS,
        parameters=[OVERWRITE],
        request={"application/json": ExportDocument, "multipart/form-data": Upload},
        responses={200: RestoreResult, 409: ConflictDetail, **ERRORS},
    )
    def post(self, request):
        """Restore the keys of an export document (the JSON body, or a multipart upload in the field
        "file"): each key gets the value and expiry in the document. Nothing changes if the document
        is invalid (422) or a key holds another value now (409, unless overwrite=true)."""
        upload = request.content_type.startswith("multipart/form-data")
        where = ["body", "file"] if upload else ["body"]
        self.error_locations = {**self.error_locations, "file": where}
        if not upload and not int(request.META.get("CONTENT_LENGTH") or 0):
            raise RequestInvalid(error("missing", ["body"], "Field required", None))
        document = uploaded_document(request) if upload else request.data
        if document is None:  # only white space
            raise RequestInvalid(error("missing", ["body"], "Field required", None))
        refuse_nul(document, where)
        outcome = restores.restore_document(
            actor=actor(request), document=document, overwrite=query_bool(request, "overwrite")
        )
        return Response(outcome_entry(outcome))


def uploaded_document(request):
    """The upload's JSON, read as the Audit page and the command read a file (``exports.read_document``)."""
    upload = request.FILES.get("file")
    if upload is None:
        raise RequestInvalid(error("missing", ["body", "file"], "Field required", None))
    return exports.read_document(upload.read())


def refuse_nul(document, where: list) -> None:
    """NUL in a name (a DAG, run, task or key) could not even be looked up in PostgreSQL: 422 before
    anything is read. Values may hold it: they are stored JSON-encoded."""
    entries = document.get("keys") if isinstance(document, dict) else None
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(entry, dict):
            continue
        for name, value in entry.items():
            if name != "value" and isinstance(value, str) and "\x00" in value:
                raise RequestInvalid(error("value_error", [*where, "keys", index, name], NUL_MESSAGE, None))
