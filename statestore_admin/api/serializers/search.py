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


class FoundKeyWriter(AssetStateStoreLastUpdatedBy):
    """Airflow's ``last_updated_by`` (``AssetStateStoreLastUpdatedBy``), and ours on top for a task writer that sat in
    a dynamic region on Airflow 3.4 (left out otherwise, with ``region_id``): its loop iteration and its path, as
    the pages name the writer (``selectors.with_writer_coordinates``). Airflow's own routes keep Airflow's shape."""

    coordinate = text(
        required=False,
        help_text='Airflow 3.4, with region_id: where the writer sat, as the pages show it ("loop refine · '
        "iteration 2 › map 1\"), in the request's language.",
    )
    iteration = serializers.IntegerField(
        allow_null=True,
        required=False,
        help_text="Airflow 3.4, with region_id: the innermost loop iteration the writer sat in, from 0 as Airflow "
        "numbers them (null: in no loop).",
    )

    def to_representation(self, row):
        writer = super().to_representation(row)
        coordinate = getattr(row, "writer_coordinate", None)
        if writer is not None and coordinate is not None and coordinate.steps:
            writer.update(coordinate=coordinate.label, iteration=coordinate.iteration)
        return writer


class AssetKeyFound(serializers.Serializer):
    asset_id = serializers.IntegerField()
    asset_name = text(source="asset.name")
    asset_uri = text(source="asset.uri")
    key = text()
    preview = text()
    size = serializers.IntegerField()
    is_ref = serializers.BooleanField()
    updated_at = when(allow_null=True)
    last_updated_by = FoundKeyWriter(allow_null=True, source="*")


class AssetKeySearchPage(SearchPage):
    items = AssetKeyFound(many=True)
