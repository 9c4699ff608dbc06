"""Fields shared by the shapes: times and values as Airflow's ``/api/v2`` writes them; ``Flat``, a shape of plain
fields rendered without DRF's copy of its fields."""

from collections.abc import Mapping
from functools import partial

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


class Flat(serializers.Serializer):
    """A shape of plain fields, each the attribute (or key) of its own name, null when that is None: rendered by
    its declared fields themselves. DRF's ``to_representation`` first copies every declared field for each
    serializer it makes (for a list: the list's, its item's) and binds the copies: a sixth of a key list's time
    in the profile (docs/benchmarks/api-load.md). The output and the OpenAPI description are the same."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name, field in cls._declared_fields.items():
            if field.source not in (None, name):
                raise TypeError(f"{cls.__name__}.{name}: a Flat shape's fields have no source of their own")

    def to_representation(self, instance):
        read = instance.__getitem__ if isinstance(instance, Mapping) else partial(getattr, instance)
        shape = {}
        for name, field in self._declared_fields.items():
            value = read(name)
            shape[name] = None if value is None else field.to_representation(value)
        return shape
