"""What one GC run deletes and how (``GcPlan``), checked whichever face builds it; the operator's cutoff
(``parse_cutoff``); the expired rows (``expires_at < cutoff``; ``expires_at IS NULL`` is never deleted,
``asset_state_store`` never touched). Whether the configured backend is the metastore's, the only one whose
rows GC deletes, is ``objects.backends.backend_status``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.core.errors import Invalid
from statestore_admin.core.values import parse_datetime_aware


def parse_cutoff(text: str | None, now: datetime) -> datetime:
    """The cutoff an operator gives (``--before``, ``?before=``): ISO 8601 with a time zone, not after
    ``now``. Empty or None: ``now``. ``Invalid`` on field ``before`` otherwise."""
    if not text:
        return now
    if text != text.strip():
        raise Invalid({"before": _("A date and time without surrounding spaces.")})
    cutoff = parse_datetime_aware(text, "before")
    if cutoff > now:
        raise Invalid({"before": _("This is in the future; garbage collection only deletes what has expired.")})
    return cutoff


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class GcPlan:
    """What one run deletes and how. Its bounds are checked here, whichever face builds it (``Invalid``)."""

    cutoff: datetime
    dag_ids: tuple[str, ...] = ()
    batch_size: int = 0
    sleep: float = 0.0
    max_batches: int | None = None
    lock_timeout: float = 5.0
    time_limit: float | None = None  # seconds: no batch starts after this (the dashboard's bounded run)
    # Also delete the worker-side objects of the rows deleted, after each committed batch (our extension:
    # Airflow's GC deletes rows only). Needs ``object_storage()``.
    with_objects: bool = False

    def __post_init__(self):
        errors = {}
        if not isinstance(self.cutoff, datetime) or timezone.is_naive(self.cutoff):
            errors["cutoff"] = _("The cutoff must be a timezone-aware date and time.")
        if not isinstance(self.batch_size, int) or isinstance(self.batch_size, bool) or self.batch_size < 0:
            errors["batch_size"] = _("The batch size must be a whole number, 0 or more (0: one statement).")
        if not _is_number(self.sleep) or self.sleep < 0:
            errors["sleep"] = _("The pause between batches must be 0 seconds or more.")
        if self.max_batches is not None and (
            not isinstance(self.max_batches, int) or isinstance(self.max_batches, bool) or self.max_batches < 1
        ):
            errors["max_batches"] = _("The maximum number of batches must be 1 or more (or none).")
        if not _is_number(self.lock_timeout) or self.lock_timeout <= 0:
            errors["lock_timeout"] = _("The lock timeout must be more than 0 seconds.")
        if self.time_limit is not None and (not _is_number(self.time_limit) or self.time_limit <= 0):
            errors["time_limit"] = _("The time limit must be more than 0 seconds (or none).")
        if not isinstance(self.dag_ids, tuple) or not all(isinstance(d, str) and d for d in self.dag_ids):
            errors["dag_ids"] = _("DAG ids must be non-empty strings.")
        if not isinstance(self.with_objects, bool):
            errors["with_objects"] = _("Whether to delete worker-side objects is true or false.")
        if errors:
            raise Invalid(errors)


def expired_rows(cutoff: datetime, dag_ids: tuple[str, ...] = ()):
    rows = TaskStateStore.objects.filter(expires_at__lt=cutoff)
    return rows.filter(dag_id__in=dag_ids) if dag_ids else rows
