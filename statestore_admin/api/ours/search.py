"""Search across task and asset keys (``/api/statestore/v1/search/...``)."""

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from statestore_admin.access import permissions
from statestore_admin.access.scopes import scope_of
from statestore_admin.api.base import OwnView, integer
from statestore_admin.api.parsing import MAX_INT, parsed_query, query_int
from statestore_admin.api.serializers.errors import READ_ERRORS
from statestore_admin.api.serializers.search import AssetKeySearchPage, TaskKeySearchPage
from statestore_admin.state import search as searching

SEARCH_PARAMS = [
    OpenApiParameter("key", str, description="Text to find in keys"),
    OpenApiParameter("match", str, enum=["", *searching.MATCHES], default="contains", description="Empty: contains"),
    OpenApiParameter(
        "value", str, description="Text the value's JSON contains (ignoring case), within the same time budget"
    ),
    OpenApiParameter(
        "cursor",
        str,
        description="next_cursor of the previous page, or of a search cut short to continue it (a bad one: the "
        "first page)",
    ),
    OpenApiParameter(
        "before",
        str,
        description="prev_cursor of a page: the page before it (read backwards; a search cut short going "
        "backwards continues with its prev_cursor). Takes precedence over cursor",
    ),
    OpenApiParameter("limit", integer(1, MAX_INT, 50), description="Larger values give 200 items"),
]


def search_query(request) -> searching.SearchQuery:
    return parsed_query(request.query_params, searching.SearchQuery.from_params)


def page_args(request) -> dict:
    """The page a search answers: after ``cursor``, or before ``before``; ``limit`` items at most."""
    params = request.query_params
    return {"cursor": params.get("cursor"), "before": params.get("before"), "size": query_int(request, "limit", 50, 1)}


class SearchTaskKeys(OwnView):
    @extend_schema(
        operation_id="search_task_keys",
        tags=["statestore-admin"],
        responses={200: TaskKeySearchPage, **READ_ERRORS},
        parameters=[
            *SEARCH_PARAMS,
            OpenApiParameter("dag_id", str, description="Part of the DAG id, as on the DAG list (see dag_match)"),
            OpenApiParameter(
                "dag_match",
                str,
                enum=["", *searching.DAG_MATCHES],
                default="contains",
                description="Empty: contains (ignoring case)",
            ),
            OpenApiParameter("run_id", str),
            OpenApiParameter("task_id", str),
            OpenApiParameter("status", str, enum=["", *searching.STATUSES], description="Empty: any"),
        ],
    )
    def get(self, request):
        """Task keys across all DAGs, newest first, keyset-paginated both ways (no total count).

        `dag_id` is contained in the DAG id, ignoring case (`dag_match=prefix`: the ids starting with it,
        `dag_match=exact`: one DAG); `run_id` and `task_id` are exact; an `asset` filter
        finds no task key (task keys have no asset). A key or value search (any `match`) without `dag_id` is served
        by no index: it reads the table by ranges of ids and stops after `SEARCH_TIME_BUDGET_SECONDS` (2 s by
        default): `cut_short` is then true, `items` are the matches found so far (fewer than `limit`, maybe none),
        `scanned_to` is the last id searched, and `next_cursor` (or, for a page read with `before`, `prev_cursor`)
        continues the search (every match is found once). With a `dag_id` the search is an index range, without a
        budget."""
        page = searching.search_task_keys(
            search_query(request), timezone.now(), scope=scope_of(request.user), **page_args(request)
        )
        return Response(TaskKeySearchPage(page).data)


class SearchAssetKeys(OwnView):
    store = permissions.ASSET

    @extend_schema(
        operation_id="search_asset_keys",
        tags=["statestore-admin"],
        responses={200: AssetKeySearchPage, **READ_ERRORS},
        parameters=[*SEARCH_PARAMS, OpenApiParameter("asset", str, description="Text in name or URI")],
    )
    def get(self, request):
        """Asset keys across all assets, keyset-paginated both ways (no total count).

        A `dag_id`, `run_id`, `task_id` or `status` filter finds no asset key (asset keys have none). A key or
        value search (any `match`) reads the table by ranges of asset ids (no index leads with the key) and stops
        after `SEARCH_TIME_BUDGET_SECONDS` (2 s by default): `cut_short` is then true, `items` are the matches
        found so far, `scanned_to` is the last asset id searched, and `next_cursor` (or, for a page read with
        `before`, `prev_cursor`) continues the search."""
        page = searching.search_asset_keys(search_query(request), scope=scope_of(request.user), **page_args(request))
        return Response(AssetKeySearchPage(page).data)
