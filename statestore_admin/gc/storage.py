"""Worker-side objects and GC: the object storage a run ``with_objects`` deletes from, how a deleted
value names its object (``REF_PREFIX``, ``REF_OF_VALUE``) and the dry run's look at the references among
expired rows (``ExpiredReferences``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.utils.translation import gettext as _

from statestore_admin.airflow.config import AirflowConfig, AirflowConfigError
from statestore_admin.airflow.models import JsonValueMixin
from statestore_admin.objects import store as objects


class GcMisconfigured(Exception):
    """A run that also deletes worker-side objects, without an object storage the dashboard can open: nothing
    is deleted (the command's exit code 2)."""


# Like Airflow's, GC deletes rows only: the objects of expired references stay behind (orphans, which
# ``state_store_orphans`` lists). A plan ``with_objects`` also deletes them, in Airflow's order: a batch's rows,
# its commit, then its objects; a failed object delete is counted and reported, never rolls a row back.
OBJECTS_LEFT_BEHIND = (
    "Objects of expired references are left behind (like Airflow's GC): --with-objects deletes them, "
    "state_store_orphans lists them."
)


def object_storage(config: AirflowConfig | None = None) -> objects.Storage:
    """The object storage a run ``with_objects`` deletes from; ``GcMisconfigured`` when the Airflow
    configuration names none, names an invalid one, or one this environment cannot open."""
    try:
        store = objects.Storage.from_config(config)
    except AirflowConfigError as exc:
        raise GcMisconfigured(_cannot_delete(exc)) from exc
    if store is None:
        raise GcMisconfigured(
            _(
                "Cannot delete worker-side objects: the Airflow configuration has no [common.io] "
                "state_store_objectstorage_path (AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_PATH). "
                "Nothing was deleted."
            )
        )
    try:
        store.filesystem()
    except objects.StorageError as exc:
        raise GcMisconfigured(_cannot_delete(exc)) from exc
    return store


def _cannot_delete(exc: Exception) -> str:
    return _("Cannot delete worker-side objects: %(error)s Nothing was deleted.") % {"error": exc}


def can_delete_objects(config: AirflowConfig | None = None) -> bool:
    """Whether a run may be ``with_objects`` here (the GC page offers it only then)."""
    try:
        object_storage(config)
    except GcMisconfigured:
        return False
    return True


# SQL: a deleted row's value when it holds a worker-side reference (its text starts with the marker the SDK
# writes), else NULL; one parameter, ``REF_PREFIX``. Only runs with_objects return values at all.
REF_PREFIX = JsonValueMixin.REF_PREFIX
REF_OF_VALUE = f"CASE WHEN substr(value, 1, {len(REF_PREFIX)}) = %s THEN value END"


@dataclass(frozen=True)
class ExpiredReferences:
    """The dry run's look at the references among expired rows (with_objects only): of ``rows`` expired rows
    (all of them when ``exact``, else the first ones the expires_at condition meets), how many reference an
    object under the base path (deleted after their rows), hold the value inline (no object) or name a URL
    outside the base path (never deleted: counted as failed)."""

    rows: int
    exact: bool
    objects: int
    inline: int
    unreachable: int

    def as_dict(self) -> dict:
        fields = asdict(self)
        return {"rows_looked_at": fields.pop("rows"), **fields}  # the API's name for ``rows``
