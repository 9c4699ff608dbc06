"""What the packages' system checks share: the error for a setting that must be a whole number, 1 or more."""

from django.conf import settings
from django.core import checks


def positive_whole_number(name: str, unit: str, *, hint: str, id: str) -> list[checks.Error]:
    """No error when the setting ``name`` is a whole number of ``unit`` (not a bool), 1 or more; else one."""
    value = getattr(settings, name)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return []
    return [checks.Error(f"{name} is {value!r}: it must be a whole number of {unit}, 1 or more.", hint=hint, id=id)]
