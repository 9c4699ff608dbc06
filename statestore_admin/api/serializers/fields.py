"""Fields shared by the shapes: times and values as Airflow's ``/api/v2`` writes them."""

from rest_framework import serializers

from statestore_admin.core import formatting, values


class When(serializers.DateTimeField):
    """A time in UTC ending in Z (``formatting.iso``), Airflow's wire format and ours; a text (a time a domain
    dict already formatted) as it is."""

    def to_representation(self, value):
        return value if isinstance(value, str) else formatting.iso(value)


class Decoded(serializers.JSONField):
    """A stored value (JSON text) decoded, the raw text if it is not JSON (``values.decoded``)."""

    def to_representation(self, value):
        return values.decoded(value)


def text(**kwargs):
    return serializers.CharField(**kwargs)


def when(**kwargs):
    return When(**kwargs)


def whole(**kwargs):
    return serializers.IntegerField(**kwargs)


def maybe():
    return serializers.IntegerField(allow_null=True)
