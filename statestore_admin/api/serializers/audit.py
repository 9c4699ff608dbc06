"""The audit trail's bodies (``/audit-events``, the restores): an event is ``audit.events.event_entry``'s dict
(the audit download's entry too) with its keys (``AuditKey`` rows); a restore's outcome is
``RestoreOutcome.as_dict()``. The request bodies a restore takes are documented here too."""

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers
from rest_framework.fields import SkipField

from statestore_admin.api.serializers.fields import Decoded, When
from statestore_admin.exports import restore as restores
from statestore_admin.records.models import AuditEvent

REGION_HELP = (
    "Airflow 3.4's dynamic region of the task instance (map_index is then its index there); "
    "null outside any region, as for every event recorded on Airflow 3.3."
)


class _CoordinatePart:
    """A part of an audit key's ``coordinate`` (``selectors.with_coordinates``), left out outside any region."""

    part = ""

    def __init__(self, **kwargs):
        super().__init__(required=False, allow_null=True, **kwargs)

    def get_attribute(self, key):
        coordinate = getattr(key, "coordinate", None)
        if coordinate is None:
            raise SkipField
        return getattr(coordinate, self.part)


class CoordinateLabel(_CoordinatePart, serializers.CharField):
    part = "label"


class CoordinateIteration(_CoordinatePart, serializers.IntegerField):
    part = "iteration"


class AuditKeyState(serializers.Serializer):
    value = Decoded(help_text="The decoded JSON value (the raw text if it is not JSON).")
    expires_at = When(allow_null=True, required=False, help_text="Task keys only (null: never expires).")

    def __init__(self, side: str, **kwargs):
        self.side = side  # "before" or "after" the event
        super().__init__(source="*", **kwargs)

    def to_representation(self, key):
        """The key's value on that side (null: no row), and its expiry for a task key."""
        value = getattr(key, f"{self.side}_value")
        if value is None:
            return None
        state = {"value": self.fields["value"].to_representation(value)}
        if key.asset_id is None:
            expires_at = getattr(key, f"{self.side}_expires_at")
            state["expires_at"] = (
                None if expires_at is None else self.fields["expires_at"].to_representation(expires_at)
            )
        return state


class AuditKeyResponse(serializers.Serializer):
    key = serializers.CharField()
    map_index = serializers.IntegerField(allow_null=True)
    region_id = serializers.UUIDField(allow_null=True, help_text=REGION_HELP)
    dag_id = serializers.CharField(allow_null=True)
    run_id = serializers.CharField(allow_null=True)
    task_id = serializers.CharField(allow_null=True)
    asset_id = serializers.IntegerField(allow_null=True)
    before = AuditKeyState("before", allow_null=True)
    after = AuditKeyState("after", allow_null=True)
    truncated = serializers.BooleanField(help_text="A value was kept truncated; not restorable.")
    coordinate = CoordinateLabel(
        help_text="Airflow 3.4, with a region_id: the task instance's place, as the pages show it (\"loop refine · "
        "iteration 2 › map 1\"), in the request's language.",
    )
    iteration = CoordinateIteration(
        help_text="Airflow 3.4, with a region_id: the innermost loop iteration of the task instance, from 0 as "
        "Airflow numbers them; null in no loop.",
    )


class AuditEventToken(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class AuditEventResponse(serializers.Serializer):
    id = serializers.IntegerField()
    at = When()
    finished_at = When(allow_null=True)
    outcome = serializers.ChoiceField(["done", "failed", "pending", "unknown"])
    actor = serializers.CharField()
    token = AuditEventToken(allow_null=True)
    signed_in = serializers.CharField(
        allow_blank=True, help_text="How the user's session signed in; empty for API tokens and commands."
    )
    os_user = serializers.CharField()
    host = serializers.CharField()
    via = serializers.ChoiceField(AuditEvent.Via.values)
    action = serializers.ChoiceField(AuditEvent.Action.values)
    store = serializers.CharField()
    dag_id = serializers.CharField(allow_null=True)
    run_id = serializers.CharField(allow_null=True)
    task_id = serializers.CharField(allow_null=True)
    map_index = serializers.IntegerField(allow_null=True)
    region_id = serializers.UUIDField(allow_null=True, help_text=REGION_HELP)
    asset_id = serializers.IntegerField(allow_null=True)
    asset_name = serializers.CharField()
    asset_uri = serializers.CharField()
    key_count = serializers.IntegerField()
    details = serializers.JSONField()
    error = serializers.CharField()
    restored_from = serializers.IntegerField(allow_null=True)
    keys = AuditKeyResponse(many=True)
    keys_truncated = serializers.BooleanField()
    keys_next_cursor = serializers.CharField(
        allow_null=True, help_text="Pass as keys_cursor to GET /audit-events/{id} for the next keys."
    )


class AuditEventPage(serializers.Serializer):
    items = AuditEventResponse(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class RestoreResponse(serializers.Serializer):
    restored = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    kept = serializers.ListField(child=serializers.DictField())
    missing = serializers.ListField(
        child=serializers.DictField(), help_text="Keys whose DAG run or asset no longer exists: not restored."
    )
    events = serializers.ListField(child=serializers.IntegerField())


# Request bodies (documentation only: ``ours.audit`` reads them with FastAPI's errors).
RestoreBody = inline_serializer(
    "RestoreEventBody",
    {
        "resolutions": serializers.DictField(
            child=serializers.ChoiceField([restores.KEEP, restores.OVERWRITE]),
            required=False,
            help_text='Per conflicting key (the "id" of a conflict): "keep" its current value or "overwrite" it.',
        )
    },
)
ExportDocument = inline_serializer(
    "KeyExportDocument",
    {
        "format": serializers.ChoiceField(["statestore-admin/keys"]),
        "version": serializers.ChoiceField([1]),
        "keys": serializers.ListField(
            child=serializers.DictField(),
            help_text='{"store": "task", dag_id, run_id, task_id, map_index, region_id (null or absent: outside '
            "any region), key, value, expires_at} or "
            '{"store": "asset", asset_id, key, value}',
        ),
    },
)
Upload = inline_serializer("KeyExportUpload", {"file": serializers.FileField(help_text="An export document (JSON).")})
