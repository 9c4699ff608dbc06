"""The bases of Airflow's ``/api/v2`` state-store views: a task route's address (its coordinates, as Airflow
3.3 or 3.4 resolves them), an asset route's id, and Airflow's empty 204 with our headers."""

from django.http import HttpResponse
from rest_framework.views import APIView

from statestore_admin.access import permissions
from statestore_admin.access.scopes import scope_of
from statestore_admin.api.base import BodyRequiredSchema
from statestore_admin.api.errors import DetailInvalid, RequestInvalid
from statestore_admin.api.parsing import (
    MAX_BIGINT,
    MIN_BIGINT,
    LenientJSONParser,
    all_parsed,
    errors_of,
    path_int,
    query_bool,
    query_int,
    query_uuid,
)
from statestore_admin.api.permissions import StorePermission
from statestore_admin.api.v2.docs import (
    AUDIT_EVENT_HEADER,
    MAX_PAGE_LIMIT,
    OBJECTS_DELETED_HEADER,
    OBJECTS_FAILED_HEADER,
    PAGE_LIMIT,
)
from statestore_admin.state import selectors, services
from statestore_admin.state.selectors import TaskAddress


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


class AirflowView(APIView):
    schema = BodyRequiredSchema()
    parser_classes = [LenientJSONParser]
    permission_classes = [StorePermission]
    error_locations = {"key": ["path", "key"], "value": ["body", "value"], "expires_at": ["body", "expires_at"]}


class TaskView(AirflowView):
    store = permissions.TASK

    def initial(self, request, *args, **kwargs):
        """After authentication and permissions, a DAG out of the user's scope is 403 whatever the rest of
        the request, as Airflow's auth manager answers per DAG (whether the DAG exists or not)."""
        super().initial(request, *args, **kwargs)
        scope_of(request.user).require_dag(self.kwargs["dag_id"])

    def address(self, request, dag_id, dag_run_id, task_id, *after) -> TaskAddress:
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

    def clear_address(self, request, dag_id, dag_run_id, task_id) -> tuple[TaskAddress, bool]:
        """A clear's address and whether it takes every index of the address's region: on 3.4,
        ``all_map_indices`` clears one task's expansion (``selectors.clears_expansion``)."""
        if not selectors.addresses_regions():
            return self.address(request, dag_id, dag_run_id, task_id), query_bool(request, "all_map_indices")
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


class AssetView(AirflowView):
    store = permissions.ASSET

    def initial(self, request, *args, **kwargs):
        """After authentication and permissions (as in Airflow), ``asset_id`` becomes an integer or a 422.
        ``self.kwargs`` is the dict the handler is called with."""
        super().initial(request, *args, **kwargs)
        self.kwargs["asset_id"] = path_int(self.kwargs["asset_id"], "asset_id")


def page_limit(request) -> int:
    """Airflow's ``limit``: larger values give its maximum page."""
    return min(query_int(request, "limit", PAGE_LIMIT, 0), MAX_PAGE_LIMIT)


def page_offset(request) -> int:
    return query_int(request, "offset", 0, 0, MAX_BIGINT)
