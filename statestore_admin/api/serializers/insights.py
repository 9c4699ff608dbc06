"""The Insights figures (``/insights/...``), rendered from ``stats.insights``' answers: a body's parts are
the domain's objects, or None where the caller sees nothing."""

from rest_framework import serializers

from statestore_admin.api.serializers.fields import maybe, text, when, whole
from statestore_admin.api.serializers.stats import Age, GcRun


class InsightsSnapshot(serializers.Serializer):
    id = whole(source="snapshot.pk")
    taken_at = when(source="snapshot.taken_at")
    finished_at = when(allow_null=True, source="snapshot.finished_at")
    duration_seconds = serializers.FloatField(allow_null=True, source="snapshot.duration_seconds")
    age_seconds = Age(3)
    trigger = text(source="snapshot.trigger")


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


class TopTask(serializers.Serializer):
    dag_id = text()
    task_id = text()
    keys = whole()
    bytes = whole()


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

    LISTS = ("dags_by_keys", "dags_by_bytes", "tasks_by_keys", "tasks_by_bytes", "assets_by_keys", "assets_by_bytes")
    LISTS += ("largest",)


class InsightsGc(serializers.Serializer):
    days = whole()
    runs = GcRun(many=True)
