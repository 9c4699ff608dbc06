"""The response bodies of our own endpoints (``/api/statestore/v1``), one serializer per shape: the OpenAPI
document describes them with these, and the fuzz run checks every answer against that description."""

from rest_framework import serializers

from statestore_admin.api.airflow_v2 import Writer


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


HOW = ("exact", "estimated", "capped", "snapshot")  # one enum for every figure (settings' ENUM_NAME_OVERRIDES)


class SnapshotFigures(serializers.Serializer):
    task_keys = serializers.IntegerField(allow_null=True)
    asset_keys = serializers.IntegerField(allow_null=True)
    expired = serializers.IntegerField(allow_null=True)
    expiring_24h = serializers.IntegerField(allow_null=True)
    never_expire = serializers.IntegerField(allow_null=True)


def whole(**kwargs):
    return serializers.IntegerField(**kwargs)


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


class GcRun(serializers.Serializer):
    """A recorded GC run (``gc.run_as_dict``): in ``/stats`` and ``/insights/gc``."""

    started_at = when()
    finished_at = when(allow_null=True)
    duration_seconds = serializers.FloatField(allow_null=True)
    outcome = text()
    rows_deleted = whole()
    batches = whole()
    batch_size = whole()
    cutoff = when()
    dag_ids = serializers.ListField(child=text())
    message = text(allow_blank=True)
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
    gc_runs = GcRun(many=True, allow_null=True)


class ExpiredRow(serializers.Serializer):
    key = text()
    value = serializers.JSONField()
    updated_at = when(allow_null=True)
    expires_at = when(allow_null=True)
    dag_id = text()
    run_id = text()
    task_id = text()
    map_index = serializers.IntegerField()
    region_id = serializers.UUIDField(
        required=False, help_text="Airflow 3.4 only: the task instance's dynamic region (all zeros outside any)."
    )
    region_index = serializers.IntegerField(required=False, help_text="Airflow 3.4 only: the index in that region.")


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
    """``gc.DryRunSummary.as_dict()``, which ``state_store_clean --dry-run --json`` prints too."""

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


def maybe():
    return serializers.IntegerField(allow_null=True)


class InsightsSnapshot(serializers.Serializer):
    id = whole()
    taken_at = when()
    finished_at = when(allow_null=True)
    duration_seconds = serializers.FloatField(allow_null=True)
    age_seconds = serializers.FloatField()
    trigger = text()


class InsightsLatest(serializers.Serializer):
    task_keys = maybe()
    task_bytes = maybe()
    expired = maybe()
    expiring = maybe()
    never = maybe()
    live = maybe()
    dags = maybe()
    asset_keys = maybe()
    asset_bytes = maybe()
    assets = maybe()


class SeriesPoint(serializers.Serializer):
    taken_at = when()
    task_keys = maybe()
    task_bytes = maybe()
    asset_keys = maybe()
    asset_bytes = maybe()


class SeriesDag(serializers.Serializer):
    dag_id = text()
    keys = serializers.ListField(child=whole())
    bytes = serializers.ListField(child=whole())


class InsightsSeries(serializers.Serializer):
    days = whole()
    since = when()
    snapshot = InsightsSnapshot(allow_null=True)
    latest = InsightsLatest(allow_null=True)
    points = SeriesPoint(many=True)
    dags = SeriesDag(many=True)


class ExpiryDay(serializers.Serializer):
    day = serializers.DateField()
    keys = whole()
    bytes = whole()


class ByStatus(serializers.Serializer):
    expired = whole()
    expiring = whole()
    later = whole()
    never = whole()


class InsightsExpiry(serializers.Serializer):
    snapshot = InsightsSnapshot(allow_null=True)
    days = ExpiryDay(many=True, allow_null=True)
    by_status = ByStatus(allow_null=True)


class SizeBucket(serializers.Serializer):
    store = serializers.ChoiceField(["task", "asset"])
    up_to = maybe()
    keys = whole()


class InsightsSizes(serializers.Serializer):
    snapshot = InsightsSnapshot(allow_null=True)
    buckets = SizeBucket(many=True)


class TopDag(serializers.Serializer):
    dag_id = text()
    keys = whole()
    bytes = whole()


class TopTask(TopDag):
    task_id = text()


class TopAsset(serializers.Serializer):
    asset_id = whole()
    name = text(allow_null=True)
    uri = text(allow_null=True)
    keys = whole()
    bytes = whole()


class LargestValue(serializers.Serializer):
    """A large value's key and size, never the value; the fields of the other store are null."""

    store = serializers.ChoiceField(["task", "asset"])
    key = text()
    size = whole()
    key_id = maybe()
    dag_id = text(allow_null=True)
    run_id = text(allow_null=True)
    task_id = text(allow_null=True)
    map_index = maybe()
    asset_id = maybe()
    asset_name = text(allow_null=True)
    asset_uri = text(allow_null=True)


class InsightsTop(serializers.Serializer):
    snapshot = InsightsSnapshot(allow_null=True)
    dags_by_keys = TopDag(many=True)
    dags_by_bytes = TopDag(many=True)
    tasks_by_keys = TopTask(many=True)
    tasks_by_bytes = TopTask(many=True)
    assets_by_keys = TopAsset(many=True)
    assets_by_bytes = TopAsset(many=True)
    largest = LargestValue(many=True)


class InsightsGc(serializers.Serializer):
    days = whole()
    runs = GcRun(many=True)


def scope_of_key():
    return serializers.DictField(
        child=serializers.JSONField(),
        allow_null=True,
        help_text="task: dag_id, run_id, task_id, map_index; asset: how the worker named it.",
    )


class StorageShape(serializers.Serializer):
    base = text()
    compression = text(allow_null=True)
    threshold = whole()


class ObjectsFound(serializers.Serializer):
    count = whole()
    bytes = whole()


class OrphanObject(serializers.Serializer):
    ref = text()
    size = whole()
    modified = when(allow_null=True)
    store = serializers.ChoiceField(["task", "asset"], allow_null=True)
    scope = scope_of_key()
    key = text(allow_null=True)


class OrphanObjects(serializers.Serializer):
    count = whole()
    bytes = whole()
    young = maybe()
    sample = OrphanObject(many=True)


class ReferencingRow(serializers.Serializer):
    ref = text()
    store = serializers.ChoiceField(["task", "asset"])
    key = text()
    scope = scope_of_key()


class OutsideRow(ReferencingRow):
    reason = text()


class RiskRow(ReferencingRow):
    expected = serializers.ListField(child=text())
    reason = text()


class Dangling(serializers.Serializer):
    count = whole()
    unchecked = whole()
    sample = ReferencingRow(many=True)


class Risks(serializers.Serializer):
    count = whole()
    sample = RiskRow(many=True)


class Outside(serializers.Serializer):
    count = whole()
    sample = OutsideRow(many=True)


class DeleteFailure(serializers.Serializer):
    ref = text()
    error = text()


class OrphanDeletion(serializers.Serializer):
    older_than_seconds = serializers.FloatField()
    deleted = whole()
    young = whole()
    kept = whole()
    missing = whole()
    failed = whole()
    failures = DeleteFailure(many=True)
    audit_event_id = maybe()


class StorageErrors(serializers.Serializer):
    count = whole()
    sample = serializers.ListField(child=text())


class OrphansReport(serializers.Serializer):
    """``objects.orphans.OrphanReport.as_dict()``, which ``state_store_orphans --json`` prints too."""

    storage = StorageShape(allow_null=True)
    config_error = text(allow_null=True)
    objects = ObjectsFound()
    orphans = OrphanObjects()
    dangling = Dangling()
    risks = Risks()
    outside = Outside()
    rows_with_refs = whole()
    inline_refs = whole()
    older_than_seconds = serializers.FloatField(allow_null=True)
    deletion = OrphanDeletion(allow_null=True)
    complete = serializers.BooleanField()
    errors = StorageErrors()
    seconds = serializers.FloatField()
