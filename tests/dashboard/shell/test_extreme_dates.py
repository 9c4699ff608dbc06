"""Times at the ends of the calendar (issue 36, item 3): an expiry or update time of 0001-01-01 or 9999-12-31,
as Airflow, a person or the API may write it, is shown as written for a reader in any time zone. Python's
datetimes end at years 1 and 9999, so such a time has no wall time in UTC+14 (9999-12-31 23:00) or west of UTC
(0001-01-01 00:00): the pages show it in UTC and say so, and never answer 500.

Rows in Airflow's real table (SQLite and PostgreSQL: its timestamptz takes both ends), pages through the test
client with the reader's zone in the ``tz`` cookie, as static/js/timezone.js writes it."""

import html
import json
import re
import zoneinfo
from datetime import UTC, datetime

import pytest
from django.db import connections
from django.template import Context, Template
from django.utils import timezone

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.core import formatting
from statestore_admin.dashboard.templatetags.display import absolute, utc_title
from statestore_admin.dashboard.timezones import as_wall_time
from tests.conftest import BOTH_DATABASES

EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
# Kiritimati is UTC+14 (no wall time after 9999-12-31 09:59 UTC); Adak the westmost zone of the US; Etc/GMT+12
# is UTC-12 at every date (Adak's time before 1867 was Russia's, east of UTC, so year 1 fits there).
ZONES = ("Pacific/Kiritimati", "America/Adak", "Etc/GMT+12")
HX = {"HTTP_HX_REQUEST": "true"}


def text_of(response) -> str:
    return html.unescape(re.sub(r"\s+", " ", response.content.decode()))


@pytest.mark.parametrize("zone", sorted(zoneinfo.available_timezones()))
def test_every_zone_shows_both_ends_as_written_or_in_its_own_time(zone):
    """Every zone the pages accept (the cookie holds any name Python's zone list has)."""
    with timezone.override(zoneinfo.ZoneInfo(zone)):
        for end, written in ((EARLIEST, "1 Jan 0001, 00:00"), (LATEST, "31 Dec 9999, 23:59")):
            shown = absolute(end)
            try:
                end.astimezone(zoneinfo.ZoneInfo(zone))
            except OverflowError:
                assert shown == f"{written} UTC", (zone, shown)
                assert utc_title(end) == f"{formatting.iso(end)[:19].replace('T', ' ')} UTC"
            else:
                assert not shown.endswith("UTC") or zone.endswith("UTC"), (zone, shown)
            rendered = Template("{% load display %}{% when t 'both' %}").render(Context({"t": end}))
            assert f'datetime="{formatting.iso(end)}"' in rendered


def test_the_api_format_and_the_chart_labels_keep_both_ends():
    assert formatting.iso(EARLIEST) == "0001-01-01T00:00:00Z"
    assert formatting.iso(LATEST) == "9999-12-31T23:59:59.999999Z"
    assert formatting.in_zone(datetime(1, 1, 1), zoneinfo.ZoneInfo("Etc/GMT+12")) == EARLIEST  # naive: UTC
    with timezone.override(zoneinfo.ZoneInfo("Pacific/Kiritimati")):
        assert as_wall_time("9999-12-31T23:59:00+00:00") == "9999-12-31T23:59:00+00:00"  # as typed: no wall time
        assert as_wall_time("9999-12-31T00:00:00+00:00") == "9999-12-31T14:00"


@pytest.mark.django_db(databases=BOTH_DATABASES)
class TestPages:
    @pytest.fixture
    def ends(self, dag_run_factory, task_instance_factory, task_key_factory):
        run = dag_run_factory(dag_id="etl", run_id="scheduled__2026-11-29T00:00:00+00:00")
        task_instance_factory(run, task_id="t")
        late = task_key_factory(run, task_id="t", key="late", expires_at=LATEST, updated_at=LATEST)
        early = task_key_factory(run, task_id="t", key="early", value=1, expires_at=EARLIEST, updated_at=EARLIEST)
        by_hand = task_key_factory(run, task_id="t", key="by_hand")
        with connections["airflow"].cursor() as cursor:  # as a person would, in SQL
            cursor.execute(
                "UPDATE task_state_store SET expires_at = %s, updated_at = %s WHERE id = %s",
                [LATEST, EARLIEST, by_hand.pk],
            )
        stored = TaskStateStore.objects.get(pk=by_hand.pk)
        assert (stored.expires_at, stored.updated_at) == (LATEST, EARLIEST)  # the database keeps both ends
        return {"run": run, "late": late, "early": early, "by_hand": by_hand}

    @pytest.mark.parametrize("zone", ZONES)
    def test_every_page_that_shows_them_answers_and_shows_them_as_written(self, client, operator, ends, zone):
        client.force_login(operator)
        client.cookies["tz"] = zone
        run, late, early = ends["run"], ends["late"], ends["early"]
        pages = [
            "/",
            "/gc/",
            "/dags/",
            "/dags/etl/",
            f"/runs/{run.pk}/",
            f"/runs/{run.pk}/tasks/t/",
            f"/runs/{run.pk}/tasks/t/?sort=expires_at",
            f"/runs/{run.pk}/tasks/t/?sort=-updated_at",
            f"/keys/task/{late.pk}/",
            f"/keys/task/{early.pk}/",
            f"/keys/task/{ends['by_hand'].pk}/",
            f"/keys/task/{late.pk}/story/",
            "/search/?q=late",
            "/search/?q=early&status=expired",
            "/audit/",
            "/insights/",
        ]
        for path in pages:
            response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)
        detail = text_of(client.get(f"/keys/task/{late.pk}/"))
        try:
            local = LATEST.astimezone(zoneinfo.ZoneInfo(zone))
        except OverflowError:
            assert "31 Dec 9999, 23:59 UTC" in detail
        else:
            assert f"{local.day} {local:%b} 9999, {local:%H:%M}" in detail
        assert "in 7973 years" in detail.replace("\xa0", " ")
        early_page = text_of(client.get(f"/keys/task/{early.pk}/"))
        try:
            EARLIEST.astimezone(zoneinfo.ZoneInfo(zone))
        except OverflowError:
            assert "1 Jan 0001, 00:00 UTC" in early_page
        assert 'datetime="0001-01-01T00:00:00Z"' in early_page
        task_page = client.get(f"/runs/{run.pk}/tasks/t/").content.decode()
        assert 'datetime="9999-12-31T23:59:59.999999Z"' in task_page and '9999-12-31 23:59:59 UTC">' in task_page

    @pytest.mark.parametrize("zone", ZONES)
    def test_downloads_and_api_reads_keep_utc(self, client, operator, ends, zone):
        client.force_login(operator)
        client.cookies["tz"] = zone
        run = ends["run"]
        for path in (
            f"/runs/{run.pk}/export/?format=csv",
            f"/runs/{run.pk}/export/?format=json",
            f"/runs/{run.pk}/tasks/t/export/?format=csv",
            "/search/export/?q=late&format=csv",
        ):
            response = client.get(path)
            body = b"".join(response.streaming_content) if response.streaming else response.content
            assert response.status_code == 200, path
            assert b"9999-12-31T23:59:59.999999Z" in body and b"0001-01-01T00:00:00Z" in body, path
        listed = client.get(f"/api/v2/dags/etl/dagRuns/{run.run_id.replace('+', '%2B')}/taskInstances/t/state-store")
        assert listed.status_code == 200
        times = {entry["key"]: entry.get("expires_at") for entry in listed.json()["task_state_store"]}
        assert times["late"].startswith("9999-12-31T23:59:59") and times["early"].startswith("0001-01-01T00:00:00")
        search = client.get("/api/statestore/v1/search/task-keys?q=late")
        assert search.status_code == 200 and "9999-12-31T23:59:59" in search.content.decode()
        assert client.get("/api/statestore/v1/gc/dry-run").status_code == 200

    @pytest.mark.parametrize("zone", ZONES)
    def test_the_expiry_dialog_of_an_end_of_the_calendar(self, client, operator, ends, zone):
        """It opens on the key's expiry; where the reader's zone has no such time, in UTC, which the form
        carries (tz), so sending it back keeps the expiry."""
        client.force_login(operator)
        client.cookies["tz"] = zone
        late = ends["late"]
        dialog = client.get(f"/keys/task/{late.pk}/expiry/", **HX)
        assert dialog.status_code == 200
        form = dialog.content.decode()
        shown = re.search(r'name="expires_at" value="([^"]*)"', form).group(1)
        tz = re.search(r'name="tz" value="([^"]*)"', form).group(1)
        try:
            wall = LATEST.astimezone(zoneinfo.ZoneInfo(zone))
        except OverflowError:
            assert (shown, tz) == ("9999-12-31T23:59", "UTC") and "In UTC" in form
        else:
            assert (shown, tz) == (f"{wall:%Y-%m-%dT%H:%M}", zone)
        sent = client.post(f"/keys/task/{late.pk}/expiry/", {"expiry": "at", "expires_at": shown, "tz": tz}, **HX)
        assert sent.status_code == 204, sent.content.decode()
        assert TaskStateStore.objects.get(pk=late.pk).expires_at.year == 9999

    def test_setting_an_end_through_the_dashboard_and_the_api(self, client, operator, ends):
        client.force_login(operator)
        early, late = ends["early"], ends["late"]
        client.cookies["tz"] = "Pacific/Kiritimati"
        url = f"/keys/task/{early.pk}/expiry/"
        latest = {"expiry": "at", "expires_at": "9999-12-31T23:59"}
        accepted = client.post(url, {**latest, "tz": "Pacific/Kiritimati"}, **HX)
        assert accepted.status_code == 204
        assert TaskStateStore.objects.get(pk=early.pk).expires_at == datetime(9999, 12, 31, 9, 59, tzinfo=UTC)
        client.cookies["tz"] = "Etc/GMT+12"
        refused = client.post(url, {**latest, "tz": "Etc/GMT+12"}, **HX)  # 9999-12-31 past 23:59 in UTC
        assert refused.status_code == 422 and "expires_at" in refused.content.decode()
        past = client.post(
            url, {"expiry": "at", "expires_at": "0001-01-01T00:00", "tz": "UTC", "confirm_past": "on"}, **HX
        )
        assert past.status_code == 204 and TaskStateStore.objects.get(pk=early.pk).expires_at == EARLIEST
        for path in ("/audit/", f"/keys/task/{early.pk}/"):  # the audit trail holds both ends now
            assert client.get(path).status_code == 200, path
        events = client.get("/api/statestore/v1/audit-events").json()
        assert "0001-01-01T00:00:00Z" in json.dumps(events)
        for event in events["items"]:
            assert client.get(f"/audit/{event['id']}/").status_code == 200
            assert client.get(f"/api/statestore/v1/audit-events/{event['id']}").status_code == 200
        assert client.get("/audit/export/?format=csv").status_code == 200

        item = f"/api/v2/dags/etl/dagRuns/{ends['run'].run_id.replace('+', '%2B')}/taskInstances/t/state-store/late"
        for written in ("9999-12-31T23:59:59.999999Z", "0001-01-01T00:00:00Z"):
            body = json.dumps({"value": 1, "expires_at": written})
            assert client.put(item, body, content_type="application/json").status_code == 204, written
            assert formatting.iso(TaskStateStore.objects.get(pk=late.pk).expires_at) == written
            assert client.get(item).status_code == 200
        beyond = json.dumps({"value": 1, "expires_at": "0001-01-01T00:00:00+01:00"})
        refused = client.put(item, beyond, content_type="application/json")
        assert refused.status_code == 422 and "expires_at" in refused.content.decode()


@pytest.mark.django_db(databases=BOTH_DATABASES)
@pytest.mark.parametrize("zone", ZONES)
def test_a_delete_confirmation_of_keys_written_at_an_end_of_the_calendar(
    client, operator, dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory, zone
):
    """The confirmation's download link names the latest listed write (9999-12-31 23:59:59.999999 UTC): in UTC,
    whatever the reader's zone (it answered 500 in UTC+14: the template put the time in that zone), and the
    link it gives downloads every listed key."""
    client.force_login(operator)
    client.cookies["tz"] = zone
    run = dag_run_factory(dag_id="etl", run_id="manual_1")
    task_instance_factory(run, task_id="t")
    keys = [task_key_factory(run, task_id="t", key=f"k{i}", updated_at=end) for i, end in enumerate((LATEST, EARLIEST))]
    asset = asset_factory(name="orders")
    for key in ("a", "b"):
        asset_key_factory(asset, key=key)
    AssetStateStore.objects.filter(asset_id=asset.pk, key="a").update(updated_at=LATEST)
    ids = "&".join(f"ids={key.pk}" for key in keys)
    for path in (f"/keys/task/delete/?{ids}", f"/assets/{asset.pk}/delete/?all=1"):
        for headers in ({}, HX):
            response = client.get(path, **headers)
            assert response.status_code == 200, (path, response.status_code)
        link = html.unescape(re.search(r'href="([^"]*confirmed_at=[^"]*)"', response.content.decode()).group(1))
        assert "confirmed_at=9999-12-31T23%3A59%3A59.999999Z" in link, link
        download = client.get(link)
        body = b"".join(download.streaming_content) if download.streaming else download.content
        assert download.status_code == 200 and len(json.loads(body)["keys"]) == 2, body


@pytest.mark.django_db(databases=BOTH_DATABASES)
@pytest.mark.parametrize("days", ["3000000", "999999999", "1000000000000"])
def test_a_default_retention_past_the_calendar_refuses_the_write(
    client, operator, dag_run_factory, task_instance_factory, task_key_factory, monkeypatch, days
):
    """Airflow's ``[state_store] default_retention_days`` so large that now plus it is past 9999-12-31: a write with
    the default expiry (the API without ``expires_at``, the dialogs' "Default") is refused, naming the setting
    (422), instead of a 500; nothing is written."""
    monkeypatch.setenv("AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS", days)
    client.force_login(operator)
    client.cookies["tz"] = "Pacific/Kiritimati"
    run = dag_run_factory(dag_id="etl", run_id="manual_1")
    task_instance_factory(run, task_id="t")
    key = task_key_factory(run, task_id="t", key="k", value=1, expires_at=None)
    item = "/api/v2/dags/etl/dagRuns/manual_1/taskInstances/t/state-store/"
    put = client.put(item + "new", json.dumps({"value": 1}), content_type="application/json")
    assert put.status_code == 422 and "default_retention_days" in put.content.decode(), put.content
    put = client.put(item + "k", json.dumps({"value": 2}), content_type="application/json")
    assert put.status_code == 422 and "default_retention_days" in put.content.decode(), put.content
    for path, data in (
        (f"/keys/task/{key.pk}/expiry/", {"expiry": "default"}),
        (f"/runs/{run.pk}/tasks/t/add/", {"key": "new", "value": "1", "expiry": "default"}),
    ):
        answer = client.post(path, {**data, "tz": "Pacific/Kiritimati"}, **HX)
        assert answer.status_code == 422 and "default_retention_days" in html.unescape(answer.content.decode()), path
        assert client.get(path, **HX).status_code == 200, path
    assert list(TaskStateStore.objects.values_list("key", "value", "expires_at")) == [("k", "1", None)]
    assert (
        client.put(
            item + "k", json.dumps({"value": 3, "expires_at": None}), content_type="application/json"
        ).status_code
        == 204
    )
