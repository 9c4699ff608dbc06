"""The search pages (``/api/statestore/v1/search/...``): ``state.search``'s pages and found keys."""

from rest_framework import serializers

from statestore_admin.api.serializers.fields import text, when
from statestore_admin.api.serializers.state_store import AssetStateStoreLastUpdatedBy


class SearchPage(serializers.Serializer):
    next_cursor = text(allow_null=True)
    prev_cursor = text(allow_null=True)
    cut_short = serializers.BooleanField()
    scanned_to = serializers.IntegerField(allow_null=True)

    def get_fields(self):
        """A page's ``items`` (each subclass's own) come first."""
        fields = super().get_fields()
        return {"items": fields.pop("items"), **fields}


class TaskKeyFound(serializers.Serializer):
    id = serializers.IntegerField()
    dag_id = text()
    run_id = text()
    task_id = text()
    map_index = serializers.IntegerField()
    key = text()
    preview = text()
    size = serializers.IntegerField()
    is_ref = serializers.BooleanField()
    updated_at = when(allow_null=True)
    expires_at = when(allow_null=True)


class TaskKeySearchPage(SearchPage):
    items = TaskKeyFound(many=True)


class AssetKeyFound(serializers.Serializer):
    asset_id = serializers.IntegerField()
    asset_name = text(source="asset.name")
    asset_uri = text(source="asset.uri")
    key = text()
    preview = text()
    size = serializers.IntegerField()
    is_ref = serializers.BooleanField()
    updated_at = when(allow_null=True)
    last_updated_by = AssetStateStoreLastUpdatedBy(allow_null=True, source="*")


class AssetKeySearchPage(SearchPage):
    items = AssetKeyFound(many=True)
