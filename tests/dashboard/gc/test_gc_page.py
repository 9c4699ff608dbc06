"""The GC page (``/gc/``) through Django's test client: who may see it and run GC, the dry-run figures (the
same as ``gc.dry_run``), a bounded run through ``gc.run_gc`` (recorded with the user, audited), its limits,
and bad input refused with a clear message and nothing changed."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission
from django.core import checks
from django.test import override_settings
from django.utils import timezone

from statestore_admin import gc, grants
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import EVERYTHING
from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.dashboard.checks import check_gc_page_settings
from statestore_admin.identity import roles
from statestore_admin.records.models import AuditEvent, GcRun
from tests.conftest import ALL_PERMS, BOTH_DATABASES
from tests.factories import make_task_keys
from tests.html import flat
from tests.objects_helpers import file_storage

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


@pytest.fixture
def admin_user(user_factory):
    """The Admin role: view and delete on task state, and "Can add gc run"."""
    user = user_factory("gc-admin", perms=ALL_PERMS)
    user.groups.add(Group.objects.get(name="Admin"))
    return type(user).objects.get(pk=user.pk)


@pytest.fixture
def store(dag_run_factory, task_key_factory):
    """Expired keys in two DAGs (older and newer), live keys, a never-expiring key, and an asset key."""
    now = timezone.now()
    etl = dag_run_factory(dag_id="etl_orders")
    ml = dag_run_factory(dag_id="ml_train")
    for i in range(7):
        task_key_factory(etl, key=f"old-{i}", task_id="extract", expires_at=now - timedelta(days=3, minutes=i))
    for i in range(3):
        task_key_factory(ml, key=f"recent-{i}", task_id="fit", expires_at=now - timedelta(hours=1, minutes=i))
    task_key_factory(etl, key="live", task_id="extract", expires_at=now + timedelta(days=1))
    task_key_factory(etl, key="never", task_id="extract", expires_at=None)
    return now


def rows() -> set:
    return set(TaskStateStore.objects.values_list("dag_id", "key"))


def expired(cutoff=None) -> set:
    return set(gc.expired_rows(cutoff or timezone.now()).values_list("dag_id", "key"))


# Who may see the page and run GC -------------------------------------------------------------------------
def test_the_page_needs_view_on_task_state(client, nobody, user_factory):
    client.force_login(nobody)
    assert client.get("/gc/").status_code == 403
    client.force_login(user_factory("asset-viewer", perms=["asset.view"]))
    assert client.get("/gc/").status_code == 403


def test_a_scoped_user_is_refused_the_page_and_the_run_and_has_no_nav_link(client, admin_user, store):
    grants.grant(admin_user, dags=["etl_*"], actor=Actor.command())
    client.force_login(admin_user)
    response = client.get("/gc/")
    assert response.status_code == 403
    assert "spans every DAG" in response.content.decode()
    assert client.get("/gc/run/?batch_size=10").status_code == 403
    before = rows()
    assert client.post("/gc/run/", {"batch_size": "10"}).status_code == 403
    assert rows() == before and not GcRun.objects.exists()
    assert 'href="/gc/"' not in client.get("/").content.decode()


def test_a_viewer_sees_the_page_and_the_nav_link_but_not_the_run(client, viewer, store):
    client.force_login(viewer)
    page = client.get("/gc/").content.decode()
    assert 'href="/gc/"' in client.get("/").content.decode()
    assert "What would go now" in page and "Run GC now" not in page
    assert client.get("/gc/run/").status_code == 403
    before = rows()
    assert client.post("/gc/run/", {"batch_size": "10"}).status_code == 403
    assert rows() == before and not GcRun.objects.exists()


def test_an_operator_with_delete_but_without_the_gc_permission_may_not_run(client, operator, store):
    client.force_login(operator)
    assert "Run GC now" not in client.get("/gc/").content.decode()
    response = client.post("/gc/run/", {"batch_size": "10"})
    assert response.status_code == 403
    assert rows() and not GcRun.objects.exists()


def test_the_gc_permission_alone_is_not_enough_without_delete_on_task_state(client, user_factory, store):
    user = user_factory("gc-only", perms=["task.view"])
    user.user_permissions.add(Permission.objects.get(content_type__app_label="state", codename="add_gcrun"))
    client.force_login(type(user).objects.get(pk=user.pk))
    assert client.post("/gc/run/", {}).status_code == 403
    assert not GcRun.objects.exists()


def test_the_admin_role_may_run_gc(admin_user):
    assert gc.access(admin_user) == gc.GcAccess(view=True, run=True)
    assert ("state", "add_gcrun") in roles.ROLES["Admin"]


def test_a_run_needs_the_csrf_token(admin_user, store):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.post("/gc/run/", {"batch_size": "10"}).status_code == 403
    assert not GcRun.objects.exists() and len(expired()) == 10


# The dry run -------------------------------------------------------------------------------------------
def test_the_preview_shows_the_figures_of_gc_dry_run(client, viewer, store):
    client.force_login(viewer)
    response = client.get("/gc/")
    assert response.status_code == 200
    page = response.content.decode()
    summary = gc.dry_run(gc.GcPlan(cutoff=timezone.now()), scope=EVERYTHING)
    assert summary.rows == 10
    assert re.search(r'data-testid="gc-preview-count">10<', page)
    by_dag = re.findall(r'<td><a href="/dags/([^/]+)/"><bdi>[^<]+</bdi></a></td><td class="num">(\d+)</td>', page)
    assert by_dag == [(d, str(n)) for d, n in summary.by_dag] == [("etl_orders", "7"), ("ml_train", "3")]
    for row in summary.sample:
        assert f"<bdi>{row.key}</bdi>" in page
    assert "live" not in re.findall(r"<bdi>([^<]+)</bdi>", page)


def test_the_preview_for_an_age_and_a_dag(client, viewer, store):
    client.force_login(viewer)
    page = client.get("/gc/?cutoff=age&age=2&unit=days").content.decode()
    assert re.search(r'data-testid="gc-preview-count">7<', page)  # only the keys expired 3 days ago
    page = client.get("/gc/?cutoff=age&age=30&unit=hours&dag_id=ml_train").content.decode()
    assert re.search(r'data-testid="gc-preview-count">0<', page)
    page = client.get("/gc/?dag_id=ml_train").content.decode()
    assert re.search(r'data-testid="gc-preview-count">3<', page)
    cutoff = (store - timedelta(days=1)).isoformat()
    page = client.get("/gc/", {"cutoff": "date", "before": cutoff}).content.decode()
    assert re.search(r'data-testid="gc-preview-count">7<', page)


def test_the_preview_past_the_exact_cap_says_more_than(client, viewer, dag_run_factory, settings):
    # No exact count within a time budget first (PostgreSQL, fresh statistics): whether 10,005 rows are counted
    # within it depends on the machine's load. tests/core/test_estimates.py tests that count.
    settings.COUNT_BUDGET_SECONDS = 0
    run = dag_run_factory(dag_id="bulk")
    now = timezone.now()
    make_task_keys(run, gc.DRY_RUN_EXACT_CAP + 5, updated_at=now, expires_at=now - timedelta(hours=1))
    client.force_login(viewer)
    page = flat(client.get("/gc/").content.decode())
    assert "More than <strong>10,000</strong>" in page


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"cutoff": "someday"}, "Unknown cutoff 'someday': choose now, an age or a date."),
        ({"cutoff": "date", "before": "2026-11-01T00:00:00"}, "time zone"),
        ({"cutoff": "date", "before": "next tuesday"}, "before"),
        ({"cutoff": "date", "before": ""}, "Pick a date and time, or choose another cutoff"),
        ({"cutoff": "date", "before": "2999-01-01T00:00:00Z"}, "This is in the future"),
        ({"cutoff": "age", "age": "-3", "unit": "days"}, "The age must be a number above 0."),
        ({"cutoff": "age", "age": "nan", "unit": "days"}, "The age must be a number above 0."),
        ({"cutoff": "age", "age": "1e300", "unit": "days"}, "before the year 1"),
        ({"cutoff": "age", "age": "2", "unit": "weeks"}, "The age is in hours or days."),
    ],
)
def test_bad_preview_input_is_refused_with_a_clear_message(client, viewer, store, query, message):
    client.force_login(viewer)
    response = client.get("/gc/", query)
    assert response.status_code == 422
    page = response.content.decode()
    errors = re.search(r'data-testid="gc-errors">(.*?)</div>', page, re.S).group(1)
    assert message.replace("'", "&#x27;") in errors or message in errors
    assert 'data-testid="gc-preview-count"' not in page


# Health -----------------------------------------------------------------------------------------------
def _run(started, outcome=GcRun.Outcome.COMPLETED, **fields):
    return GcRun.objects.create(
        started_at=started,
        finished_at=started + timedelta(seconds=30),
        cutoff=started,
        batch_size=1000,
        outcome=outcome,
        host="gc-host",
        pid=42,
        **fields,
    )


def test_last_successful_run_and_the_stale_warning(client, viewer, store):
    client.force_login(viewer)
    page = flat(client.get("/gc/").content.decode())
    assert "No successful run is recorded." in page and 'data-testid="gc-stale"' in page
    _run(store - timedelta(hours=30))
    _run(store - timedelta(hours=2), GcRun.Outcome.FAILED, message="OperationalError: boom")
    page = flat(client.get("/gc/").content.decode())
    assert re.search(r'data-testid="gc-last-success">Last successful run <time[^>]*>1\xa0day', page)
    assert 'data-testid="gc-stale"' in page  # 30 h > 26 h; the failed run does not count
    with override_settings(GC_STALE_AFTER_HOURS=48):
        assert 'data-testid="gc-stale"' not in flat(client.get("/gc/").content.decode())
    _run(
        store - timedelta(hours=4), GcRun.Outcome.PARTIAL
    )  # finished 3 h 59 min ago: "4 hours", rounded as people read it
    page = flat(client.get("/gc/").content.decode())
    assert re.search(r'data-testid="gc-last-success">Last successful run <time[^>]*>4\xa0hours', page)
    assert 'data-testid="gc-stale"' not in page


def test_the_backlog_warning(client, viewer, store):
    _run(store - timedelta(hours=1))
    client.force_login(viewer)
    assert 'data-testid="gc-backlog"' not in flat(client.get("/gc/").content.decode())  # 10 < 100,000
    with override_settings(GC_BACKLOG_WARN_ROWS=10):
        page = flat(client.get("/gc/?dag_id=ml_train").content.decode())  # the warning counts every DAG
        assert re.search(r'data-testid="gc-backlog">10 task state rows have expired', page)


def test_the_settings_are_checked():
    assert check_gc_page_settings() == []
    with override_settings(GC_STALE_AFTER_HOURS=0, GC_BACKLOG_WARN_ROWS=-1):
        found = check_gc_page_settings()
    assert [(type(m), m.id) for m in found] == [(checks.Error, "statestore.E007"), (checks.Error, "statestore.E008")]


# History ----------------------------------------------------------------------------------------------
def test_the_history_is_paginated_and_highlights_failures(client, viewer, store):
    for i in range(gc.HISTORY_PAGE_SIZE + 3):
        _run(store - timedelta(hours=i + 1), actor="statestore@gc-host", via="gc", rows_deleted=i)
    failed = _run(store - timedelta(minutes=5), GcRun.Outcome.FAILED, message="OperationalError: <b>boom</b>")
    client.force_login(viewer)
    page = client.get("/gc/").content.decode()
    ids = re.findall(r'<tr id="gc-run-(\d+)"', page)
    assert len(ids) == gc.HISTORY_PAGE_SIZE and ids[0] == str(failed.pk)
    assert f'<tr id="gc-run-{failed.pk}" class="gc-failed"' in page
    assert "OperationalError: &lt;b&gt;boom&lt;/b&gt;" in page  # escaped
    assert "statestore@gc-host" in page and "gc-host" in page and "pid 42" in page
    cursor = re.search(r'rel="next" href="\?runs=([^"]+)"', page).group(1)
    second = client.get(f"/gc/?runs={cursor}").content.decode()
    more = re.findall(r'<tr id="gc-run-(\d+)"', second)
    assert len(more) == 4 and not set(more) & set(ids)


def test_the_recipes_show_this_deployments_command(client, viewer, settings, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://secret-user:secret-password@db/dash")
    monkeypatch.setenv("AIRFLOW__STATE_STORE__BACKEND", "airflow.state.metastore.MetastoreBackend")
    client.force_login(viewer)
    page = flat(client.get("/gc/").content.decode())
    assert "manage.py state_store_clean --batch-size 10000 --max-batches 500 --json" in page
    assert str(settings.BASE_DIR) in page
    environment = re.search(r'data-testid="gc-environment">(.*?)</span>', page).group(1)
    assert "DATABASE_URL" in environment and "AIRFLOW__STATE_STORE__BACKEND" in environment
    assert "secret-password" not in page
    for recipe in ("*/15 * * * *", "OnCalendar=", "kind: CronJob", "BashOperator("):
        assert recipe in page


# A run from the page ----------------------------------------------------------------------------------
def test_the_confirmation_fixes_the_cutoff_and_shows_what_would_go(client, admin_user, store):
    client.force_login(admin_user)
    limits = {"batch_size": "5", "max_batches": "2", "time_limit": "5"}
    response = client.get("/gc/run/", limits, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    page = flat(response.content.decode())
    assert re.search(r'data-testid="gc-confirm-rows"><strong>10</strong> keys have expired', page)
    assert '<input type="hidden" name="cutoff" value="date">' in page
    assert re.search(r'<button type="submit" class="secondary" data-close autofocus>Cancel</button>', page)
    assert not GcRun.objects.exists() and len(expired()) == 10


def test_a_run_deletes_exactly_the_expired_rows_and_records_the_user(client, admin_user, store):
    client.force_login(admin_user)
    kept = rows() - expired()
    limits = {"batch_size": "4", "max_batches": "10", "time_limit": "10"}
    response = client.post("/gc/run/", {"cutoff": "now", **limits}, HTTP_HX_REQUEST="true")
    assert response.status_code == 204 and response["HX-Redirect"] == "/gc/"
    assert rows() == kept == {("etl_orders", "live"), ("etl_orders", "never")}
    record = GcRun.objects.get()
    assert (record.outcome, record.rows_deleted, record.batches, record.batch_size) == ("completed", 10, 3, 4)
    assert (record.actor, record.via) == ("gc-admin", "ui")
    event = AuditEvent.objects.get(action="gc")
    assert (event.actor, event.via, event.user_id, event.key_count) == ("gc-admin", "ui", admin_user.pk, 10)
    assert event.details["gc_run_id"] == record.pk and event.details["time_limit"] == 10
    page = client.get("/gc/").content.decode()
    assert f"GC run #{record.pk}: deleted 10 expired task state rows in 3 batches" in page  # the message
    assert f'<tr id="gc-run-{record.pk}"' in page and "GC page" in page


def test_a_run_honours_the_batch_limit(client, admin_user, store):
    client.force_login(admin_user)
    client.post("/gc/run/", {"batch_size": "3", "max_batches": "2", "time_limit": "10"})
    record = GcRun.objects.get()
    assert (record.outcome, record.rows_deleted, record.batches) == ("partial", 6, 2)
    assert len(expired()) == 4 and {k for _, k in expired()} <= {f"recent-{i}" for i in range(3)} | {
        f"old-{i}" for i in range(7)
    }
    assert "expired rows may remain" in record.message


def test_a_run_honours_the_time_limit(client, admin_user, store):
    """The page passes its time limit to the plan (recorded in the audit event); the loop then starts no
    batch once the limit has passed: with a limit shorter than one batch, one batch only."""
    client.force_login(admin_user)
    client.post("/gc/run/", {"batch_size": "1", "max_batches": "100", "time_limit": "7"})
    assert AuditEvent.objects.get(action="gc").details["time_limit"] == 7
    TaskStateStore.objects.filter(key="live").update(expires_at=store - timedelta(days=5))
    TaskStateStore.objects.filter(key="never").update(expires_at=store - timedelta(days=5))
    plan = gc.GcPlan(cutoff=timezone.now(), batch_size=1, max_batches=100, time_limit=1e-9)
    result = gc.run_gc(plan, actor=Actor.command())
    assert (result.outcome, result.batches, result.rows_deleted) == ("partial", 1, 1)
    assert result.message == "Stopped at the time limit of 1e-09 s; expired rows may remain."
    assert len(expired()) == 1


def test_the_run_pins_the_confirmed_cutoff(client, admin_user, store):
    """A key that expires after the confirmation's instant is not deleted by the run."""
    client.force_login(admin_user)
    confirmed = (store - timedelta(days=1)).isoformat()
    client.post("/gc/run/", {"cutoff": "date", "before": confirmed, "batch_size": "100", "max_batches": "1"})
    assert {k for _, k in expired()} == {f"recent-{i}" for i in range(3)}
    assert GcRun.objects.get().rows_deleted == 7


def test_a_run_for_one_dag(client, admin_user, store):
    client.force_login(admin_user)
    client.post("/gc/run/", {"dag_id": "ml_train", "batch_size": "100"})
    assert {d for d, _ in expired()} == {"etl_orders"}
    record = GcRun.objects.get()
    assert (record.rows_deleted, record.dag_ids) == (3, ["ml_train"])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"batch_size": "-1"}, "The batch size must be a whole number from 1 to 10,000."),
        ({"batch_size": "0"}, "The batch size must be a whole number from 1 to 10,000."),
        ({"batch_size": "10001"}, "The batch size must be a whole number from 1 to 10,000."),
        ({"max_batches": "-5"}, "The batch limit must be a whole number from 1 to 1,000."),
        ({"max_batches": "many"}, "The batch limit must be a whole number from 1 to 1,000."),
        ({"time_limit": "-1"}, "The time limit must be a whole number from 1 to 20."),
        ({"time_limit": "3600"}, "The time limit must be a whole number from 1 to 20."),
        ({"cutoff": "date", "before": "2026-11-01T00:00:00"}, "time zone"),
        ({"cutoff": "whenever"}, "Unknown cutoff"),
        ({"cutoff": "date", "before": "2999-01-01T00:00:00+00:00"}, "This is in the future"),
    ],
)
def test_bad_run_input_is_refused_and_nothing_changes(client, admin_user, store, data, message):
    client.force_login(admin_user)
    before = rows()
    for method in (client.get, client.post):
        response = method("/gc/run/", data, HTTP_HX_REQUEST="true")
        assert response.status_code == 422
        page = response.content.decode()
        errors = re.search(r'data-testid="gc-run-errors">(.*?)</div>', page, re.S).group(1)
        assert message in errors and "Nothing was deleted." in errors
        assert "Delete expired keys now" not in page
    assert rows() == before
    assert not GcRun.objects.exists() and not AuditEvent.objects.filter(action="gc").exists()


def test_without_javascript_the_confirmation_is_a_page_and_the_run_redirects(client, admin_user, store):
    client.force_login(admin_user)
    page = client.get("/gc/run/", {"batch_size": "100"})
    assert page.status_code == 200
    assert 'action="/gc/run/"' in page.content.decode()
    assert 'href="/gc/" class="button secondary" autofocus' in page.content.decode()
    response = client.post("/gc/run/", {"batch_size": "100"})
    assert response.status_code == 302 and response["Location"] == "/gc/"
    assert not expired()


# The cutoff as typed, the DAG field, a confirmation with nothing to delete (issue 23, items 2, 11, 12) ----------
@pytest.mark.parametrize(
    "query",
    [
        {"cutoff": "now", "age": "20", "unit": "hours"},
        {"cutoff": "now", "before": "2026-11-01T00:00", "tz": "UTC"},
        {"cutoff": "age", "age": "2", "unit": "days", "before": "2026-11-01T00:00", "tz": "UTC"},
        {"cutoff": "date", "age": "2", "unit": "days", "before": "2026-11-01T00:00", "tz": "UTC"},
    ],
)
def test_a_cutoff_typed_for_another_option_is_refused_not_counted_for_the_chosen_one(client, viewer, store, query):
    client.force_login(viewer)
    response = client.get("/gc/", query)
    assert response.status_code == 422
    page = response.content.decode()
    errors = re.search(r'data-testid="gc-errors">(.*?)</div>', page, re.S).group(1)
    assert "filled in: choose the option you typed into, or clear the other field." in errors
    assert 'data-testid="gc-preview-rows"' not in page


def test_the_before_cutoff_is_a_wall_time_in_the_readers_zone(client, viewer, store):
    """What the date-time input sends (no zone) is read in the zone the page was shown in (``tz``); a zone the
    form did not carry is refused, as a naive ISO 8601 time is."""
    client.force_login(viewer)
    cutoff = timezone.localtime(store - timedelta(hours=2), timezone.get_fixed_timezone(0)).replace(tzinfo=None)
    in_tokyo = (cutoff + timedelta(hours=9)).strftime("%Y-%m-%dT%H:%M")
    page = client.get("/gc/", {"cutoff": "date", "before": in_tokyo, "tz": "Asia/Tokyo"}).content.decode()
    assert re.search(r'data-testid="gc-preview-count">7<', page)  # the 7 keys of 3 days ago, not the 3 of 1 hour
    refused = client.get("/gc/", {"cutoff": "date", "before": in_tokyo, "tz": "Mars/Olympus"})
    assert refused.status_code == 422 and "Unknown time zone" in refused.content.decode()
    naive = client.get("/gc/", {"cutoff": "date", "before": in_tokyo})
    assert naive.status_code == 422 and "Give a time zone" in naive.content.decode()


def test_the_dag_field_says_its_rule_and_offers_the_dags(client, viewer, store):
    client.force_login(viewer)
    page = client.get("/gc/").content.decode()
    assert "The exact DAG id, as GC matches it" in page
    options = re.search(r'<datalist id="gc-dag-choices">(.*?)</datalist>', page, re.S).group(1)
    assert options == '<option value="etl_orders"><option value="ml_train">'


def test_a_confirmation_with_nothing_expired_offers_no_delete(client, admin_user, store):
    client.force_login(admin_user)
    page = client.get("/gc/run/", {"cutoff": "age", "age": "30", "unit": "days"}, HTTP_HX_REQUEST="true")
    text = page.content.decode()
    assert page.status_code == 200 and "Nothing to delete" in text and "a run would delete nothing" in text
    assert "Delete expired keys now" not in text and "gc-with-objects" not in text


def test_a_partial_run_names_the_forms_limit(client, admin_user, store):
    client.force_login(admin_user)
    client.post("/gc/run/", {"batch_size": "3", "max_batches": "2", "time_limit": "10"})
    page = client.get("/gc/").content.decode()
    assert "It stopped at the batch limit (2 batches): expired keys remain; run GC again to go on." in page
    assert "--max-batches" not in page.split('id="gc-history-title"')[0]  # the message, above the runs


def test_the_objects_option_comes_after_what_the_run_deletes(client, admin_user, store, tmp_path, monkeypatch):
    """Issue 23, item 12: the confirmation says what goes first; deleting the worker-side files too is an option
    after it, in words for people."""
    file_storage(tmp_path, monkeypatch)
    client.force_login(admin_user)
    text = client.get("/gc/run/", HTTP_HX_REQUEST="true").content.decode()
    rows, option = text.index('data-testid="gc-confirm-rows"'), text.index('data-testid="gc-with-objects"')
    assert rows < option < text.index("Delete expired keys now")
    assert "Also delete the files these keys point to in worker-side storage" in text
