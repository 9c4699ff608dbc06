"""The audit trail's pages: the list and its filters, an event with its diffs, restoring from the page or
from an export file, a key's history, the confirmations' downloads, permissions and CSRF."""

import html as html_lib
import io
import json
import re
from datetime import timedelta

import pytest
from django.db import connections
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.core.values import Expiry
from statestore_admin.records.models import AuditEvent, AuditKey
from statestore_admin.state import services
from statestore_admin.state.selectors import TaskAddress
from tests.conftest import BOTH_DATABASES
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
XSS = "<script>alert(1)</script>"


@pytest.fixture
def run(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="manual__audit")
    task_instance_factory(run, task_id="t")
    later = timezone.now() + timedelta(days=3)
    task_key_factory(run, task_id="t", key="job", value={"id": 1, "state": "running"}, expires_at=later)
    task_key_factory(run, task_id="t", key="offset", value=41, expires_at=None)
    task_key_factory(run, task_id="t", key="ref", value={"__airflow_state_ref__": "s3://bucket/obj"})
    return run


@pytest.fixture
def asset(asset_factory, asset_key_factory):
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="watermark", value="2026-11-01")
    asset_key_factory(asset, key="cursor", value={"id": 7})
    return asset


@pytest.fixture
def op_client(client, operator):
    client.force_login(operator)
    return client


def key(name):
    return TaskStateStore.objects.get(key=name)


def listed_in(response):
    return response.content.decode().split('name="listed" value="')[1].split('"')[0]


def delete_through_the_page(client, **params):
    """Open the delete confirmation and confirm it, as the dashboard does; the event it recorded."""
    dialog = client.get("/keys/task/delete/", params, **HX)
    assert dialog.status_code == 200, dialog.content
    response = client.post("/keys/task/delete/", {**params, "listed": listed_in(dialog)}, **HX)
    assert response.status_code == 204, response.content
    return AuditEvent.objects.latest("id")


def command():
    return Actor.command()


def text(response):
    return response.content.decode()


# The list -----------------------------------------------------------------------------------------
def test_the_list_shows_who_did_what_where_and_the_outcome(op_client, run):
    event = delete_through_the_page(op_client, ids=[key("job").pk])
    page = text(op_client.get("/audit/"))
    row = page.split(f'href="/audit/{event.pk}/"')[1].split("</tr>")[0]
    assert ">operator<" in row and "dashboard" in row and "delete" in row and "done" in row
    assert 'href="/dags/etl/"' in row
    assert "/audit/run/?dag_id=etl&amp;run_id=manual__audit" in row
    assert "/task-instance/?dag_id=etl&amp;run_id=manual__audit&amp;task_id=t&amp;map_index=-1" in row
    assert '<span class="num">1</span>' in row and "<code>job</code>" in row  # the count, and which key
    assert 'href="/audit/"' in page and ">Audit<" in page  # the nav link


def test_the_list_shows_commands_tokens_and_assets(op_client, run, asset, operator):
    services.set_task_key(
        actor=command(), address=TaskAddress("etl", "manual__audit", "t"), key="k", value=1, expiry=Expiry("never")
    )
    token_actor = Actor(via="api", user=operator, token_id=12, token_name="nightly", host="10.0.0.7")
    services.delete_asset_keys(actor=token_actor, asset_id=asset.pk, keys=["cursor"])
    page = text(op_client.get("/audit/"))
    assert f"{command().name}" in page and "command" in page
    assert "token “nightly”" in page and "API" in page
    assert f'href="/assets/{asset.pk}/">orders</a>' in page


def test_outcomes_failed_in_progress_and_unknown(op_client, run):
    now = timezone.now()
    common = {"actor": "someone", "via": "api", "action": "delete", "store": "task"}
    failed = AuditEvent.objects.create(status="failed", **common)
    pending = AuditEvent.objects.create(status="pending", **common)
    stale = AuditEvent.objects.create(status="pending", **common)
    AuditEvent.objects.filter(pk=stale.pk).update(at=now - timedelta(minutes=5))
    page = flat(text(op_client.get("/audit/")))

    def row(event):
        return page.split(f'href="/audit/{event.pk}/"')[1].split("</tr>")[0]

    assert ">failed<" in row(failed)
    assert ">in progress<" in row(pending)
    assert ">outcome unknown<" in row(stale) and "in progress" not in row(stale)
    assert "outcome unknown" in text(op_client.get(f"/audit/{stale.pk}/"))


def test_an_actor_name_with_a_bidi_override_is_isolated_and_a_new_one_escaped(op_client, run, user_factory):
    """A name from before identity.usernames' rule, recorded as it was, cannot turn the text around it; a change made
    by such an account now is recorded with the override written as an escape."""
    old = AuditEvent.objects.create(actor="evil\u202enimda", via="api", action="delete", store="task", status="done")
    page = text(op_client.get("/audit/"))
    assert '<span class="actor"><bdi>evil\u202enimda</bdi></span>' in page
    assert "<bdi>evil\u202enimda</bdi>" in text(op_client.get(f"/audit/{old.pk}/"))

    services.expire_task_keys(
        actor=Actor(via="ui", user=user_factory("evil\u202enimda", perms=["task.change"])),
        selection=services.TaskSelection(ids=(key("job").pk,)),
    )
    assert AuditEvent.objects.latest("id").actor == "evil\\u202enimda"


def test_filters(op_client, run, asset, operator):
    deleted = delete_through_the_page(op_client, ids=[key("offset").pk])
    services.expire_task_keys(actor=command(), selection=services.TaskSelection(ids=(key("job").pk,)))
    expired = AuditEvent.objects.latest("id")
    services.clear_asset(actor=Actor(via="ui", user=operator), asset_id=asset.pk)
    cleared = AuditEvent.objects.latest("id")

    def listed(query):
        response = op_client.get(f"/audit/?{query}")
        assert response.status_code == 200
        return {int(n) for n in re.findall(r'href="/audit/(\d+)/"', text(response))}

    assert listed("") == {deleted.pk, expired.pk, cleared.pk}
    assert listed("action=expire") == {expired.pk}
    assert listed("via=command") == {expired.pk}
    assert listed("actor=operator") == {deleted.pk, cleared.pk}
    assert listed("dag_id=etl") == {deleted.pk, expired.pk}
    assert listed("run_id=manual__audit&task_id=t") == {deleted.pk, expired.pk}
    assert listed(f"asset_id={asset.pk}") == {cleared.pk}
    assert listed("key=offset") == {deleted.pk}
    assert listed("key=watermark") == {cleared.pk}
    since = (expired.at - timedelta(microseconds=1)).isoformat().replace("+00:00", "Z")
    assert listed(f"since={since}") == {expired.pk, cleared.pk}
    assert listed(f"until={since}") == {deleted.pk}
    form = text(op_client.get("/audit/?action=expire&dag_id=etl"))
    assert '<option value="expire" selected>' in form and 'value="etl"' in form


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("since=2026-01-01T00:00:00", "Give a time zone"),
        ("until=yesterday", "Not a date and time"),
        ("action=drop", "One of add"),
        ("via=telepathy", "One of ui"),
        ("asset_id=abc", "An asset id is a whole number"),
    ],
)
def test_bad_filters_are_a_message_not_a_500(op_client, run, query, message):
    delete_through_the_page(op_client, ids=[key("job").pk])
    response = op_client.get(f"/audit/?{query}")
    assert response.status_code == 400
    page = text(response)
    assert message in html_lib.unescape(page) and 'data-testid="filter-errors"' in page
    assert not re.search(r'href="/audit/\d+/"', page)  # nothing listed under a filter that is not applied


def test_keyset_pagination_keeps_the_filters(op_client):
    AuditEvent.objects.bulk_create(
        [AuditEvent(actor="bulk", via="api", action="set", store="task", status="done") for _ in range(55)]
    )
    AuditEvent.objects.create(actor="other", via="api", action="set", store="task", status="done")
    first = text(op_client.get("/audit/?actor=bulk"))
    ids = [int(n) for n in re.findall(r'href="/audit/(\d+)/"', first)]
    assert len(ids) == 50 and ids == sorted(ids, reverse=True)
    more = re.search(r'<a rel="next" href="([^"]+)"', first).group(1)
    assert "actor=bulk" in more and "cursor=" in more
    second = op_client.get("/audit/" + html_lib.unescape(more), HTTP_HX_TARGET="keys-panel", **HX)
    panel = text(second)
    assert panel.startswith('<div id="keys-panel">') and "<html" not in panel  # the panel only, for htmx
    rest = [int(n) for n in re.findall(r'href="/audit/(\d+)/"', panel)]
    assert len(rest) == 5 and max(rest) < min(ids) and "End of list" in panel


def test_the_list_runs_a_fixed_number_of_queries(op_client):
    def queries():
        with CaptureQueriesContext(connections["default"]) as default:
            with CaptureQueriesContext(connections["airflow"]) as airflow:
                assert op_client.get("/audit/").status_code == 200
        return len(default), len(airflow)

    def restored_event():
        event = AuditEvent.objects.create(actor="a", via="api", action="delete", store="task", status="done")
        AuditEvent.objects.create(actor="b", via="ui", action="restore", store="task", restored_from=event)

    restored_event()
    few = queries()
    for _ in range(20):
        restored_event()
    assert queries() == few and few[1] == 0


# One event ----------------------------------------------------------------------------------------
def test_event_detail_shows_every_field_and_a_diff(op_client, run):
    job = key("job")
    op_client.post(f"/keys/task/{job.pk}/edit/", {"value": '{"id": 1, "state": "done"}'}, **HX)
    event = AuditEvent.objects.latest("id")
    page = text(op_client.get(f"/audit/{event.pk}/"))
    for fragment in ("edit value", "operator", "dashboard", "task state", f'href="/runs/{run.pk}/"', "manual__audit"):
        assert fragment in page, fragment
    assert f'href="/runs/{run.pk}/tasks/t/?map_index=-1"' in page
    assert '<span class="diff-del">-  &quot;state&quot;: &quot;running&quot;</span>' in page
    assert '<span class="diff-add">+  &quot;state&quot;: &quot;done&quot;</span>' in page
    assert '<span class="diff-ctx">   &quot;id&quot;: 1,</span>' in page
    assert "value changed" in page and job.expires_at.strftime("%Y-%m-%d %H:%M:%S") in page


def test_keys_and_values_are_escaped_in_the_event_and_its_diff(op_client, run, task_key_factory):
    task_key_factory(run, task_id="t", key=XSS, value={"html": XSS})
    xss = key(XSS)
    event = delete_through_the_page(op_client, ids=[xss.pk])
    page = text(op_client.get(f"/audit/{event.pk}/"))
    assert XSS not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert f'<span class="diff-del">-  &quot;html&quot;: &quot;{escaped}&quot;</span>' in page
    assert XSS not in text(op_client.get("/audit/?key=" + XSS))


def test_worker_side_references_are_marked(op_client, run):
    event = delete_through_the_page(op_client, ids=[key("ref").pk])
    page = text(op_client.get(f"/audit/{event.pk}/"))
    assert "worker-side ref" in page and "s3://bucket/obj" in page


def test_event_keys_are_paginated(op_client, run, task_key_factory):
    for number in range(105):
        task_key_factory(run, task_id="t", key=f"bulk-{number:03}", value=number)
    event = delete_through_the_page(op_client, run=run.pk, task_id="t", map_index="-1")
    first = text(op_client.get(f"/audit/{event.pk}/"))
    assert first.count('class="audit-key"') == 100
    more = html_lib.unescape(re.search(r'<a rel="next" href="([^"]+)"', first).group(1))
    assert (
        first.count('class="audit-key"') + text(op_client.get(f"/audit/{event.pk}/{more}")).count('class="audit-key"')
        == event.key_count
        == 108
    )


def test_unknown_event_is_404(op_client):
    assert op_client.get("/audit/999999/").status_code == 404


# Restore from the page ----------------------------------------------------------------------------
def test_restore_brings_a_deleted_key_back_and_is_audited(op_client, run):
    job = key("job")
    event = delete_through_the_page(op_client, ids=[job.pk])
    assert not TaskStateStore.objects.filter(key="job").exists()
    assert ">Restore<" in text(op_client.get(f"/audit/{event.pk}/"))
    dialog = op_client.get(f"/audit/{event.pk}/restore/", **HX)
    assert dialog.status_code == 200 and "Restore 1 key" in flat(text(dialog)) and "csrfmiddlewaretoken" in text(dialog)
    response = op_client.post(f"/audit/{event.pk}/restore/", **HX)
    assert response.status_code == 200, response.content
    assert json.loads(response["HX-Trigger"])["toast"]["message"] == "Restored 1 key."
    back = key("job")
    assert (back.value, back.expires_at) == (job.value, job.expires_at)
    restore = AuditEvent.objects.latest("id")
    assert (restore.action, restore.restored_from_id, restore.via, restore.actor) == (
        "restore",
        event.pk,
        "ui",
        "operator",
    )
    assert f'href="/audit/{restore.pk}/"' in text(response)
    listing = flat(text(op_client.get("/audit/")))
    assert f"restored from #{event.pk}" in listing and f"restored by #{restore.pk}" in listing
    assert f"restored from #{event.pk}" in flat(text(op_client.get(f"/audit/{restore.pk}/")))


def test_restore_without_htmx_redirects_to_the_restores_event(op_client, run):
    event = delete_through_the_page(op_client, ids=[key("offset").pk])
    response = op_client.post(f"/audit/{event.pk}/restore/")
    restore = AuditEvent.objects.latest("id")
    assert response.status_code == 302 and response["Location"] == f"/audit/{restore.pk}/"
    assert "Restored 1 key." in text(op_client.get(response["Location"]))


@pytest.mark.parametrize("choice", ["keep", "overwrite"])
def test_conflicts_are_shown_side_by_side_and_decided_per_key(op_client, run, choice):
    job, offset = key("job"), key("offset")
    event = delete_through_the_page(op_client, ids=[job.pk, offset.pk])
    TaskStateStore.objects.create(
        dag_run=run, dag_id="etl", run_id="manual__audit", task_id="t", map_index=-1, key="job",
        value='{"id": 2, "written": "by a task"}', updated_at=timezone.now(), expires_at=None,
    )  # fmt: skip
    response = op_client.post(f"/audit/{event.pk}/restore/", **HX)
    assert response.status_code == 422
    page = text(response)
    assert "1 key was written again since" in page
    assert "Current value" in page and "Value to restore" in page
    assert "&quot;written&quot;: &quot;by a task&quot;" in page and "&quot;state&quot;: &quot;running&quot;" in page
    audit_key = AuditKey.objects.get(event=event, key="job")
    assert f'name="resolutions[{audit_key.pk}]" value="keep"' in page
    assert not TaskStateStore.objects.filter(key="offset").exists()  # nothing restored yet

    response = op_client.post(f"/audit/{event.pk}/restore/", {f"resolutions[{audit_key.pk}]": choice}, **HX)
    assert response.status_code == 200, response.content
    assert key("offset").value == offset.value
    if choice == "keep":
        assert key("job").value == '{"id": 2, "written": "by a task"}'
        assert "Kept as they are now" in text(response)
    else:
        assert (key("job").value, key("job").expires_at) == (job.value, job.expires_at)


def test_gc_and_failed_events_are_not_restorable(op_client):
    gc = AuditEvent.objects.create(actor="cron", via="gc", action="gc", store="task", status="done")
    failed = AuditEvent.objects.create(actor="x", via="api", action="delete", store="task", status="failed")
    for event in (gc, failed):
        assert ">Restore<" not in text(op_client.get(f"/audit/{event.pk}/"))
        response = op_client.post(f"/audit/{event.pk}/restore/", **HX)
        assert response.status_code == 422
        assert "not restorable" in text(response) or "nothing to restore" in text(response)
    assert AuditEvent.objects.count() == 2


# Restore from a file -------------------------------------------------------------------------------
def upload(client, content, overwrite=False):
    """The upload's preview (nothing restored yet), then, when it shows one, its "Restore" (the same file)."""

    def data(**extra):
        file = io.BytesIO(content.encode() if isinstance(content, str) else content)
        file.name = "keys.json"
        return {"file": file, **({"overwrite": "1"} if overwrite else {}), **extra}

    preview = client.post("/audit/restore-file/", data(), **HX)
    confirmed = re.search(r'name="confirmed" value="([0-9a-f]{64})"', text(preview))
    if not confirmed:
        return preview
    return client.post("/audit/restore-file/", data(confirmed=confirmed.group(1)), **HX)


def download(client, url):
    response = client.get(url)
    assert response.status_code == 200, response.content
    assert response["Content-Disposition"].startswith('attachment; filename="statestore-')
    return b"".join(response.streaming_content).decode()


def task_export_link(client, **params):
    dialog = text(client.get("/keys/task/delete/", params, **HX))
    return html_lib.unescape(re.search(r'href="([^"]+)" download data-testid="download-keys"', dialog).group(1))


def test_upload_restores_an_export(op_client, run):
    assert "Restore keys from an export file" in text(op_client.get("/audit/"))
    ids = [key("job").pk, key("offset").pk]
    before = {k.key: (k.value, k.expires_at) for k in TaskStateStore.objects.filter(pk__in=ids)}
    document = download(op_client, task_export_link(op_client, ids=ids))
    delete_through_the_page(op_client, ids=ids)
    response = upload(op_client, document)
    assert response.status_code == 200 and "Restored 2 keys." in text(response)
    assert {k.key: (k.value, k.expires_at) for k in TaskStateStore.objects.filter(key__in=before)} == before
    restore = AuditEvent.objects.latest("id")
    assert restore.action == "restore" and restore.restored_from is None and restore.key_count == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "The file is not valid JSON"),
        ('{"format": "something-else", "keys": []}', "Not a statestore-admin export"),
        ('{"format": "statestore-admin/keys", "version": 1, "keys": [{"store": "task"}]}', "keys[0]"),
        (b"\xff\xfe{}", "not UTF-8"),
    ],
)
def test_upload_errors_change_nothing(op_client, run, content, message):
    before = list(TaskStateStore.objects.values_list("key", "value", "expires_at").order_by("key"))
    events = AuditEvent.objects.count()
    response = upload(op_client, content)
    assert response.status_code == 422
    assert message in html_lib.unescape(text(response)) and "Nothing was restored" in text(response)
    assert list(TaskStateStore.objects.values_list("key", "value", "expires_at").order_by("key")) == before
    assert AuditEvent.objects.count() == events


def test_upload_without_a_file(op_client):
    response = op_client.post("/audit/restore-file/", {}, **HX)
    assert response.status_code == 422 and "Choose an export file" in text(response)


def test_upload_conflicts_are_listed_then_overwritten_on_request(op_client, run):
    document = download(op_client, task_export_link(op_client, ids=[key("job").pk, key("offset").pk]))
    TaskStateStore.objects.filter(key="offset").update(value="99", updated_at=timezone.now())
    response = upload(op_client, document)
    assert response.status_code == 422
    page = text(response)
    assert "written again since" in page and "<code>offset</code>" in page and "<code>job</code>" not in page
    assert "Value in the file" in page and ">99</pre>" in page and ">41</pre>" in page
    assert key("offset").value == "99"
    response = upload(op_client, document, overwrite=True)
    assert response.status_code == 200 and key("offset").value == "41"


# Key history --------------------------------------------------------------------------------------
def test_task_key_page_shows_its_history(op_client, run):
    job = key("job")
    op_client.post(f"/keys/task/{job.pk}/edit/", {"value": '{"id": 2}'}, **HX)
    edit = AuditEvent.objects.latest("id")
    op_client.post(f"/keys/task/{job.pk}/expiry/", {"expiry": "never"}, **HX)
    expiry = AuditEvent.objects.latest("id")
    page = text(op_client.get(f"/keys/task/{job.pk}/"))
    history = page.split('id="history-title"')[1]
    assert history.index(f'href="/audit/{expiry.pk}/"') < history.index(f'href="/audit/{edit.pk}/"')  # newest first
    assert "edit value" in history and "set expiry" in history and "operator" in history and "dashboard" in history
    assert '<span class="diff-add">+  &quot;id&quot;: 2</span>' in history
    assert "expiry changed" in history and "→ never" in history


def test_asset_key_page_shows_its_history(op_client, asset):
    op_client.post(f"/assets/{asset.pk}/key/edit/?key=watermark", {"value": '"2026-12-01"'}, **HX)
    event = AuditEvent.objects.latest("id")
    page = text(op_client.get(f"/assets/{asset.pk}/key/?key=watermark"))
    history = page.split('id="history-title"')[1]
    assert f'href="/audit/{event.pk}/"' in history and "edit value" in history
    assert '<span class="diff-del">-&quot;2026-11-01&quot;</span>' in history
    assert '<span class="diff-add">+&quot;2026-12-01&quot;</span>' in history
    assert "No recorded change" in text(op_client.get(f"/assets/{asset.pk}/key/?key=cursor"))


# Downloads from the confirmations -------------------------------------------------------------------
def exported(document):
    parsed = json.loads(document)
    assert parsed["format"] == "statestore-admin/keys"
    return parsed["keys"]


def test_task_instance_download_is_exactly_what_the_confirmation_deletes(op_client, run, task_key_factory):
    params = {"run": run.pk, "task_id": "t", "map_index": "-1"}
    dialog = op_client.get("/keys/task/delete/", params, **HX)
    found = re.search(r'href="([^"]+)" download data-testid="download-keys"', flat(text(dialog)))
    link = html_lib.unescape(found.group(1))
    assert link.startswith("/keys/task/export/?confirmed_at=")
    task_key_factory(run, task_id="t", key="late", value=1, updated_at=timezone.now() + timedelta(seconds=1))
    entries = exported(download(op_client, link))
    assert sorted(e["key"] for e in entries) == ["job", "offset", "ref"]
    job = next(e for e in entries if e["key"] == "job")
    assert job["value"] == {"id": 1, "state": "running"} and job["expires_at"] == key(
        "job"
    ).expires_at.isoformat().replace("+00:00", "Z")
    # Confirming that dialog deletes exactly the downloaded keys; the key written since stays.
    op_client.post("/keys/task/delete/", {**params, "listed": listed_in(dialog)}, **HX)
    assert list(TaskStateStore.objects.values_list("key", flat=True)) == ["late"]


def test_selected_keys_download_and_single_key_has_no_link(op_client, run):
    ids = [key("job").pk, key("ref").pk]
    entries = exported(download(op_client, task_export_link(op_client, ids=ids)))
    assert sorted(e["key"] for e in entries) == ["job", "ref"]
    assert "Download these keys" not in text(op_client.get("/keys/task/delete/", {"ids": [ids[0]]}, **HX))
    assert "Download these keys" not in text(op_client.get("/keys/task/expire/", {"ids": ids}, **HX))


def test_asset_download_is_exactly_what_the_confirmation_clears(op_client, asset, asset_key_factory):
    dialog = text(op_client.get(f"/assets/{asset.pk}/delete/?all=1", **HX))
    link = html_lib.unescape(re.search(r'href="([^"]+)" download data-testid="download-keys"', dialog).group(1))
    assert link.startswith(f"/assets/{asset.pk}/export/?confirmed_at=") and "all=1" in link
    AssetStateStore.objects.filter(key="cursor").update(updated_at=timezone.now() + timedelta(seconds=1))
    entries = exported(download(op_client, link))
    assert [(e["key"], e["value"], e["asset_name"]) for e in entries] == [("watermark", "2026-11-01", "orders")]
    chosen = html_lib.unescape(
        re.search(
            r'href="([^"]+)" download',
            text(op_client.get(f"/assets/{asset.pk}/delete/?keys=watermark&keys=cursor", **HX)),
        ).group(1)
    )
    assert "keys=watermark" in chosen and "keys=cursor" in chosen


def test_download_needs_its_parameters(op_client, run, asset):
    assert op_client.get(f"/keys/task/export/?ids={key('job').pk}").status_code == 400  # no confirmed_at
    assert op_client.get("/keys/task/export/?confirmed_at=2026-01-01T00:00:00Z").status_code == 400  # no keys
    assert op_client.get("/keys/task/export/?run=999999&task_id=t&confirmed_at=2026-01-01T00:00:00Z").status_code == 404
    assert op_client.get(f"/assets/{asset.pk}/export/?confirmed_at=2026-01-01T00:00:00Z").status_code == 400
    assert op_client.get("/assets/999999/export/?all=1&confirmed_at=2026-01-01T00:00:00Z").status_code == 404


# Permissions and CSRF -----------------------------------------------------------------------------
def test_pages_need_a_login(client, run, asset):
    event = AuditEvent.objects.create(actor="x", via="api", action="delete", store="task", status="done")
    for url in [
        "/audit/",
        f"/audit/{event.pk}/",
        f"/audit/{event.pk}/restore/",
        "/audit/run/?dag_id=etl&run_id=manual__audit",
        f"/keys/task/export/?ids={key('job').pk}&confirmed_at=2030-01-01T00:00:00Z",
        f"/assets/{asset.pk}/export/?all=1&confirmed_at=2030-01-01T00:00:00Z",
    ]:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), url


def test_no_view_permission_is_403(client, nobody, run, asset):
    event = AuditEvent.objects.create(actor="x", via="api", action="delete", store="task", status="done")
    client.force_login(nobody)
    for url in [
        "/audit/",
        f"/audit/{event.pk}/",
        f"/keys/task/export/?ids={key('job').pk}&confirmed_at=2030-01-01T00:00:00Z",
        f"/assets/{asset.pk}/export/?all=1&confirmed_at=2030-01-01T00:00:00Z",
    ]:
        assert client.get(url).status_code == 403, url
    assert 'href="/audit/"' not in text(client.get("/"))


def test_events_of_a_store_the_user_cannot_view_are_hidden(client, user_factory, run, asset):
    task_event = AuditEvent.objects.create(actor="x", via="api", action="delete", store="task", status="done")
    asset_event = AuditEvent.objects.create(
        actor="x", via="api", action="clear", store="asset", asset_id=asset.pk, status="done"
    )
    client.force_login(user_factory("tasks_only", perms=["task.view"]))
    listed = {int(n) for n in re.findall(r'href="/audit/(\d+)/"', text(client.get("/audit/")))}
    assert listed == {task_event.pk}
    assert client.get(f"/audit/{asset_event.pk}/").status_code == 403
    assert client.get(f"/audit/{task_event.pk}/").status_code == 200


def test_viewer_sees_no_restore_and_cannot_restore(client, viewer, operator, run):
    deleter = Client()
    deleter.force_login(operator)
    event = delete_through_the_page(deleter, ids=[key("job").pk])
    client.force_login(viewer)
    page = text(client.get(f"/audit/{event.pk}/"))
    assert ">Restore<" not in page and "Restore keys from an export file" not in text(client.get("/audit/"))
    assert client.get(f"/audit/{event.pk}/restore/", **HX).status_code == 403
    assert client.post(f"/audit/{event.pk}/restore/", **HX).status_code == 403
    assert upload(client, '{"format": "statestore-admin/keys", "version": 1, "keys": []}').status_code == 403
    assert not TaskStateStore.objects.filter(key="job").exists()
    assert AuditEvent.objects.count() == 1


def test_restore_needs_the_csrf_token(operator, run):
    deleter = Client()
    deleter.force_login(operator)
    event = delete_through_the_page(deleter, ids=[key("offset").pk])
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    assert browser.post(f"/audit/{event.pk}/restore/", **HX).status_code == 403
    assert not TaskStateStore.objects.filter(key="offset").exists()
    token = browser.get(f"/audit/{event.pk}/").cookies["csrftoken"].value
    response = browser.post(f"/audit/{event.pk}/restore/", HTTP_X_CSRFTOKEN=token, **HX)
    assert response.status_code == 200 and key("offset").value == "41"


def test_run_lookup(op_client, run):
    response = op_client.get("/audit/run/?dag_id=etl&run_id=manual__audit")
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert op_client.get("/audit/run/?dag_id=etl&run_id=gone").status_code == 404
