"""The audit trail and undo over the API (``/api/statestore/v1``): list and read audit events, restore
one event, restore an export document. The same selectors and services as the Audit page.

Only events of stores the caller may ``view`` are shown; a restore needs ``add``, ``change`` and
``delete`` on the store it writes (the service decides, per store). Errors in Airflow's shape (``errors``).
"""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from statestore_admin.access import policies
from statestore_admin.access.scopes import scope_of
from statestore_admin.api.base import BodyRequiredSchema, actor, integer
from statestore_admin.api.errors import RequestInvalid, error
from statestore_admin.api.parsing import MAX_INT, LenientJSONParser, object_fields, query_bool, query_int
from statestore_admin.api.permissions import AuditPermission
from statestore_admin.api.serializers import audit as shapes
from statestore_admin.api.serializers.errors import READ_ERRORS, ConflictBody, Detail
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


def event_entry(event: AuditEvent, keys: list[AuditKey], keys_next_cursor: str | None) -> dict:
    """The event as the audit download writes it (``audit.event_entry``), with its keys."""
    entry = audit.event_entry(event)
    keys = selectors.with_coordinates(keys)  # each task key's loop iteration, as the pages name it
    entry |= {"keys": keys, "keys_truncated": keys_next_cursor is not None, "keys_next_cursor": keys_next_cursor}
    return entry


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


def audit_query(request) -> selectors.AuditQuery:
    return selectors.AuditQuery.from_params(request.query_params)


def listed_keys(keys: list[AuditKey]) -> tuple[list[AuditKey], str | None]:
    """An event's first keys for a list entry (``selectors.first_keys_of`` gives one more when there are
    others), and the ``keys_cursor`` of the rest."""
    if len(keys) <= LIST_KEYS:
        return keys, None
    return keys[:LIST_KEYS], encode_cursor([keys[LIST_KEYS - 1].pk])


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
        responses={200: shapes.AuditEventPage, **READ_ERRORS},
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
        query, limit = audit_query(request), query_int(request, "limit", PAGE_LIMIT, 1, MAX_LIMIT)
        stores = policies.viewable_stores(request.user)
        page = selectors.audit_events(
            query, stores, request.query_params.get("cursor"), limit, scope=scope_of(request.user)
        )
        first_keys = selectors.first_keys_of(page.items, LIST_KEYS)
        items = [event_entry(event, *listed_keys(first_keys[event.pk])) for event in page.items]
        return Response(shapes.AuditEventPage({"items": items, "next_cursor": page.next_cursor}).data)


class AuditEventDetail(AuditView):
    @extend_schema(
        operation_id="get_audit_event",
        tags=TAGS,
        responses={200: shapes.AuditEventResponse, 404: Detail, **READ_ERRORS},
        parameters=[
            ID,
            OpenApiParameter("keys_cursor", str, description="keys_next_cursor of the previous answer"),
        ],
    )
    def get(self, request, id):
        """One event with its keys (up to 1,000 per answer; keys_next_cursor for more)."""
        event = viewable_event(request, id)
        keys = event_keys(event, request.query_params.get("keys_cursor"), DETAIL_KEYS)
        return Response(shapes.AuditEventResponse(event_entry(event, *keys)).data)


class RestoreEvent(AuditView):
    parser_classes = [LenientJSONParser, FormParser, MultiPartParser]  # an empty form post is no body

    @extend_schema(
        operation_id="restore_audit_event",
        tags=TAGS,
        parameters=[ID, OVERWRITE],
        request={"application/json": shapes.RestoreBody},
        responses={200: shapes.RestoreResponse, 404: Detail, 409: ConflictBody, **READ_ERRORS},
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
        return Response(shapes.RestoreResponse(outcome.as_dict()).data)


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
        request={"application/json": shapes.ExportDocument, "multipart/form-data": shapes.Upload},
        responses={200: shapes.RestoreResponse, 409: ConflictBody, **READ_ERRORS},
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
        return Response(shapes.RestoreResponse(outcome.as_dict()).data)


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
