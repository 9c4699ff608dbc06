"""The orphans report (``/orphans``): ``objects.orphans.OrphanReport.as_dict()``, the same dict
``state_store_orphans --json`` prints and the Orphans page reads, rendered (and documented) by ``OrphansReport``."""

from rest_framework import serializers

from statestore_admin.api.serializers.fields import maybe, text, when, whole


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
