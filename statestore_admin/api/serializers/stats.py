"""The overview's figures (``/stats``), rendered from ``selectors.overview``'s ``Overview``, and a recorded GC
run (in ``/stats`` and ``/insights/gc``)."""

from rest_framework import serializers

from statestore_admin import gc
from statestore_admin.api.serializers.fields import text, when, whole
from statestore_admin.core.status import EXPIRED, EXPIRING, NEVER

HOW = ("exact", "estimated", "capped", "snapshot")  # one enum for every figure (settings' ENUM_NAME_OVERRIDES)
# Each figure's name in the answer, and where the overview holds it (a ``core.counting.Figure``).
FIGURES = {
    "task_keys": "totals.task",
    "asset_keys": "totals.asset",
    "expired": f"statuses.{EXPIRED}",
    "expiring_24h": f"statuses.{EXPIRING}",
    "never_expire": f"statuses.{NEVER}",
}


class Age(serializers.FloatField):
    """Seconds from a figure's ``age_seconds`` to ``context["now"]``, rounded to ``digits``."""

    def __init__(self, digits: int, **kwargs):
        self.digits = digits
        super().__init__(source="*", **kwargs)

    def to_representation(self, value):
        return round(value.age_seconds(self.context["now"]), self.digits)


class OrNull(serializers.CharField):
    """A text, null when empty."""

    def to_representation(self, value):
        return super().to_representation(value) or None


class SnapshotFigures(serializers.Serializer):
    task_keys = serializers.IntegerField(allow_null=True)
    asset_keys = serializers.IntegerField(allow_null=True)
    expired = serializers.IntegerField(allow_null=True)
    expiring_24h = serializers.IntegerField(allow_null=True, source="expiring")
    never_expire = serializers.IntegerField(allow_null=True, source="never")


class StatsSnapshot(serializers.Serializer):
    taken_at = when()
    age_seconds = Age(1)
    figures = SnapshotFigures(source="*")


class StatsHow(serializers.Serializer):
    """How each figure was obtained; a figure this caller may not see is absent."""

    task_keys = serializers.ChoiceField(HOW, required=False, source=FIGURES["task_keys"])
    asset_keys = serializers.ChoiceField(HOW, required=False, source=FIGURES["asset_keys"])
    expired = serializers.ChoiceField(HOW, required=False, source=FIGURES["expired"])
    expiring_24h = serializers.ChoiceField(HOW, required=False, source=FIGURES["expiring_24h"])
    never_expire = serializers.ChoiceField(HOW, required=False, source=FIGURES["never_expire"])

    def to_representation(self, overview):
        figures = {name: field.get_attribute(overview) for name, field in self.fields.items()}
        return {name: self.fields[name].to_representation(f.how) for name, f in figures.items() if f.value is not None}


class ConfigOption(serializers.Serializer):
    option = text(source="name")
    value = text(allow_null=True, source="raw")
    source = text(allow_null=True)


class BackendModeShape(serializers.Serializer):
    mode = serializers.ChoiceField(["metastore", "custom", "worker"])
    explanation = text(source="text")
    docs = OrNull(allow_null=True)
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

    def to_representation(self, run):
        return super().to_representation(gc.run_as_dict(run))  # the run's shape for every face


def count(figure: str):
    return serializers.IntegerField(allow_null=True, source=f"{FIGURES[figure]}.value")


def estimated(figure: str):
    return serializers.BooleanField(allow_null=True, source=f"{FIGURES[figure]}.estimated")


class Stats(serializers.Serializer):
    task_keys = count("task_keys")
    task_keys_estimated = estimated("task_keys")
    asset_keys = count("asset_keys")
    asset_keys_estimated = estimated("asset_keys")
    expired = count("expired")
    expired_estimated = estimated("expired")
    expiring_24h = count("expiring_24h")
    expiring_24h_estimated = estimated("expiring_24h")
    never_expire = count("never_expire")
    never_expire_estimated = estimated("never_expire")
    how = StatsHow(source="*")
    snapshot = StatsSnapshot(allow_null=True)
    config = ConfigOption(many=True)
    config_error = text(allow_null=True)
    backend_modes = BackendModeShape(many=True)
    gc_runs = GcRun(many=True, allow_null=True)
