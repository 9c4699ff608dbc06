"""The audit trail, exports and restore at Airflow 3.4's coordinates: a key is (run, task, region, index, key).

Two iterations of a loop hold keys of the same name at the same index in different regions: each event and
export names its region (NULL / null outside any region, as everything recorded on 3.3), a restore puts a
key back onto exactly its coordinates, and a region that does not exist or is another run's is refused with
nothing changed. What was recorded outside any region restores onto the sentinel region, on both series.
"""

import csv
import io
import json
import re
import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connections

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.airflow.versions import SENTINEL_REGION_ID, schema_of
from statestore_admin.audit import events as audit
from statestore_admin.core.errors import Invalid
from statestore_admin.exports import documents as exports
from statestore_admin.exports import restore as restores
from statestore_admin.records.models import AuditEvent, AuditKey
from statestore_admin.state import selectors, services
from statestore_admin.state.selectors import TaskAddress
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


def rows():
    return sorted(
        TaskStateStore.objects.values_list("task_id", "region_id", "map_index", "key", "value", "expires_at"),
        key=str,
    )


@pytest.fixture
def loop(dag_run_factory, task_instance_factory, task_key_factory, region_factory):
    """A loop's two iterations (regions) and the same task outside it, each with a key "cursor" at index 0."""
    run = dag_run_factory(dag_id="etl_loop", run_id="manual__loop")
    first, second = region_factory(run), region_factory(run)
    for region in (first.pk, second.pk, SENTINEL_REGION_ID):
        task_instance_factory(run, task_id="step", map_index=0, region_id=region)
    task_key_factory(run, task_id="step", map_index=0, region_id=first.pk, key="cursor", value=1)
    task_key_factory(run, task_id="step", map_index=0, region_id=second.pk, key="cursor", value=2)
    task_key_factory(run, task_id="step", map_index=0, key="cursor", value=0)
    return {"run": run, "first": first.pk, "second": second.pk}


def delete_in(actor, run, region_id):
    address = TaskAddress(run.dag_id, run.run_id, "step", 0, region_id)
    services.delete_task_keys(actor=actor, selection=services.TaskSelection.of_instance(address))
    return AuditEvent.objects.get(action="delete")


# On Airflow 3.4 ------------------------------------------------------------------------------------------
def test_a_delete_in_a_region_is_recorded_there_and_undone_there(loop, ui):
    before = rows()
    event = delete_in(ui, loop["run"], loop["second"])
    assert (event.task_id, event.map_index, event.region_id) == ("step", 0, loop["second"])
    (key,) = event.keys.all()
    assert (key.key, key.map_index, key.region_id, key.before_value) == ("cursor", 0, loop["second"], "2")
    entry = audit.event_entry(event)
    assert (entry["map_index"], entry["region_id"]) == (0, str(loop["second"]))
    assert len(rows()) == 2  # only the second iteration's key went

    outcome = restores.restore_event(actor=ui, event_id=event.pk)
    assert outcome.restored == 1 and rows() == before
    restore = AuditEvent.objects.get(action="restore")
    assert (restore.map_index, restore.region_id, restore.keys.get().region_id) == (0, loop["second"], loop["second"])


def test_events_outside_any_region_record_null(loop, ui):
    event = delete_in(ui, loop["run"], SENTINEL_REGION_ID)
    assert (event.map_index, event.region_id, event.keys.get().region_id) == (0, None, None)
    assert audit.event_entry(event)["region_id"] is None


def test_an_event_across_regions_names_no_index(loop, ui):
    ids = tuple(TaskStateStore.objects.filter(key="cursor").values_list("pk", flat=True))
    services.delete_task_keys(actor=ui, selection=services.TaskSelection(ids=ids))
    event = AuditEvent.objects.get(action="delete")
    # the same index in three regions is three task instances: the event names their task, not one index
    assert (event.task_id, event.map_index, event.region_id, event.key_count) == ("step", None, None, 3)
    assert sorted(map(str, event.keys.values_list("region_id", flat=True))) == sorted(
        ["None", str(loop["first"]), str(loop["second"])]
    )


def test_a_keys_history_is_of_its_region(loop, ui):
    delete_in(ui, loop["run"], loop["first"])
    restores.restore_event(actor=ui, event_id=AuditEvent.objects.get(action="delete").pk)
    first = TaskStateStore.objects.get(region_id=loop["first"])
    second = TaskStateStore.objects.get(region_id=loop["second"])
    outside = TaskStateStore.objects.get(region_id=SENTINEL_REGION_ID)
    assert [k.event.action for k in selectors.task_key_history(first)] == ["restore", "delete"]
    assert selectors.task_key_history(second) == [] and selectors.task_key_history(outside) == []


def test_an_export_names_the_region_and_restores_onto_it(loop, ui):
    run = loop["run"]
    document = json.loads("".join(exports.run_keys(run).json()))
    regions = sorted((e["region_id"] or "") for e in document["keys"])
    assert regions == sorted(["", str(loop["first"]), str(loop["second"])])
    csv_rows = list(csv.DictReader(io.StringIO("".join(exports.run_keys(run).csv()).lstrip("\ufeff"))))
    assert sorted(r["region_id"] for r in csv_rows) == regions
    before = rows()
    TaskStateStore.objects.all().delete()
    outcome = restores.restore_document(actor=ui, document=document)
    assert outcome.restored == 3 and rows() == before


def test_a_region_that_does_not_exist_is_refused_with_nothing_changed(loop, ui):
    before, events = rows(), AuditEvent.objects.count()
    entry = {"store": "task", "dag_id": "etl_loop", "run_id": "manual__loop", "task_id": "step", "map_index": 0}
    document = {"format": exports.FORMAT, "version": 1, "keys": []}
    missing = uuid.uuid4()
    document["keys"] = [
        {**entry, "key": "fine", "value": 1},  # restorable, and not restored either
        {**entry, "region_id": str(missing), "key": "cursor", "value": 9},
    ]
    with pytest.raises(Invalid, match=f"region {missing} of 'cursor' does not exist"):
        restores.restore_document(actor=ui, document=document)
    assert rows() == before and AuditEvent.objects.count() == events


def test_a_region_of_another_run_is_refused_with_nothing_changed(loop, ui, dag_run_factory, region_factory):
    other = region_factory(dag_run_factory(dag_id="etl_loop", run_id="manual__other"))
    before, events = rows(), AuditEvent.objects.count()
    document = {
        "format": exports.FORMAT,
        "version": 1,
        "keys": [
            {
                "store": "task",
                "dag_id": "etl_loop",
                "run_id": "manual__loop",
                "task_id": "step",
                "map_index": 0,
                "region_id": str(other.pk),
                "key": "cursor",
                "value": 9,
            }
        ],
    }
    with pytest.raises(Invalid, match="belongs to 'etl_loop' / 'manual__other', not to 'etl_loop' / 'manual__loop'"):
        restores.restore_document(actor=ui, document=document)
    assert rows() == before and AuditEvent.objects.count() == events


def test_an_event_whose_region_is_gone_is_refused_with_nothing_changed(loop, ui):
    event = delete_in(ui, loop["run"], loop["first"])
    AuditKey.objects.filter(event=event).update(region_id=uuid.uuid4())  # as if the region were deleted since
    before, events = rows(), AuditEvent.objects.count()
    with pytest.raises(Invalid, match="does not exist"):
        restores.restore_event(actor=ui, event_id=event.pk)
    assert rows() == before and AuditEvent.objects.count() == events


# On both series ------------------------------------------------------------------------------------------
@pytest.fixture
def plain(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl_plain", run_id="manual__plain")
    task_instance_factory(run, task_id="fold", map_index=1)
    task_key_factory(run, task_id="fold", map_index=1, key="checkpoint", value={"x": 1})
    return run


def test_a_file_without_region_ids_restores_outside_any_region(plain, ui):
    """What an export of Airflow 3.3 holds (no region_id at all) restores onto the same key on either series:
    Airflow's migration keeps those keys at the sentinel region, map_index as region_index."""
    document = {
        "format": exports.FORMAT,
        "version": 1,
        "keys": [
            {
                "store": "task",
                "dag_id": "etl_plain",
                "run_id": "manual__plain",
                "task_id": "fold",
                "map_index": 1,
                "key": "checkpoint",
                "value": {"x": 2},
                "expires_at": None,
            }
        ],
    }
    outcome = restores.restore_document(actor=ui, document=document, overwrite=True)
    assert outcome.restored == 1
    assert rows() == [("fold", SENTINEL_REGION_ID, 1, "checkpoint", '{"x": 2}', None)]
    assert AuditEvent.objects.get(action="restore").keys.get().region_id is None


def test_an_event_recorded_outside_any_region_restores_onto_the_sentinel(plain, ui):
    """An event recorded on 3.3 (region_id NULL) is undone onto the sentinel region, whichever series."""
    address = TaskAddress("etl_plain", "manual__plain", "fold", 1)
    services.delete_task_keys(actor=ui, selection=services.TaskSelection.of_instance(address))
    event = AuditEvent.objects.get(action="delete")
    assert event.region_id is None and event.keys.get().region_id is None
    assert restores.restore_event(actor=ui, event_id=event.pk).restored == 1
    assert rows() == [("fold", SENTINEL_REGION_ID, 1, "checkpoint", '{"x": 1}', None)]


def test_an_export_outside_any_region_says_null(plain):
    (entry,) = json.loads("".join(exports.run_keys(plain).json()))["keys"]
    assert entry["region_id"] is None and entry["map_index"] == 1


@pytest.mark.parametrize("given", [17, "not-a-uuid", ["x"]])
def test_a_region_id_that_is_no_uuid_is_refused(plain, ui, given):
    document = {
        "format": exports.FORMAT,
        "version": 1,
        "keys": [
            {
                "store": "task",
                "dag_id": "etl_plain",
                "run_id": "manual__plain",
                "task_id": "fold",
                "map_index": 1,
                "region_id": given,
                "key": "checkpoint",
                "value": 3,
            }
        ],
    }
    with pytest.raises(Invalid, match=r'keys\[0\]: "region_id" must be a UUID'):
        restores.restore_document(actor=ui, document=document)


def test_a_region_on_airflow_33_is_refused(plain, ui):
    if schema_of(connections["airflow"]).regions:
        pytest.skip("Airflow 3.3 only: the default AIRFLOW_FIXTURE_SERIES")
    before = rows()
    region = uuid.uuid4()
    document = {
        "format": exports.FORMAT,
        "version": 1,
        "keys": [
            {
                "store": "task",
                "dag_id": "etl_plain",
                "run_id": "manual__plain",
                "task_id": "fold",
                "map_index": 1,
                "region_id": str(region),
                "key": "checkpoint",
                "value": 3,
            }
        ],
    }
    with pytest.raises(Invalid, match=f"belongs to region {region} .* Airflow 3.3 has no regions"):
        restores.restore_document(actor=ui, document=document)
    assert rows() == before


def test_the_audit_pages_show_the_region(loop, ui, client, operator):
    event = delete_in(ui, loop["run"], loop["second"])
    client.force_login(operator)
    # Named by its place, as the task instance page names it (issue 42 item 12), not by the region's id.
    coordinate = re.compile(r'data-testid="coordinate">(.*?)</span>')
    listed = client.get("/audit/").content.decode()
    assert coordinate.findall(listed) == ["group loop · expansion 0"]
    shown = client.get(f"/audit/{event.pk}/").content.decode()
    assert f"<dt>Region</dt><dd><code>{loop['second']}</code>" in shown  # the id itself, for Airflow's tables
    assert coordinate.findall(shown) == ["group loop · expansion 0"] * 2  # the event and the key's own line


def test_the_audit_pages_show_no_region_outside_one(plain, ui, client, operator):
    address = TaskAddress("etl_plain", "manual__plain", "fold", 1)
    services.delete_task_keys(actor=ui, selection=services.TaskSelection.of_instance(address))
    event = AuditEvent.objects.get(action="delete")
    client.force_login(operator)
    assert "in region" not in flat(client.get("/audit/").content.decode())
    assert "<dt>Region</dt>" not in flat(client.get(f"/audit/{event.pk}/").content.decode())
    assert "fold [1]" in flat(client.get("/audit/").content.decode())


def test_every_face_refuses_a_missing_region_in_the_same_words(loop, ui, client, operator):
    missing = uuid.uuid4()
    entry = {"store": "task", "dag_id": "etl_loop", "run_id": "manual__loop", "task_id": "step", "map_index": 0}
    document = {"format": exports.FORMAT, "version": 1, "keys": [{**entry, "region_id": str(missing), "key": "k"}]}
    document["keys"][0]["value"] = 1
    before, events = rows(), AuditEvent.objects.count()
    words = f"Nothing was restored: region {missing} of 'k' does not exist (any more) in 'etl_loop' / 'manual__loop'."
    api = client.post(
        "/api/statestore/v1/restore",
        json.dumps(document),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(operator)[1]}",
    )
    assert api.status_code == 422 and words in json.dumps(api.json()["detail"]).replace('\\"', '"')
    client.force_login(operator)
    upload = SimpleUploadedFile("keys.json", json.dumps(document).encode())
    page = client.post("/audit/restore-file/", {"file": upload}, HTTP_HX_REQUEST="true")
    assert words.replace("'", "&#x27;") in page.content.decode()
    assert rows() == before and AuditEvent.objects.count() == events
