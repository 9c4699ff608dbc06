"""Airflow's ``/api/v2`` state-store bodies, key for key as Airflow 3.3 and 3.4 answer them, and ours
(``?resolve=true``'s fields) on top."""

from rest_framework import serializers

from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.api.serializers.fields import Decoded, Flat, When
from statestore_admin.objects import store as objects
from statestore_admin.state import selectors


class TaskStateStoreResponse(Flat):
    key = serializers.CharField()
    value = Decoded()
    updated_at = When()
    expires_at = When(allow_null=True)


class AssetStateStoreLastUpdatedBy(serializers.Serializer):
    kind = serializers.ChoiceField(["task", "watcher", "api"], source="last_updated_by_kind")
    dag_id = serializers.CharField(allow_null=True, source="last_updated_by_dag_id")
    run_id = serializers.CharField(allow_null=True, source="last_updated_by_run_id")
    task_id = serializers.CharField(allow_null=True, source="last_updated_by_task_id")
    map_index = serializers.IntegerField(allow_null=True, source="last_updated_by_map_index")
    # Airflow 3.4's task writer identity (absent on 3.3); region_id and region_index are left out,
    # never null, when the writer sat in no region.
    task_instance_id = serializers.UUIDField(
        allow_null=True, required=False, help_text="Airflow 3.4.", source="last_updated_by_task_instance_id"
    )
    region_id = serializers.UUIDField(
        required=False,
        help_text="Airflow 3.4, when the task writer sat in a dynamic region.",
        source="last_updated_by_region_id",
    )
    region_index = serializers.IntegerField(
        required=False, help_text="Airflow 3.4, with region_id.", source="last_updated_by_region_index"
    )
    try_number = serializers.IntegerField(
        allow_null=True, required=False, help_text="Airflow 3.4.", source="last_updated_by_try_number"
    )

    AIRFLOW_33 = ("kind", "dag_id", "run_id", "task_id", "map_index")

    def to_representation(self, row):
        """The row's writer (null: none recorded). On Airflow 3.4 it gains the task writer's identity, in
        Airflow's order, its region left out (not null) when it had none (``OmitsMissingRegion``). The 3.4
        columns are not read on 3.3, which has none."""
        if row.last_updated_by_kind is None:
            return None
        names = list(self.AIRFLOW_33)
        if selectors.addresses_regions():
            region = row.last_updated_by_region_id
            in_region = region is not None and region != SENTINEL_REGION_ID
            names += ["task_instance_id", *(["region_id", "region_index"] if in_region else []), "try_number"]
        writer = {}
        for name in names:
            field = self.fields[name]
            value = field.get_attribute(row)
            writer[name] = None if value is None else field.to_representation(value)
        return writer


class AssetStateStoreResponse(serializers.Serializer):
    key = serializers.CharField()
    value = Decoded()
    updated_at = When()
    last_updated_by = AssetStateStoreLastUpdatedBy(allow_null=True, source="*")


# ``?resolve=true``'s fields (our extension), of a ``Resolution``. (A comment: a docstring here would describe
# the item components that inherit it, in the OpenAPI document.)
class Resolving(serializers.Serializer):
    reference = serializers.CharField(
        allow_null=True,
        required=False,
        help_text="With ?resolve=true: the worker-side reference, null for a plain value.",
    )
    resolved = serializers.BooleanField(
        required=False, help_text="With ?resolve=true: whether `value` is the real value."
    )
    resolve_error = serializers.CharField(
        allow_null=True,
        required=False,
        help_text="With ?resolve=true: why the value behind the reference is not given.",
    )


class TaskStateStoreItemResponse(TaskStateStoreResponse, Resolving):
    pass


class AssetStateStoreItemResponse(AssetStateStoreResponse, Resolving):
    pass


class Resolution:
    """A row as ``?resolve=true`` answers it: ``reference`` (the worker-side reference, or null for a plain
    value), ``resolved`` (whether ``value`` is the real value) and ``resolve_error`` (why not); a resolved
    reference's ``value`` is the text behind it (read with ``WORKER_BACKEND_READ`` only). The row's other
    attributes are the row's."""

    def __init__(self, row, resolved: objects.Resolved | None):
        self.row = row
        self.reference = None if resolved is None else resolved.reference.ref
        self.resolved = resolved is None or resolved.text is not None
        self.resolve_error = None if self.resolved else resolved.error
        if resolved is not None and resolved.text is not None:
            self.value = resolved.text

    def __getattr__(self, name):
        return getattr(self.row, name)


class TaskStateStoreCollectionResponse(Flat):
    task_state_store = TaskStateStoreResponse(many=True)
    total_entries = serializers.IntegerField()


class AssetStateStoreCollectionResponse(serializers.Serializer):
    asset_state_store = AssetStateStoreResponse(many=True)
    total_entries = serializers.IntegerField()
