"""The response bodies of our own endpoints (``/api/statestore/v1``), one serializer per shape: the OpenAPI
document describes them with these, and the fuzz run checks every answer against that description."""

from rest_framework import serializers

from .airflow_v2 import Writer


def text(**kwargs):
    return serializers.CharField(**kwargs)


def when(**kwargs):
    return serializers.DateTimeField(**kwargs)


class SearchPage(serializers.Serializer):
    next_cursor = text(allow_null=True)
    prev_cursor = text(allow_null=True)
    cut_short = serializers.BooleanField()
    scanned_to = serializers.IntegerField(allow_null=True)


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
    asset_name = text()
    asset_uri = text()
    key = text()
    preview = text()
    size = serializers.IntegerField()
    is_ref = serializers.BooleanField()
    updated_at = when(allow_null=True)
    last_updated_by = Writer.__class__(allow_null=True)


class AssetKeySearchPage(SearchPage):
    items = AssetKeyFound(many=True)


FIGURES = ("task_keys", "asset_keys", "expired", "expiring_24h", "never_expire")
HOW = ("exact", "estimated", "capped", "snapshot")


class SnapshotFigures(serializers.Serializer):
    task_keys = serializers.IntegerField(allow_null=True)
    asset_keys = serializers.IntegerField(allow_null=True)
    expired = serializers.IntegerField(allow_null=True)
    expiring_24h = serializers.IntegerField(allow_null=True)
    never_expire = serializers.IntegerField(allow_null=True)


class StatsSnapshot(serializers.Serializer):
    taken_at = when()
    age_seconds = serializers.FloatField()
    figures = SnapshotFigures()


class StatsHow(serializers.Serializer):
    """How each figure was obtained; a figure this caller may not see is absent."""

    task_keys = serializers.ChoiceField(HOW, required=False)
    asset_keys = serializers.ChoiceField(HOW, required=False)
    expired = serializers.ChoiceField(HOW, required=False)
    expiring_24h = serializers.ChoiceField(HOW, required=False)
    never_expire = serializers.ChoiceField(HOW, required=False)


class ConfigOption(serializers.Serializer):
    option = text()
    value = text(allow_null=True)
    source = text(allow_null=True)


class BackendModeShape(serializers.Serializer):
    mode = serializers.ChoiceField(["metastore", "custom", "worker"])
    explanation = text()
    docs = text(allow_null=True)
    details = serializers.DictField(child=serializers.JSONField(), help_text="The facts behind the explanation.")


class GcRunShape(serializers.Serializer):
    started_at = when(allow_null=True)
    finished_at = when(allow_null=True)
    outcome = text()
    rows_deleted = serializers.IntegerField()
    batches = serializers.IntegerField()
    host = text()


class Stats(serializers.Serializer):
    task_keys = serializers.IntegerField(allow_null=True)
    task_keys_estimated = serializers.BooleanField(allow_null=True)
    asset_keys = serializers.IntegerField(allow_null=True)
    asset_keys_estimated = serializers.BooleanField(allow_null=True)
    expired = serializers.IntegerField(allow_null=True)
    expired_estimated = serializers.BooleanField(allow_null=True)
    expiring_24h = serializers.IntegerField(allow_null=True)
    expiring_24h_estimated = serializers.BooleanField(allow_null=True)
    never_expire = serializers.IntegerField(allow_null=True)
    never_expire_estimated = serializers.BooleanField(allow_null=True)
    how = StatsHow()
    snapshot = StatsSnapshot(allow_null=True)
    config = ConfigOption(many=True)
    config_error = text(allow_null=True)
    backend_modes = BackendModeShape(many=True)
    gc_runs = GcRunShape(many=True, allow_null=True)


class ExpiredRow(serializers.Serializer):
    key = text()
    value = serializers.JSONField()
    updated_at = when(allow_null=True)
    expires_at = when(allow_null=True)
    dag_id = text()
    run_id = text()
    task_id = text()
    map_index = serializers.IntegerField()


class DagRows(serializers.Serializer):
    dag_id = text()
    rows = serializers.IntegerField()


class ExpiredReferences(serializers.Serializer):
    rows_looked_at = serializers.IntegerField()
    exact = serializers.BooleanField()
    objects = serializers.IntegerField()
    inline = serializers.IntegerField()
    unreachable = serializers.IntegerField()


class GcDryRun(serializers.Serializer):
    """``state.gc.DryRunSummary.as_dict()``, which ``state_store_clean --dry-run --json`` prints too."""

    dry_run = serializers.BooleanField()
    outcome = serializers.ChoiceField(["dry_run", "skipped"])
    message = text(allow_blank=True)
    backend = text(allow_null=True)
    backend_is_metastore = serializers.BooleanField()
    reason = text(allow_blank=True, allow_null=True)
    cutoff = when()
    dag_ids = serializers.ListField(child=text())
    rows = serializers.IntegerField(allow_null=True)
    rows_estimated = serializers.BooleanField()
    rows_more_than = serializers.IntegerField(allow_null=True)
    dags = serializers.IntegerField(allow_null=True)
    by_dag = DagRows(many=True)
    by_dag_source = serializers.ChoiceField(["exact", "snapshot"], allow_null=True)
    snapshot_taken_at = when(allow_null=True)
    snapshot_age_seconds = serializers.FloatField(allow_null=True)
    oldest_expiry = when(allow_null=True)
    newest_expiry = when(allow_null=True)
    sample = ExpiredRow(many=True)
    objects = ExpiredReferences(required=False, help_text="With worker-side object deletion configured.")
