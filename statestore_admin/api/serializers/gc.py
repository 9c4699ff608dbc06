"""What garbage collection would delete (``/gc/dry-run``): ``gc.DryRunSummary.as_dict()``, the same dict
``state_store_clean --dry-run --json`` prints, rendered (and documented) by ``GcDryRun``."""

from rest_framework import serializers

from statestore_admin.api.serializers.fields import text, when


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
