"""Airflow's asset state-store routes (``/api/v2/assets/{asset_id}/state-store``)."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from statestore_admin.access.scopes import scope_of
from statestore_admin.api.base import actor
from statestore_admin.api.parsing import body_fields, query_bool
from statestore_admin.api.serializers import state_store as shapes
from statestore_admin.api.serializers.errors import ERRORS
from statestore_admin.api.v2.base import AssetView, no_content, page_limit, page_offset
from statestore_admin.api.v2.docs import ASSET_ID, DELETE_HEADERS, KEY, PAGING, RESOLVE, AssetBody
from statestore_admin.objects import store as objects
from statestore_admin.state import sources


class AssetStateStoreCollection(AssetView):
    @extend_schema(
        operation_id="list_asset_state_store",
        parameters=[ASSET_ID, *PAGING],
        responses={200: shapes.AssetStateStoreCollectionResponse, **ERRORS},
        tags=["Asset State Store"],
    )
    def get(self, request, asset_id):
        limit, offset = page_limit(request), page_offset(request)
        rows, total = sources.current().asset_keys_page(asset_id, offset, limit, scope=scope_of(request.user))
        body = {"asset_state_store": rows, "total_entries": total}
        return Response(shapes.AssetStateStoreCollectionResponse(body).data)

    @extend_schema(
        operation_id="clear_asset_state_store",
        parameters=[ASSET_ID, *DELETE_HEADERS],
        responses={204: None, **ERRORS},
        tags=["Asset State Store"],
    )
    def delete(self, request, asset_id):
        return no_content(sources.current().clear_asset(actor=actor(request), asset_id=asset_id))


class AssetStateStoreItem(AssetView):
    @extend_schema(
        operation_id="get_asset_state_store",
        parameters=[ASSET_ID, KEY, RESOLVE],
        responses={200: shapes.AssetStateStoreItemResponse, **ERRORS},
        tags=["Asset State Store"],
    )
    def get(self, request, asset_id, key):
        resolve = query_bool(request, "resolve")
        row = sources.current().asset_key(asset_id, key, scope=scope_of(request.user))
        if not resolve:
            return Response(shapes.AssetStateStoreResponse(row).data)
        resolution = shapes.Resolution(row, objects.resolve_asset_row(row, row.asset))
        return Response(shapes.AssetStateStoreItemResponse(resolution).data)

    @extend_schema(
        operation_id="set_asset_state_store",
        parameters=[ASSET_ID, KEY],
        request=AssetBody,
        responses={204: None, **ERRORS},
        tags=["Asset State Store"],
    )
    def put(self, request, asset_id, key):
        data = body_fields(request, {"value"}, {"value"})
        sources.current().set_asset_key(actor=actor(request), asset_id=asset_id, key=key, value=data["value"])
        return no_content()

    @extend_schema(
        operation_id="delete_asset_state_store",
        parameters=[ASSET_ID, KEY, *DELETE_HEADERS],
        responses={204: None, **ERRORS},
        tags=["Asset State Store"],
    )
    def delete(self, request, asset_id, key):
        return no_content(sources.current().delete_asset_key(actor=actor(request), asset_id=asset_id, key=key))
