"""How pages show times, counts and sizes (issue 14, items 10 and 16): the user's time zone with UTC on
hover, relative times in both directions, thousands separators, the 404 page, the favicon, the largest
values' runs and the demo's count."""

import re
import zoneinfo
from datetime import UTC, datetime, timedelta
from io import StringIO
from urllib.parse import quote

import pytest
from django.core.management import call_command
from django.template import Context, Template, TemplateSyntaxError
from django.utils import timezone

from statestore_admin.access.actors import Actor
from statestore_admin.dashboard.templatetags.display import num, size
from statestore_admin.stats.snapshots import take_snapshot
from tests.conftest import BOTH_DATABASES

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def render(source: str, **context) -> str:
    return Template("{% load display %}" + source).render(Context(context))


def test_relative_times_say_in_for_the_future_and_ago_for_the_past():
    def when(**delta):
        return re.sub(r"\s+", " ", render("{% when t now=now %}", t=NOW + timedelta(**delta), now=NOW))

    assert ">in 5 minutes</time>" in when(minutes=5)
    assert ">5 minutes ago</time>" in when(minutes=-5)
    assert ">in 3 days</time>" in when(days=3)
    assert ">just now</time>" in when(seconds=20)
    assert ">just now</time>" in when(seconds=-20)
    assert "0 minutes" not in when(seconds=30)


def test_a_time_is_shown_in_the_active_zone_with_utc_on_hover():
    with timezone.override(zoneinfo.ZoneInfo("Europe/Berlin")):
        html = render('{% when t "absolute" %}', t=NOW)
    assert html == (
        '<time datetime="2026-11-30T12:00:00Z" '
        'title="2026-11-30 13:00:00 CET (Europe/Berlin) · 2026-11-30 12:00:00 UTC">30 Nov 2026, 13:00</time>'
    )
    with timezone.override(zoneinfo.ZoneInfo("UTC")):
        html = render('{% when t "seconds" %}', t=NOW + timedelta(seconds=7))
    assert 'title="2026-11-30 12:00:07 UTC">30 Nov 2026, 12:00:07</time>' in html
    with timezone.override(zoneinfo.ZoneInfo("America/New_York")):
        html = render('{% when t "both" now=now %}', t=NOW - timedelta(hours=2), now=NOW)
    assert ">30 Nov 2026, 05:00 (2\xa0hours ago)</time>" in html


def test_no_time_shows_the_empty_text_and_a_bad_style_is_an_error():
    assert render('{% when t empty="never" %}', t=None) == "never"
    with pytest.raises(TemplateSyntaxError):
        render('{% when t "fancy" %}', t=NOW)


def test_counts_and_sizes_have_thousands_separators():
    assert num(1234567) == "1,234,567"
    assert num(5) == "5"
    assert num(None) is None and num("text") == "text"
    assert size(1) == "1 B"
    assert size(1023) == "1,023 B"
    assert size(1536) == "1.5 KiB"
    assert size(5 * 1024**2) == "5.0 MiB"
    assert size(3 * 1024**5) == "3,072.0 TiB"


@pytest.mark.django_db(databases=BOTH_DATABASES)
class TestPages:
    @pytest.fixture
    def world(self, dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
        now = timezone.now()
        runs = []
        for day in (1, 2):
            run = dag_run_factory(dag_id="etl", run_id=f"scheduled__2026-11-{day:02d}T00:00:00+00:00")
            task_instance_factory(run, task_id="submit")
            task_key_factory(
                run, task_id="submit", key="payload", value="x" * 1500, expires_at=now + timedelta(minutes=5)
            )
            runs.append(run)
        asset = asset_factory(name="orders", uri="s3://warehouse/orders")
        asset_key_factory(asset, key="watermark", value="2026-11-30", kind="api")
        return {"runs": runs, "asset": asset}

    def test_the_header_names_the_zone_and_times_follow_the_cookie(self, client, operator, world):
        client.force_login(operator)
        run = world["runs"][0]
        client.cookies["tz"] = "Asia/Tokyo"
        html = client.get(f"/runs/{run.pk}/tasks/submit/").content.decode()
        header = re.search(r'class="time-zone">(.*?)</div>', html, re.S).group(1)
        assert "Asia/Tokyo" in header and 'data-time-zone-switch="utc"' in header
        assert 'title="' in html and " JST (Asia/Tokyo) · " in html
        assert ">in 4\xa0minutes</time>" in html or ">in 5\xa0minutes</time>" in html  # the expiry
        client.cookies["tz_utc"] = "1"
        html = client.get(f"/runs/{run.pk}/tasks/submit/").content.decode()
        header = re.search(r'class="time-zone">(.*?)</div>', html, re.S).group(1)
        assert "<strong>UTC</strong>" in header and 'data-time-zone-switch="local"' in header
        assert "JST" not in html

    def test_insights_labels_are_in_the_users_zone(self, client, operator, world):
        snapshot = take_snapshot(actor=Actor.command())
        client.force_login(operator)
        client.cookies["tz"] = "Asia/Tokyo"
        html = client.get("/insights/").content.decode()
        tokyo = snapshot.taken_at.astimezone(zoneinfo.ZoneInfo("Asia/Tokyo"))
        assert f"{tokyo:%Y-%m-%d %H:%M}" in html
        assert f"{snapshot.taken_at.astimezone(UTC):%Y-%m-%d %H:%M}</" not in html

    def test_an_unknown_zone_falls_back_to_the_servers(self, client, operator, world):
        client.force_login(operator)
        client.cookies["tz"] = "../../etc/passwd"
        html = client.get("/dags/").content.decode()
        assert 'data-time-zone="UTC"' in html

    def test_the_api_keeps_utc_whatever_the_cookie(self, client, operator, world):
        client.force_login(operator)
        client.cookies["tz"] = "Asia/Tokyo"
        run = world["runs"][0]
        response = client.get(f"/api/v2/dags/etl/dagRuns/{quote(run.run_id)}/taskInstances/submit/state-store")
        body = response.content.decode()
        assert response.status_code == 200 and "expires_at" in body, body
        assert "+09:00" not in body

    def test_task_and_asset_tables_both_show_relative_times(self, client, operator, world):
        client.force_login(operator)
        task = client.get(f"/runs/{world['runs'][0].pk}/tasks/submit/").content.decode()
        asset = client.get(f"/assets/{world['asset'].pk}/").content.decode()
        for html in (task, asset):
            updated = re.findall(r"<time [^>]*>([^<]*)</time>", html)
            assert "just now" in updated, updated

    def test_sizes_have_separators(self, client, operator, world):
        client.force_login(operator)
        html = client.get(f"/runs/{world['runs'][0].pk}/tasks/submit/").content.decode()
        assert "1.5 KiB" in html
        key = client.get(f"/keys/task/{world['runs'][0].state_keys.first().pk}/").content.decode()
        assert "1,502 bytes of JSON" in key

    def test_largest_values_show_the_run(self, client, operator, world):
        client.force_login(operator)
        html = client.get("/overview/largest/").content.decode()
        runs = re.findall(r'data-testid="largest-run">([^<]*)<', html)
        assert sorted(runs) == sorted(r.run_id for r in world["runs"])

    def test_the_404_page_speaks_to_people(self, client, operator, world):
        client.force_login(operator)
        response = client.get("/no/such/page/")
        html = response.content.decode()
        assert response.status_code == 404
        assert "Page not found" in html and "Nothing here" in html
        assert "Resolver404" not in html and "tried" not in html and "statestore_admin" not in html
        response = client.get("/keys/task/999999/")
        assert response.status_code == 404 and "matches the given query" not in response.content.decode()

    def test_favicon(self, client, world):
        response = client.get("/favicon.ico")  # signed out: browsers ask before any sign-in
        assert response.status_code == 200
        assert b"".join(response.streaming_content)[:4] == b"\x00\x00\x01\x00"
        svg = client.get("/static/favicon.svg")
        assert svg.status_code == 200


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_demo_data_scale_prints_how_many_keys_it_added():
    out = StringIO()
    call_command("demo_data", allow_any_database=True, scale=5000, stdout=out)
    assert "Scale data: 5,000 task keys added" in out.getvalue()
    out = StringIO()
    call_command("demo_data", allow_any_database=True, scale=5000, stdout=out)
    assert "Scale data: 0 task keys added" in out.getvalue()


# The overview's long values (issue 23, item 1) ------------------------------------------------------------
def test_wrap_at_separators_escapes_and_breaks_after_dots_slashes_and_underscores():
    from statestore_admin.dashboard.templatetags.wrapping import wrap_at_separators

    assert wrap_at_separators("airflow.state.Backend") == "airflow.<wbr>state.<wbr>Backend"
    assert wrap_at_separators("s3://b/k") == "s3:/<wbr>/<wbr>b/<wbr>k"
    assert wrap_at_separators("AIRFLOW__WORKERS__X_Y") == "AIRFLOW__<wbr>WORKERS__<wbr>X_<wbr>Y"
    assert wrap_at_separators('<b a="1">.x') == "&lt;b a=&quot;1&quot;&gt;.<wbr>x"
    assert wrap_at_separators(None) == ""
    assert wrap_at_separators("scheduled__2026-12-01T00:00:00+00:00") == (
        "scheduled__<wbr>2026-12-01T00:<wbr>00:<wbr>00+<wbr>00:<wbr>00"
    )
