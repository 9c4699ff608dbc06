"""The expiry and add-key dialogs (issue 14, items 10 and 11), through the test client: the current expiry
labelled as such, the picker in the user's time zone, a past expiry confirmed on purpose, messages for
people, errors on the field they concern, the map indexes the task has, keys with blanks around them."""

import json
import re
from datetime import UTC, datetime, timedelta
from html import unescape
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from statestore_admin.airflow.models import AssetStateStore, TaskInstance, TaskStateStore
from statestore_admin.state import selectors
from tests.conftest import BOTH_DATABASES
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
BERLIN = "Europe/Berlin"


@pytest.fixture
def run(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl_orders")
    for map_index in (0, 1, 2, 5):
        task_instance_factory(run, task_id="train", map_index=map_index)
    task_instance_factory(run, task_id="submit")
    soon = timezone.now() + timedelta(days=3)
    task_key_factory(run, task_id="submit", key="job_id", value={"job": 7}, expires_at=soon)
    task_key_factory(run, task_id="submit", key="forever", value=1, expires_at=None)
    task_key_factory(run, task_id="submit", key="stale", value=1, expires_at=timezone.now() - timedelta(hours=2))
    return run


@pytest.fixture
def asset(asset_factory, asset_key_factory):
    asset = asset_factory(name="orders_raw")
    asset_key_factory(asset, key="cursor", value={"id": 7}, kind="api")
    return asset


@pytest.fixture
def berlin(client, operator):
    """The operator's browser is in Berlin (the zone cookie the pages read)."""
    client.force_login(operator)
    client.cookies["tz"] = BERLIN
    return client


def key(name):
    return TaskStateStore.objects.get(key=name)


def toast(response):
    assert response.status_code == 204, response.content.decode()
    return json.loads(response["HX-Trigger"])["toast"]["message"]


def field_errors(response, name) -> str:
    """The errors shown on field ``name`` (the block its widget's aria-describedby names)."""
    html = response.content.decode()
    found = re.search(rf'<div id="id_{name}_error">(.*?)</div>', html, re.S)
    return unescape(re.sub(r"<[^>]+>", " ", found.group(1))) if found else ""


def non_field_errors(response) -> str:
    found = re.search(r'<div class="error" role="alert">(.*?)</div>', response.content.decode(), re.S)
    return found.group(1) if found else ""


def expiry_url(name):
    return f"/keys/task/{key(name).pk}/expiry/"


# 10. The expiry dialog --------------------------------------------------------------------------------------
def test_the_current_expiry_is_labelled_and_shown_in_the_users_zone(berlin, run):
    html = flat(berlin.get(expiry_url("job_id"), **HX).content.decode())
    expires = key("job_id").expires_at
    local = expires.astimezone(ZoneInfo(BERLIN))
    assert "Now:" not in html
    current = re.search(r'data-testid="current-expiry">(.*?)</p>', html, re.S).group(1).replace("\xa0", " ")
    assert current.startswith("Current expiry: <time")
    assert f"{local.day} {local:%b %Y, %H:%M}" in current and "(in 3 days)" in current  # 2 days 23 h 59 min, rounded
    assert f'title="{local:%Y-%m-%d %H:%M:%S}' in current and f"{expires.astimezone(UTC):%H:%M:%S} UTC" in current
    # The picker: a datetime-local in Berlin's time, the zone named and sent with the form.
    assert 'type="datetime-local"' in html and f'value="{local:%Y-%m-%dT%H:%M}"' in html
    assert f'name="tz" value="{BERLIN}"' in html and f"In your time zone, {BERLIN}." in html
    assert "In 1 day" in html and "In 7 days" in html and "data-never" not in html  # Never: an option, once


def test_a_key_that_never_expires_says_so(berlin, run):
    html = flat(berlin.get(expiry_url("forever"), **HX).content.decode())
    assert "Current expiry: never (the key is kept until someone deletes it)." in html
    assert re.search(r'value="never"[^>]*checked', html)


def test_a_passed_expiry_says_what_it_means(berlin, run):
    html = flat(berlin.get(expiry_url("stale"), **HX).content.decode())
    assert "ago)</time>: passed, the next garbage collection deletes the key." in html


def test_a_time_picked_in_the_users_zone_is_stored_in_utc_and_told_for_people(berlin, run):
    response = berlin.post(expiry_url("job_id"), {"expiry": "at", "expires_at": "2030-06-01T12:00", "tz": BERLIN}, **HX)
    message = toast(response)
    assert key("job_id").expires_at == datetime(2030, 6, 1, 10, 0, tzinfo=UTC)  # CEST is UTC+2
    assert message.startswith("'job_id' expires on 1 Jun 2030, 12:00 (in ")
    assert "+00:00" not in message and "T1" not in message


def test_an_iso_time_with_its_offset_is_still_accepted(berlin, run):
    toast(berlin.post(expiry_url("job_id"), {"expiry": "at", "expires_at": "2030-01-02T03:04:05+02:00"}, **HX))
    assert key("job_id").expires_at == datetime(2030, 1, 2, 1, 4, 5, tzinfo=UTC)


def test_never_is_told_as_such(berlin, run):
    message = toast(berlin.post(expiry_url("job_id"), {"expiry": "never", "tz": BERLIN}, **HX))
    assert message == "'job_id' never expires."
    assert key("job_id").expires_at is None


def test_a_past_expiry_needs_an_explicit_confirmation(berlin, run):
    before = key("job_id").expires_at
    past = (timezone.now() - timedelta(hours=1)).astimezone(ZoneInfo(BERLIN))
    fields = {"expiry": "at", "expires_at": f"{past:%Y-%m-%dT%H:%M}", "tz": BERLIN}
    refused = berlin.post(expiry_url("job_id"), fields, **HX)
    assert refused.status_code == 422 and key("job_id").expires_at == before
    assert "This time has passed" in field_errors(refused, "expires_at")
    html = refused.content.decode()
    assert '<div class="warning" data-past-warning>' in html and 'name="confirm_past"' in html  # shown, not hidden
    message = toast(berlin.post(expiry_url("job_id"), {**fields, "confirm_past": "on"}, **HX))
    assert message.startswith("'job_id' has expired (") and "next garbage collection deletes it" in message
    assert key("job_id").expires_at == past.replace(second=0, microsecond=0).astimezone(UTC)


def test_the_past_warning_is_hidden_until_needed(berlin, run):
    html = berlin.get(expiry_url("job_id"), **HX).content.decode()
    assert "data-past-warning hidden" in html


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"expires_at": "", "tz": BERLIN}, "Pick a date and time"),
        ({"expires_at": "2030-03-31T02:30", "tz": BERLIN}, "2030-03-31 02:30 does not exist in Europe/Berlin"),
        ({"expires_at": "2030-06-01T12:00", "tz": "Mars/Olympus"}, "Unknown time zone 'Mars/Olympus'"),
        ({"expires_at": "2030-06-01T12:00", "tz": "../../etc/passwd"}, "Unknown time zone"),
        ({"expires_at": "2030-06-01T12:00"}, "naive date and time is ambiguous"),  # no zone at all: refused
        ({"expires_at": "9999-12-31T23:59", "tz": "America/New_York"}, "out of range"),
        ({"expires_at": "2030-02-30T12:00", "tz": BERLIN}, "Not a date and time"),
    ],
)
def test_bad_times_are_refused_on_the_field(berlin, run, fields, message):
    before = key("job_id").expires_at
    response = berlin.post(expiry_url("job_id"), {"expiry": "at", **fields}, **HX)
    assert response.status_code == 422 and message in field_errors(response, "expires_at")
    assert 'aria-describedby="id_expires_at_helptext id_expires_at_error"' in response.content.decode()
    assert key("job_id").expires_at == before


def test_the_add_form_uses_the_same_picker_and_confirmation(berlin, run):
    html = berlin.get(f"/runs/{run.pk}/tasks/submit/add/", **HX).content.decode()
    assert 'type="datetime-local"' in html and "data-past-warning hidden" in html and "data-expiry-form" in html
    # the picker's script is loaded once by the page the dialog opens on (base.html), not by the dialog
    assert "js/expiry.js" in berlin.get(f"/runs/{run.pk}/tasks/submit/").content.decode()
    past = {"key": "k", "value": "1", "map_index": "-1", "expiry": "at", "expires_at": "2020-01-01T00:00", "tz": BERLIN}
    refused = berlin.post(f"/runs/{run.pk}/tasks/submit/add/", past, **HX)
    assert refused.status_code == 422 and "This time has passed" in field_errors(refused, "expires_at")
    assert not TaskStateStore.objects.filter(key="k").exists()
    toast(berlin.post(f"/runs/{run.pk}/tasks/submit/add/", {**past, "confirm_past": "on"}, **HX))
    assert key("k").expires_at == datetime(2019, 12, 31, 23, 0, tzinfo=UTC)


# 11. Add key ---------------------------------------------------------------------------------------------
def options(response) -> list[tuple[str, str]]:
    select = re.search(r'<select name="map_index"[^>]*>(.*?)</select>', response.content.decode(), re.S).group(1)
    return re.findall(r'<option value="(-?\d+)"[^>]*>([^<]*)</option>', select)


def test_the_map_indexes_offered_are_the_tasks(berlin, run):
    assert options(berlin.get(f"/runs/{run.pk}/tasks/train/add/?map_index=2", **HX)) == [
        ("0", "0"),
        ("1", "1"),
        ("2", "2"),
        ("5", "5"),
    ]
    assert 'value="2" selected' in berlin.get(f"/runs/{run.pk}/tasks/train/add/?map_index=2", **HX).content.decode()
    assert options(berlin.get(f"/runs/{run.pk}/tasks/submit/add/", **HX)) == [("-1", "−1 (not mapped)")]


@pytest.mark.parametrize(
    ("task_id", "map_index", "message"),
    [
        ("submit", "7", "No map index 7: submit is not mapped in this run: its only map index is −1."),
        ("train", "7", "No map index 7: train has map indexes 0–2, 5 in this run."),
        ("train", "-1", "No map index -1: train has map indexes 0–2, 5 in this run."),
        ("train", "-2", "No map index -2"),
        ("train", str(2**40), f"No map index {2**40}"),
        ("nosuchtask", "-1", "nosuchtask has no task instance in this run: a key needs one."),
    ],
)
def test_a_map_index_without_a_task_instance_is_an_error_on_the_field(berlin, run, task_id, map_index, message):
    fields = {"key": "k", "value": "1", "map_index": map_index, "expiry": "never"}
    response = berlin.post(f"/runs/{run.pk}/tasks/{task_id}/add/", fields, **HX)
    assert response.status_code == 422 and message in field_errors(response, "map_index")
    assert "dag_id=" not in response.content.decode() and not non_field_errors(response)
    assert not TaskStateStore.objects.filter(key="k").exists()


def test_a_task_instance_deleted_while_the_form_was_open_is_an_error_on_the_field(berlin, run, monkeypatch):
    """The map indexes were read, then the task instance went: the service's "not found" lands on the field."""
    read = selectors.task_map_indexes

    def read_then_lose_it(scope):
        indexes = read(scope)
        TaskInstance.objects.filter(task_id=scope.task_id, map_index=5).delete()
        return indexes

    monkeypatch.setattr(selectors, "task_map_indexes", read_then_lose_it)
    fields = {"key": "k", "value": "1", "map_index": "5", "expiry": "never"}
    response = berlin.post(f"/runs/{run.pk}/tasks/train/add/", fields, **HX)
    assert response.status_code == 422
    assert "The task instance train [5] no longer exists." in field_errors(response, "map_index")
    assert "dag_id=" not in response.content.decode()


def test_an_existing_key_is_an_error_on_the_key(berlin, run, asset):
    fields = {"key": "job_id", "value": "1", "map_index": "-1", "expiry": "never"}
    response = berlin.post(f"/runs/{run.pk}/tasks/submit/add/", fields, **HX)
    assert response.status_code == 422 and "already exists on this task instance" in field_errors(response, "key")
    response = berlin.post(f"/assets/{asset.pk}/add/", {"key": "cursor", "value": "1"}, **HX)
    assert response.status_code == 422 and "already exists on this asset" in field_errors(response, "key")
    assert key("job_id").value == '{"job": 7}'


@pytest.mark.parametrize(("name", "where"), [(" job", "starts"), ("job\t", "ends"), ("\u00a0job ", "starts and ends")])
def test_a_task_key_with_blanks_around_it_needs_a_confirmation(berlin, run, name, where):
    fields = {"key": name, "value": "1", "map_index": "-1", "expiry": "never"}
    refused = berlin.post(f"/runs/{run.pk}/tasks/submit/add/", fields, **HX)
    assert refused.status_code == 422 and not TaskStateStore.objects.filter(key=name).exists()
    error = field_errors(refused, "key")
    assert f"The key {where} with a blank ({name!r}): a task reading 'job' would not find it." in error
    assert 'name="keep_blanks"' in refused.content.decode()
    assert toast(berlin.post(f"/runs/{run.pk}/tasks/submit/add/", {**fields, "keep_blanks": "on"}, **HX)) == (
        f"Added {name!r}."
    )
    assert TaskStateStore.objects.filter(key=name).exists()


def test_the_blanks_box_is_not_shown_before_it_is_needed(berlin, run, asset):
    assert 'name="keep_blanks"' not in berlin.get(f"/runs/{run.pk}/tasks/submit/add/", **HX).content.decode()
    assert 'name="keep_blanks"' not in berlin.get(f"/assets/{asset.pk}/add/", **HX).content.decode()


def test_an_asset_key_with_blanks_around_it_needs_a_confirmation(berlin, asset):
    refused = berlin.post(f"/assets/{asset.pk}/add/", {"key": "cursor ", "value": "1"}, **HX)
    assert refused.status_code == 422 and "The key ends with a blank ('cursor ')" in field_errors(refused, "key")
    assert AssetStateStore.objects.filter(asset=asset).count() == 1
    toast(berlin.post(f"/assets/{asset.pk}/add/", {"key": "cursor ", "value": "1", "keep_blanks": "on"}, **HX))
    assert AssetStateStore.objects.filter(asset=asset, key="cursor ").exists()


def test_the_dialogs_isolate_and_escape_user_text(berlin, run, asset_factory, task_key_factory):
    sneaky = "<b>\u202egnp.exe</b>"
    task_key_factory(run, task_id="submit", key=sneaky, value=1, expires_at=None)
    html = berlin.get(expiry_url(sneaky), **HX).content.decode()
    title = re.search(r'<h2 id="modal-title">(.*?)</h2>', html).group(1)
    assert title.startswith("Expiry of <code><bdi>&lt;b&gt;")
    assert 'class="hidden-char"' in title and "\u202e" not in title
    named = asset_factory(name="<i>\u202eorders</i>", uri="s3://x/y")
    title = re.search(r'<h2 id="modal-title">(.*?)</h2>', berlin.get(f"/assets/{named.pk}/add/", **HX).content.decode())
    assert title.group(1).startswith("Add a key to asset <bdi>&lt;i&gt;") and 'class="hidden-char"' in title.group(1)
