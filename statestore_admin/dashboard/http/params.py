"""The query parameters of the pages, parsed in one place. A page forgives what a hand-edited or stale
link gets wrong (a number out of range, a store it does not know) and shows its default; a download
answers a plain 400 instead, since its file would not be what was asked for (``map_index``).
"""

from uuid import UUID

from django.utils.translation import gettext as _

from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.core import pagination
from statestore_admin.core.errors import Invalid
from statestore_admin.exports import documents as exports
from statestore_admin.state.selectors import ALL_MAP_INDEXES


def integer(params, name: str, default: int, low: int | None = None, high: int | None = None) -> int:
    """``params[name]`` as a whole number within ``low``..``high`` (clamped), or ``default`` when it is
    absent, empty or not a whole number."""
    try:
        value = int(params.get(name))
    except (TypeError, ValueError):
        return default
    if low is not None:
        value = max(value, low)
    if high is not None:
        value = min(value, high)
    return value


def choice(params, name: str, choices, default: str) -> str:
    """``params[name]`` when it is one of ``choices``, else ``default``."""
    value = params.get(name)
    return value if value in choices else default


def map_index(params, name: str = "map_index") -> int | None:
    """A task instance's map index: -1 when absent, None for ``all`` (every map index), else a whole number
    from -1 up to what Airflow's column holds. Anything else is ``Invalid``."""
    raw = params.get(name) or "-1"
    if raw == ALL_MAP_INDEXES:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not -1 <= value <= exports.MAX_INT:
        raise Invalid({name: _("%(name)s is a whole number from -1, or all.") % {"name": name}})
    return value


def whole_number(value, field: str) -> int:
    """A whole number the database can compare (64 bits), else ``Invalid`` naming ``field``: for the
    parameters of an action or a download, which must not silently mean something else."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise Invalid({field: _("%(value)s is not a number.") % {"value": repr(value)}}) from None
    if not pagination.MIN_INT <= number <= pagination.MAX_INT:
        raise Invalid({field: _("%(value)s is out of range.") % {"value": repr(value)}})
    return number


def region_id(params, name: str = "region_id") -> UUID | None:
    """Airflow 3.4's ``region_id`` of a task instance: None when absent or empty, else a UUID (with or without
    dashes, as Airflow's UI and API write it). Anything else is ``Invalid``: a shared link that names a region
    must not silently show another one."""
    raw = (params.get(name) or "").strip()
    if not raw:
        return None
    try:
        return UUID(raw)
    except ValueError:
        message = _("%(name)s %(value)s is not a region id (a UUID such as %(example)s).") % {
            "name": name,
            "value": repr(raw[:80]),
            "example": SENTINEL_REGION_ID,
        }
        raise Invalid({name: message}) from None


def task_target(params) -> dict:
    """The task keys a confirmation shows and posts (and its download reads), as the services take them: a task
    instance (``run``, ``task_id``, ``map_index`` or ``all``), a run's keys matching its page's filter
    (``in_run``, ``in_task``, ``key_prefix``) or key ids. An unknown run is a 404 like any page of it (the
    service's lookup, so a run that is not a number is one too); a map index or id that is not a number is
    ``Invalid``."""
    if params.get("in_run"):
        return {
            "in_run": whole_number(params.get("in_run"), "in_run"),
            "in_task": params.get("in_task", ""),
            "key_prefix": params.get("key_prefix", ""),
        }
    if params.get("run"):
        map_index = params.get("map_index", "-1")
        target = {
            "run_pk": integer(params, "run", 0),
            "task_id": params.get("task_id", ""),
            "map_index": None if map_index == ALL_MAP_INDEXES else whole_number(map_index, "map_index"),
        }
        found = region_id(params)  # Airflow 3.4: one region's task instance, or its every index
        return {**target, "region_id": found} if found is not None else target
    return {"ids": tuple(whole_number(v, "ids") for v in params.getlist("ids"))}
