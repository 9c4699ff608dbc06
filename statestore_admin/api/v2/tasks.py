"""Airflow's task state-store routes (``/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/
state-store``)."""

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from statestore_admin.access.scopes import scope_of
from statestore_admin.api.base import actor
from statestore_admin.api.errors import RequestInvalid
from statestore_admin.api.parsing import body_fields, parse_expires_at, query_bool
from statestore_admin.api.serializers import state_store as shapes
from statestore_admin.api.serializers.errors import TASK_ERRORS
from statestore_admin.api.v2.base import TaskView, no_content, page_limit, page_offset
from statestore_admin.api.v2.docs import COORDINATES, DELETE_HEADERS, KEY, PAGING, RESOLVE, PatchBody, TaskBody
from statestore_admin.objects import store as objects
from statestore_admin.state import selectors, sources
from statestore_admin.state.selectors import TaskAddress


class TaskStateStoreCollection(TaskView):
    @extend_schema(
        operation_id="list_task_state_store",
        parameters=[*COORDINATES, *PAGING],
        responses={200: shapes.TaskStateStoreCollectionResponse, **TASK_ERRORS},
        tags=["Task State Store"],
    )
    def get(self, request, dag_id, dag_run_id, task_id):
        def limit():
            return page_limit(request)

        def offset():
            return page_offset(request)

        address = self.address(request, dag_id, dag_run_id, task_id, limit, offset)
        limit, offset = limit(), offset()
        rows, total = sources.current().task_keys_page(address, offset, limit, scope=scope_of(request.user))
        return Response(
            shapes.TaskStateStoreCollectionResponse({"task_state_store": rows, "total_entries": total}).data
        )

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
        address, all_map_indices = self.clear_address(request, dag_id, dag_run_id, task_id)
        outcome = sources.current().clear_task_instance(
            actor=actor(request), address=address, all_map_indices=all_map_indices
        )
        return no_content(outcome)


class TaskStateStoreItem(TaskView):
    def write(self, request, dag_id, dag_run_id, task_id, allowed: set[str]) -> tuple[TaskAddress, dict]:
        """A write's address and body (``value`` and at most the ``allowed`` fields). On Airflow 3.4 a missing
        task instance is answered before a malformed body (its check is a dependency, the body the route's
        own parameter): one more query, on refusals only."""

        def body():
            return body_fields(request, allowed, {"value"})

        address = self.address(request, dag_id, dag_run_id, task_id, body)
        try:
            return address, body()
        except RequestInvalid:
            if selectors.addresses_regions():
                sources.current().require_task_instance(address)
            raise

    @extend_schema(
        operation_id="get_task_state_store",
        parameters=[*COORDINATES, KEY, RESOLVE],
        responses={200: shapes.TaskStateStoreItemResponse, **TASK_ERRORS},
        tags=["Task State Store"],
    )
    def get(self, request, dag_id, dag_run_id, task_id, key):
        address = self.address(request, dag_id, dag_run_id, task_id)
        resolve = query_bool(request, "resolve")
        row = sources.current().task_key(address, key, scope=scope_of(request.user))
        if not resolve:
            return Response(shapes.TaskStateStoreResponse(row).data)
        resolution = shapes.Resolution(row, objects.resolve_task_row(row))
        return Response(shapes.TaskStateStoreItemResponse(resolution).data)

    @extend_schema(
        operation_id="set_task_state_store",
        parameters=[*COORDINATES, KEY],
        request=TaskBody,
        responses={204: None, **TASK_ERRORS},
        tags=["Task State Store"],
    )
    def put(self, request, dag_id, dag_run_id, task_id, key):
        address, data = self.write(request, dag_id, dag_run_id, task_id, {"value", "expires_at"})
        sources.current().set_task_key(
            actor=actor(request), address=address, key=key, value=data["value"], expiry=parse_expires_at(data)
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
        address, data = self.write(request, dag_id, dag_run_id, task_id, {"value"})
        sources.current().patch_task_key(actor=actor(request), address=address, key=key, value=data["value"])
        return HttpResponse(b"null", content_type="application/json")  # Airflow answers 200 with a JSON null

    @extend_schema(
        operation_id="delete_task_state_store",
        parameters=[*COORDINATES, KEY, *DELETE_HEADERS],
        responses={204: None, **TASK_ERRORS},
        tags=["Task State Store"],
    )
    def delete(self, request, dag_id, dag_run_id, task_id, key):
        address = self.address(request, dag_id, dag_run_id, task_id)
        return no_content(sources.current().delete_task_key(actor=actor(request), address=address, key=key))
