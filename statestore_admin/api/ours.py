"""statestore-admin's own API, beyond Airflow's: search, statistics, GC dry run (``/api/statestore/v1``)."""

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions as drf_permissions
from rest_framework.response import Response
from rest_framework.views import APIView

from statestore_admin.state import gc, permissions, selectors
from statestore_admin.state.errors import Invalid
from statestore_admin.state.scopes import scope_of

from .airflow_v2 import ERRORS, MAX_INT, StorePermission, asset_entry, integer, iso, query_int
from .errors import RequestInvalid, error

SEARCH_PARAMS = [
    OpenApiParameter("key", str, description="Text to find in keys"),
    OpenApiParameter("match", str, enum=["", *selectors.MATCHES], default="contains", description="Empty: contains"),
    OpenApiParameter("cursor", str, description="next_cursor of the previous page (a bad one: the first page)"),
    OpenApiParameter("limit", integer(1, MAX_INT, 50), description="Larger values give 200 items"),
]
READ_ERRORS = {code: ERRORS[code] for code in (401, 403, 422)}


def _query_errors(exc: Invalid, params, names: dict[str, str] | None = None) -> RequestInvalid:
    """The domain's ``Invalid`` about query parameters as FastAPI reports them: an ``enum`` error lists the
    choices, anything else is a ``value_error``; ``loc`` names the parameter (``names``: field -> parameter)."""
    items = []
    for field, errors in exc.error_dict.items():
        name = (names or {}).get(field, field)
        value = params.get(name)
        for e in errors:
            if e.code == "enum":
                choices = ", ".join(e.params["choices"])
                items.append(error("enum", ["query", name], f"Input should be one of {choices}", value))
            else:
                items.append(error("value_error", ["query", name], f"Value error, {' '.join(e.messages)}", value))
    return RequestInvalid(*items)


def search_query(request) -> selectors.SearchQuery:
    try:
        return selectors.SearchQuery.from_params(request.query_params)
    except Invalid as exc:
        raise _query_errors(exc, request.query_params) from None


class OwnView(APIView):
    permission_classes = [StorePermission]
    store = permissions.TASK


class SearchTaskKeys(OwnView):
    @extend_schema(
        operation_id="search_task_keys",
        tags=["statestore-admin"],
        responses={200: OpenApiTypes.OBJECT, **READ_ERRORS},
        parameters=[
            *SEARCH_PARAMS,
            OpenApiParameter("dag_id", str),
            OpenApiParameter("run_id", str),
            OpenApiParameter("task_id", str),
            OpenApiParameter("status", str, enum=["", *selectors.STATUSES], description="Empty: any"),
        ],
    )
    def get(self, request):
        """Task keys across all DAGs, newest first, keyset-paginated (no total count)."""
        page = selectors.search_task_keys(
            search_query(request),
            timezone.now(),
            request.query_params.get("cursor"),
            query_int(request, "limit", 50, 1),
            scope=scope_of(request.user),
        )
        items = [
            {
                "id": k.id,
                "dag_id": k.dag_id,
                "run_id": k.run_id,
                "task_id": k.task_id,
                "map_index": k.map_index,
                "key": k.key,
                "preview": k.preview,
                "size": k.size,
                "is_ref": k.is_ref,
                "updated_at": iso(k.updated_at),
                "expires_at": iso(k.expires_at),
            }
            for k in page.items
        ]
        return Response({"items": items, "next_cursor": page.next_cursor})


class SearchAssetKeys(OwnView):
    store = permissions.ASSET

    @extend_schema(
        operation_id="search_asset_keys",
        tags=["statestore-admin"],
        responses={200: OpenApiTypes.OBJECT, **READ_ERRORS},
        parameters=[*SEARCH_PARAMS, OpenApiParameter("asset", str, description="Text in name or URI")],
    )
    def get(self, request):
        """Asset keys across all assets, keyset-paginated (no total count)."""
        query = search_query(request)
        page = selectors.search_asset_keys(
            query, request.query_params.get("cursor"), query_int(request, "limit", 50, 1), scope=scope_of(request.user)
        )
        items = [
            {
                "asset_id": k.asset_id,
                "asset_name": k.asset.name,
                "asset_uri": k.asset.uri,
                "key": k.key,
                "preview": k.preview,
                "size": k.size,
                "is_ref": k.is_ref,
                "updated_at": iso(k.updated_at),
                "last_updated_by": asset_entry(k)["last_updated_by"],
            }
            for k in page.items
        ]
        return Response({"items": items, "next_cursor": page.next_cursor})


class ViewsAnyStore(drf_permissions.BasePermission):
    """GET by a user who may view task state, asset state or both."""

    def has_permission(self, request, view):
        return bool(permissions.viewable_stores(request.user))


STATS_DESCRIPTION = """The overview's figures: totals (estimated above 100,000 rows on PostgreSQL), expiry and
configuration.

Open to users who may view either store; each store's figures only to those who may view it. Without view
on task state, `task_keys`, `task_keys_estimated`, `expired`, `expiring_24h`, `never_expire` and `gc_runs`
(garbage collection deletes task state only) are `null`; without view on asset state, `asset_keys` and
`asset_keys_estimated` are `null`. A user with a scope counts only their DAGs and assets, and gets no GC
runs (an empty list)."""


class Stats(OwnView):
    permission_classes = [ViewsAnyStore]

    @extend_schema(
        operation_id="state_store_stats",
        tags=["statestore-admin"],
        description=STATS_DESCRIPTION,
        responses={200: OpenApiTypes.OBJECT, 401: ERRORS[401], 403: ERRORS[403]},
    )
    def get(self, request):
        """The overview's figures: totals, expiry, configuration; each store's only with view on it."""
        stores = permissions.viewable_stores(request.user)
        overview = selectors.overview(timezone.now(), scope=scope_of(request.user), stores=tuple(stores))
        totals = overview.totals
        gc_runs = None
        if overview.gc_runs is not None:
            gc_runs = [
                {
                    "started_at": iso(r.started_at),
                    "finished_at": iso(r.finished_at),
                    "outcome": r.outcome,
                    "rows_deleted": r.rows_deleted,
                    "batches": r.batches,
                    "host": r.host,
                }
                for r in overview.gc_runs
            ]
        return Response(
            {
                "task_keys": totals.task_keys,
                "task_keys_estimated": totals.task_keys_estimated,
                "asset_keys": totals.asset_keys,
                "asset_keys_estimated": totals.asset_keys_estimated,
                "expired": overview.expired,
                "expiring_24h": overview.expiring,
                "never_expire": overview.never,
                "config": [{"option": v.name, "value": v.raw, "source": v.source} for v in overview.config],
                "config_error": overview.config_error,
                "backend_modes": [{"mode": mode, "explanation": text} for mode, text in overview.backend_modes],
                "gc_runs": gc_runs,
            }
        )


class GcDryRun(OwnView):
    @extend_schema(
        operation_id="gc_dry_run",
        tags=["statestore-admin"],
        responses={200: OpenApiTypes.OBJECT, **READ_ERRORS},
        parameters=[
            OpenApiParameter(
                "before",
                {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "string", "enum": [""]}]},
                description="Timezone-aware cutoff in the past (empty or absent: now)",
            ),
            OpenApiParameter(
                "dag_id", {"type": "string", "minLength": 1}, description="Only this DAG; repeat for several DAGs."
            ),
            OpenApiParameter("top", integer(1, MAX_INT, 10), description="Larger values give 100"),
        ],
    )
    def get(self, request):
        """What `state_store_clean` would delete now: the same summary as its --dry-run."""
        params = request.query_params
        try:
            plan = gc.GcPlan(
                cutoff=gc.parse_cutoff(params.get("before"), timezone.now()), dag_ids=tuple(params.getlist("dag_id"))
            )
        except Invalid as exc:
            raise _query_errors(exc, params, {"dag_ids": "dag_id", "cutoff": "before"}) from None
        summary = gc.dry_run(plan, top=min(query_int(request, "top", 10, 1), 100), scope=scope_of(request.user))
        return Response(summary.as_dict())
