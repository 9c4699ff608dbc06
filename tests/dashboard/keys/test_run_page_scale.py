"""Issue 23, items 3 and 4, through Django's test client on real databases: the run and task pages' natural key
order (keyset-paginated), sorts and key filter in the URL, capped per-task counts; bulk expiry, and expiring,
setting the expiry of or deleting a run's matching keys, each acting on exactly what its confirmation listed,
with permissions, scope and CSRF. Runs on both schema series (``AIRFLOW_FIXTURE_SERIES=3.4``)."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from statestore_admin import grants
from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.exports import restore as restores
from statestore_admin.records.models import AuditEvent
from statestore_admin.state import selectors
from statestore_admin.state.services import confirmations
from tests.conftest import ALL_PERMS, BOTH_DATABASES
from tests.factories import make_task_keys
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def run(dag_run_factory, task_instance_factory, task_key_factory):
    """A run of etl_orders: ``extract`` with key_0 … key_11 (sizes growing with the number), ``load`` mapped
    over 0-1 with a watermark each and a cursor at 1."""
    run = dag_run_factory(dag_id="etl_orders", run_id="manual__scale")
    task_instance_factory(run, task_id="extract")
    now = timezone.now()
    for n in range(12):
        task_key_factory(run, task_id="extract", key=f"key_{n}", value="x" * n, updated_at=now - timedelta(minutes=n))
    for map_index in (0, 1):
        task_instance_factory(run, task_id="load", map_index=map_index)
        task_key_factory(run, task_id="load", map_index=map_index, key="Watermark", value=map_index)
    task_key_factory(run, task_id="load", map_index=1, key="cursor", value=1)
    return run


def keys_in(html: str) -> list[str]:
    html = html.replace("<wbr>", "")  # a key may wrap after its separators (the user_text_wrapping filter)
    return re.findall(r'<td class="key"><a href="[^"]+"><code><bdi>([^<]*)</bdi></code>', html)


def test_the_default_order_is_natural_and_pages_keep_it(run):
    """key_2 before key_10, across keyset pages: the order is computed in SQL, not within a page."""
    seen, cursor = [], None
    while True:
        groups, page = selectors.run_state(run, cursor, size=5)
        seen += [(group.task_id, row.key) for group in groups for row in group.keys]
        if not page.has_more:
            break
        cursor = page.next_cursor
    extract = [key for task, key in seen if task == "extract"]
    assert extract == [f"key_{n}" for n in range(12)]
    assert [key for task, key in seen if task == "load"] == ["Watermark", "Watermark", "cursor"]  # by map index


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("-key", [f"key_{n}" for n in reversed(range(12))]),
        ("-size", [f"key_{n}" for n in reversed(range(12))]),
        ("size", [f"key_{n}" for n in range(12)]),
        ("updated", [f"key_{n}" for n in reversed(range(12))]),
        ("-updated", [f"key_{n}" for n in range(12)]),
    ],
)
def test_the_columns_sort_and_the_sort_stays_in_every_link(client, operator, run, sort, expected):
    client.force_login(operator)
    html = client.get(f"/runs/{run.pk}/tasks/extract/?sort={sort}").content.decode()
    assert keys_in(html) == expected
    header = {"key": "Key", "size": "Size", "updated": "Updated"}[sort.lstrip("-")]
    state = "descending" if sort.startswith("-") else "ascending"
    assert re.search(rf'aria-sort="{state}"><a class="sort" href="\?sort=[^"]*">{header}', html)


def test_expiry_sorts_never_last_and_pages_through_it(run):
    now = timezone.now()
    TaskStateStore.objects.filter(key="key_3").update(expires_at=now + timedelta(days=1))
    TaskStateStore.objects.filter(key="key_7").update(expires_at=now + timedelta(hours=1))
    seen, cursor = [], None
    while True:
        view = selectors.task_view(run, "extract", None, cursor, size=4, sort="expiry")
        seen += [row.key for row in view.rows]
        if not view.page.has_more:
            break
        cursor = view.page.next_cursor
    assert seen[:2] == ["key_7", "key_3"] and len(seen) == 12 == len(set(seen))


def test_the_key_filter_is_a_prefix_in_any_case_kept_by_the_pager(client, operator, run, task_key_factory):
    for n in range(selectors.RUN_PAGE + 5):
        task_key_factory(run, task_id="extract", key=f"KEY_x{n}")
    client.force_login(operator)
    html = client.get(f"/runs/{run.pk}/?q=key_x").content.decode()
    assert "Keys starting with" in html and "A prefix, in any case" in html
    assert set(keys_in(html)) <= {f"KEY_x{n}" for n in range(selectors.RUN_PAGE + 5)}
    assert len(keys_in(html)) == selectors.RUN_PAGE
    pager = re.search(r'<a rel="next" href="([^"]+)"', html).group(1)
    assert "q=key_x" in pager
    html = client.get(f"/runs/{run.pk}/{pager.replace('&amp;', '&')}").content.decode()
    assert len(keys_in(html)) == 5 and not set(keys_in(html)) & {f"key_{n}" for n in range(12)}
    assert not client.get(f"/runs/{run.pk}/?q=nothing").content.decode().count('<td class="key">')


def test_each_task_has_a_capped_count(client, operator, run):
    make_task_keys(run, selectors.TASK_COUNT_CAP + 1, task_id="big")
    client.force_login(operator)
    html = flat(client.get(f"/runs/{run.pk}/").content.decode())
    counts = dict(
        re.findall(r'<li data-testid="task-count"><a href="[^"]+">(\w+)</a> <span class="muted">([^<]+)<', html)
    )
    assert counts == {"big": "more than 1,000 keys", "extract": "12 keys", "load": "3 keys"}
    html = flat(client.get(f"/runs/{run.pk}/?q=KEY_1").content.decode())  # counts of the matching keys
    counts = dict(
        re.findall(r'<li data-testid="task-count"><a href="[^"]+">(\w+)</a> <span class="muted">([^<]+)<', html)
    )
    assert counts == {"extract": "3 keys matching"}


def test_a_cursor_that_does_not_fit_the_sort_is_the_first_page(client, operator, run):
    client.force_login(operator)
    from statestore_admin.core.pagination import encode_cursor

    bad = encode_cursor(["extract", "x", "not a length", "key_1", 1])
    response = client.get(f"/runs/{run.pk}/?sort=key&cursor={bad}")
    assert response.status_code == 200 and keys_in(response.content.decode())[0] == "key_0"


# Item 3: bulk expiry, and a run's matching keys ------------------------------------------------------------
def test_bulk_expiry_sets_the_listed_keys_only_audited_and_undoable(client, operator, run):
    client.force_login(operator)
    ids = list(TaskStateStore.objects.filter(key__in=["key_1", "key_2"]).values_list("id", flat=True))
    dialog = client.get("/keys/task/bulk-expiry/", {"ids": ids}, **HX)
    html = dialog.content.decode()
    assert dialog.status_code == 200 and 'data-testid="confirm-count">2<' in html and 'name="expiry"' in html
    listed = re.search(r'name="listed" value="([^"]+)"', html).group(1)
    TaskStateStore.objects.filter(key="key_2").update(value='"rewritten"', updated_at=timezone.now())
    response = client.post("/keys/task/bulk-expiry/", {"ids": ids, "listed": listed, "expiry": "never"}, **HX)
    assert response.status_code == 204 and "Set the expiry of 1 key" in response["HX-Trigger"]
    assert "kept 1 key" in response["HX-Trigger"] and "never expires" in response["HX-Trigger"]
    event = AuditEvent.objects.get(action=AuditEvent.Action.EXPIRY)
    assert event.key_count == 1 and list(event.keys.values_list("key", flat=True)) == ["key_1"]
    before = TaskStateStore.objects.get(key="key_1").expires_at
    restores.restore_event(actor=Actor(via="ui", user=operator), event_id=event.pk)
    assert before is None and TaskStateStore.objects.get(key="key_1").expires_at is None


def test_bulk_expiry_refuses_a_time_that_has_passed_until_confirmed(client, operator, run):
    client.force_login(operator)
    key = TaskStateStore.objects.get(key="key_1")
    dialog = client.get("/keys/task/bulk-expiry/", {"ids": [key.pk]}, **HX).content.decode()
    listed = re.search(r'name="listed" value="([^"]+)"', dialog).group(1)
    past = {"ids": [key.pk], "listed": listed, "expiry": "at", "expires_at": "2020-01-01T10:00", "tz": "UTC"}
    response = client.post("/keys/task/bulk-expiry/", past, **HX)
    assert response.status_code == 422 and "This time has passed" in response.content.decode()
    assert TaskStateStore.objects.get(pk=key.pk).expires_at is None
    response = client.post("/keys/task/bulk-expiry/", {**past, "confirm_past": "on"}, **HX)
    assert response.status_code == 204 and TaskStateStore.objects.get(pk=key.pk).expires_at <= timezone.now()


@pytest.mark.parametrize("action", ["expire", "delete", "bulk-expiry"])
def test_a_runs_matching_keys_are_acted_on_exactly_as_listed(client, operator, run, task_key_factory, action):
    client.force_login(operator)
    url = "/keys/task/bulk-expiry/" if action == "bulk-expiry" else f"/keys/task/{action}/"
    target = {"in_run": run.pk, "key_prefix": "key_1"}
    html = client.get(url, target, **HX).content.decode()
    assert 'data-testid="confirm-count">3<' in html and "starting with <code><bdi>key_1</bdi></code>" in html
    listed = re.search(r'name="listed" value="([^"]+)"', html).group(1)
    task_key_factory(run, task_id="load", map_index=0, key="key_1_late")  # written after the listing
    extra = {"expiry": "never"} if action == "bulk-expiry" else {}
    if action == "bulk-expiry":
        TaskStateStore.objects.filter(key__startswith="key_1").update(expires_at=timezone.now() + timedelta(days=1))
        html = client.get(url, target, **HX).content.decode()  # listed again: the versions changed
        listed = re.search(r'name="listed" value="([^"]+)"', html).group(1)
    response = client.post(url, {**target, "listed": listed, **extra}, **HX)
    assert response.status_code == 204, response.content
    rows = TaskStateStore.objects.filter(dag_run=run)
    acted = {"key_1", "key_10", "key_11"} if action != "bulk-expiry" else {"key_1", "key_10", "key_11", "key_1_late"}
    if action == "delete":
        assert (
            not rows.filter(key__in=["key_1", "key_10", "key_11"]).exists() and rows.filter(key="key_1_late").exists()
        )
    elif action == "expire":
        assert set(rows.filter(expires_at__lte=timezone.now()).values_list("key", flat=True)) == acted
    else:
        assert set(rows.filter(key__startswith="key_1", expires_at=None).values_list("key", flat=True)) == acted
    assert rows.filter(key="key_2").exists() and rows.get(key="key_2").expires_at is None
    event = AuditEvent.objects.latest("pk")
    assert (event.dag_id, event.run_id, event.key_count) == (run.dag_id, run.run_id, len(acted))


def test_a_run_with_more_keys_than_a_confirmation_lists_is_refused(client, operator, run, monkeypatch):
    monkeypatch.setattr(confirmations, "LISTED_MAX", 5)
    client.force_login(operator)
    response = client.get("/keys/task/delete/", {"in_run": run.pk}, **HX)
    assert response.status_code == 422 and "a confirmation lists at most 5" in response.content.decode()
    assert TaskStateStore.objects.filter(dag_run=run).count() == 15


def test_the_run_page_offers_its_run_actions_and_select_all_matching(client, operator, run):
    client.force_login(operator)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Clear this run" in html and "Expire every key of this run" in html
    assert 'data-matching-count="15"' in html and "Select all 15 matching keys" in html
    assert f'name="in_run" value="{run.pk}" disabled' in html  # sent only once "select all matching" is chosen
    html = client.get(f"/runs/{run.pk}/?q=key_1").content.decode()
    assert "Delete the matching keys" in html and "key_prefix=key_1" in html and "Select all 3 matching keys" in html


# Who may: permissions, scope, CSRF ------------------------------------------------------------------------
def test_a_viewer_may_not_act_on_a_run(client, viewer, run):
    client.force_login(viewer)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Clear this run" not in html and "data-bulk-bar" not in html and "row-menu" not in html
    for url in ("/keys/task/bulk-expiry/", "/keys/task/expire/", "/keys/task/delete/"):
        assert client.get(url, {"in_run": run.pk}, **HX).status_code == 403
        assert client.post(url, {"in_run": run.pk, "listed": "x", "expiry": "never"}, **HX).status_code == 403
    assert TaskStateStore.objects.filter(dag_run=run, expires_at__isnull=False).count() == 0


def test_a_scoped_operator_cannot_reach_another_dags_run(client, user_factory, run, dag_run_factory, task_key_factory):
    user = user_factory("scoped-op", perms=ALL_PERMS, unscoped=False)
    team = Group.objects.create(name="ml-team")
    grants.grant(team, dags=["ml_*"], assets=[], actor=Actor.command())
    user.groups.add(team)
    client.force_login(user)
    assert client.get(f"/runs/{run.pk}/").status_code == 404
    for url in ("/keys/task/bulk-expiry/", "/keys/task/delete/"):
        assert client.get(url, {"in_run": run.pk}, **HX).status_code == 404
        assert client.post(url, {"in_run": run.pk, "listed": "x", "expiry": "never"}, **HX).status_code == 404
    ids = list(TaskStateStore.objects.filter(dag_run=run).values_list("id", flat=True))
    assert client.get("/keys/task/bulk-expiry/", {"ids": ids}, **HX).status_code == 422  # none of them in scope
    assert TaskStateStore.objects.filter(dag_run=run).count() == 15


def test_bulk_expiry_needs_the_csrf_token(operator, run):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    key = TaskStateStore.objects.get(key="key_1")
    html = browser.get("/keys/task/bulk-expiry/", {"ids": [key.pk]}, **HX).content.decode()
    listed = re.search(r'name="listed" value="([^"]+)"', html).group(1)
    response = browser.post("/keys/task/bulk-expiry/", {"ids": [key.pk], "listed": listed, "expiry": "never"}, **HX)
    assert response.status_code == 403 and TaskStateStore.objects.get(pk=key.pk).expires_at is None
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    data = {"ids": [key.pk], "listed": listed, "expiry": "default", "csrfmiddlewaretoken": token}
    assert browser.post("/keys/task/bulk-expiry/", data, **HX).status_code == 204
    assert TaskStateStore.objects.get(pk=key.pk).expires_at is not None
