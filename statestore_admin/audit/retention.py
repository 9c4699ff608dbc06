"""Retention of the audit trail: ``prune`` deletes events older than a given age, with their keys.

The trail grows with every change; ``manage.py audit_prune --older-than DAYS`` (scheduled daily, see
docs/gc.md) keeps it bounded. Deletion goes in batches, each its own short transaction: a batch of
event ids is selected through the ``at`` index, their ``AuditKey`` rows are deleted, then the events.
Memory and lock time stay bounded whatever the number of events; a run stopped half-way keeps the
batches it committed and the next run goes on. Rows mirrored into Airflow's ``log`` table
(``AUDIT_TO_AIRFLOW_LOG``) belong to Airflow and are not touched. The run itself is an event (action
``prune``, pending before the first batch, done with the counts): who pruned the trail stays in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import router, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.access.actors import Actor
from statestore_admin.audit import events
from statestore_admin.core.errors import Invalid
from statestore_admin.records.models import AuditEvent, AuditKey

MIN_AGE = timedelta(days=1)


@dataclass
class PruneResult:
    cutoff: datetime
    events: int = 0
    keys: int = 0
    batches: int = 0
    dry_run: bool = False

    def describe(self) -> str:
        verb = "Would delete" if self.dry_run else "Deleted"
        text = f"{verb} {self.events} audit event(s) and {self.keys} audited key(s)"
        text += f" older than {self.cutoff.isoformat()}"
        return text + ("." if self.dry_run else f" in {self.batches} batch(es).")


def _old_events(cutoff: datetime):
    return AuditEvent.objects.filter(at__lt=cutoff)


def prune(
    older_than: timedelta,
    batch_size: int = 1000,
    *,
    actor: Actor,
    dry_run: bool = False,
    now: datetime | None = None,
) -> PruneResult:
    """Delete the audit events recorded before ``now - older_than`` and their keys, ``batch_size`` events
    a transaction, audited as ``actor``. ``dry_run``: count them, delete nothing. ``Invalid`` for an age under
    one day or a batch size under 1."""
    errors = {}
    if not isinstance(older_than, timedelta) or older_than < MIN_AGE:
        errors["older_than"] = _("Keep at least one day of audit events: the age must be 1 day or more.")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        errors["batch_size"] = _("The batch size must be 1 or more.")
    if errors:
        raise Invalid(errors)
    result = PruneResult(cutoff=(now or timezone.now()) - older_than, dry_run=dry_run)
    if dry_run:
        result.events = _old_events(result.cutoff).count()
        result.keys = AuditKey.objects.filter(event__at__lt=result.cutoff).count()
        return result
    event = events.run_started(actor, AuditEvent.Action.PRUNE, {"cutoff": result.cutoff.isoformat()})
    error = None
    try:
        _delete_batches(result, batch_size, keep=event.pk)
    except BaseException as exc:  # a database error or an interruption: the event says so
        error = exc
        raise
    finally:
        details = {"events": result.events, "keys": result.keys, "batches": result.batches}
        events.run_finished(event, details=details, changed=bool(result.events), error=error)
    return result


def _delete_batches(result: PruneResult, batch_size: int, keep: int) -> None:
    """``keep``: the run's own event (older than the cutoff only when ``now`` is in the future)."""
    alias = router.db_for_write(AuditEvent)
    while True:
        with transaction.atomic(using=alias):
            old = _old_events(result.cutoff).exclude(pk=keep).order_by("at")
            ids = list(old.values_list("id", flat=True)[:batch_size])
            if not ids:
                return
            keys, _ = AuditKey.objects.filter(event_id__in=ids).delete()
            # A newer restore of a pruned event stays; it no longer points at it (on_delete SET_NULL).
            AuditEvent.objects.filter(restored_from_id__in=ids).update(restored_from=None)
            _, deleted = AuditEvent.objects.filter(id__in=ids).only("id").delete()
        result.keys += keys
        result.events += deleted.get(AuditEvent._meta.label, 0)
        result.batches += 1
        if len(ids) < batch_size:
            return
