"""`manage.py audit_prune`: audit retention."""

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from statestore_admin.state import retention
from statestore_admin.state.errors import Invalid
from statestore_admin.state.models import AuditEvent, AuditKey

from .conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


def run(command, *args, **options):
    """Run a command; return (stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    call_command(command, *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


# audit_prune -----------------------------------------------------------------------------------------
def make_event(days_ago: float, keys: int = 2, **fields) -> AuditEvent:
    event = AuditEvent.objects.create(
        at=timezone.now() - timedelta(days=days_ago),
        status=AuditEvent.Status.DONE,
        actor="alice",
        via="ui",
        action="set",
        store="task",
        key_count=keys,
        **fields,
    )
    AuditKey.objects.bulk_create(
        [
            AuditKey(event=event, dag_id="d", run_id="r", task_id="t", map_index=-1, key=f"k{n}", after_value="1")
            for n in range(keys)
        ]
    )
    return event


@pytest.fixture
def history():
    old = [make_event(400 + n) for n in range(5)]
    recent = [make_event(days) for days in (364, 30, 0)]
    return old, recent


def test_prune_deletes_old_events_and_their_keys_in_batches(history):
    old, recent = history
    out, _ = run("audit_prune", older_than=365, batch_size=2)
    assert out.startswith("Deleted 5 audit event(s) and 10 audited key(s) older than ")
    assert out.rstrip().endswith("in 3 batch(es).")
    assert set(AuditEvent.objects.values_list("pk", flat=True)) == {e.pk for e in recent}
    assert set(AuditKey.objects.values_list("event_id", flat=True)) == {e.pk for e in recent}
    assert AuditKey.objects.count() == 6  # the recent events keep every key


def test_prune_dry_run_counts_and_deletes_nothing(history):
    out, _ = run("audit_prune", older_than=365, dry_run=True)
    assert out.startswith("Would delete 5 audit event(s) and 10 audited key(s) older than ")
    assert AuditEvent.objects.count() == 8 and AuditKey.objects.count() == 16


def test_prune_with_nothing_old_is_a_no_op(history):
    out, _ = run("audit_prune", older_than=3650)
    assert out.startswith("Deleted 0 audit event(s) and 0 audited key(s)")
    assert AuditEvent.objects.count() == 8


def test_prune_default_batch_size_and_exact_boundary():
    make_event(2.0 + 1 / 24)
    kept = make_event(2.0 - 1 / 24)
    result = retention.prune(timedelta(days=2))
    assert (result.events, result.keys, result.batches) == (1, 2, 1)
    assert list(AuditEvent.objects.values_list("pk", flat=True)) == [kept.pk]


def test_a_restore_of_a_pruned_event_stays(history):
    old, _ = history
    restore = make_event(1, restored_from=old[0])
    run("audit_prune", older_than=365)
    restore.refresh_from_db()
    assert restore.restored_from is None and AuditKey.objects.filter(event=restore).count() == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"older_than": 0}, "--older-than"),
        ({"older_than": -5}, "--older-than"),
        ({"older_than": 30, "batch_size": 0}, "--batch-size"),
    ],
)
def test_prune_refuses_bad_numbers(history, options, message):
    with pytest.raises(CommandError, match=message) as excinfo:
        run("audit_prune", **options)
    assert excinfo.value.returncode == 2
    assert AuditEvent.objects.count() == 8


def test_prune_rules_are_in_the_domain():
    with pytest.raises(Invalid) as excinfo:
        retention.prune(timedelta(hours=23), batch_size=0)
    assert set(excinfo.value.message_dict) == {"older_than", "batch_size"}
