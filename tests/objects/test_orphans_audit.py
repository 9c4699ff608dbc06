"""An orphans run's audit event (``state_store_orphans --delete``): objects of both stores, so only users who
view both stores unscoped see it, and there is nothing to restore."""

import pytest

from statestore_admin.access.actors import Actor
from statestore_admin.audit import events as audit
from statestore_admin.core.errors import Invalid
from statestore_admin.exports import restore as restores
from statestore_admin.records.models import AuditEvent
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


@pytest.fixture
def event():
    started = audit.orphans_started(Actor.command(), {"older_than_seconds": 86400})
    audit.orphans_finished(started, deletion={"deleted": 1, "failed": 0}, deleted_refs=["file:///s/a/<b>k</b>"])
    return AuditEvent.objects.get(pk=started.pk)


def test_only_viewers_of_both_stores_see_it(event, client, user_factory, viewer):
    task_only = user_factory("task-only", perms=["task.view"])
    client.force_login(task_only)
    assert client.get(f"/audit/{event.pk}/").status_code == 403
    assert f"/audit/{event.pk}/" not in client.get("/audit/").content.decode()
    assert client.get(f"/api/statestore/v1/audit-events/{event.pk}").status_code == 403
    listed = client.get("/api/statestore/v1/audit-events").json()
    assert event.pk not in [e["id"] for e in listed["items"]]

    client.force_login(viewer)
    page = client.get(f"/audit/{event.pk}/").content.decode()
    assert "an orphans run deletes objects that no row references" in page
    assert "file:///s/a/&lt;b&gt;k&lt;/b&gt;" in page and "<b>k</b>" not in page
    listing = client.get("/audit/").content.decode()
    assert f"/audit/{event.pk}/" in listing and "every DAG and asset" in listing
    assert client.get(f"/api/statestore/v1/audit-events/{event.pk}").status_code == 200


def test_a_scoped_user_does_not_see_it(event, client, user_factory):
    from django.core.management import call_command

    scoped = user_factory("scoped", perms=["task.view", "asset.view"])
    call_command("grant_scope", "scoped", "--dag", "etl_*", verbosity=0)
    client.force_login(scoped)
    assert client.get(f"/audit/{event.pk}/").status_code == 404


def test_it_is_not_restorable(event):
    assert not event.restorable
    with pytest.raises(Invalid, match="objects without rows: there is nothing to restore"):
        restores.restore_event(actor=Actor.command(), event_id=event.pk)
