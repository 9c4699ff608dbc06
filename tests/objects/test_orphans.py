"""The orphans report (``objects.orphans``) and its three faces: ``state_store_orphans``, the Orphans page and
``/api/statestore/v1/orphans``. A real ``file://`` storage, objects written as common.io's backend writes
them (gzip and plain; URL-quoted segments with ``/``, spaces and unicode; map indexes; asset objects by name
and by URI), real rows on SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
import os
import time
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from statestore_admin import grants
from statestore_admin.access.actors import Actor
from statestore_admin.core.errors import Forbidden
from statestore_admin.objects import listing, orphans
from statestore_admin.records.models import AuditEvent
from tests.conftest import ALL_PERMS, BOTH_DATABASES
from tests.objects_helpers import ENV_PATH, file_storage, object_exists, read_only, ref_value, set_option, write_object

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

DAG = "dag/ü ä"
RUN = "manual__2026-01-01T00:00:00+00:00 run/1"
TASK = "task é/1"
OLD = time.time() - 3 * 86400  # three days ago


def age(store, ref, when=OLD) -> str:
    path = store.path(ref)
    os.utime(path, (when, when))
    return ref


def run_command(*args, **options):
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("state_store_orphans", *args, stdout=out, stderr=err, **options)
        code = 0
    except SystemExit as exc:
        code = exc.code
    except CommandError as exc:  # as manage.py exits with it
        err.write(str(exc))
        code = exc.returncode
    return out.getvalue(), err.getvalue(), code


class World:
    """Referenced objects, orphans (old and young), a dangling reference, a risk, an outside and an inline
    reference; ``orphans``: the orphans' references, ``old``: those modified three days ago."""

    def __init__(self, store, dag_run_factory, task_key_factory, asset_factory, asset_key_factory):
        self.store = store
        self.run = run = dag_run_factory(dag_id=DAG, run_id=RUN)
        # A DAG called "assets": its objects have five segments, an asset's three.
        self.assets_run = assets_run = dag_run_factory(dag_id="assets", run_id="r")
        self.referenced = set()

        def task_key(key, map_index=-1, value=None, ref=None, run=run, task_id=TASK):
            ref = ref or store.task_ref(run.dag_id, run.run_id, task_id, map_index, key)
            if value is not None:
                write_object(store, ref, value)
            task_key_factory(run, task_id=task_id, key=key, map_index=map_index, value=ref_value(ref))
            return ref

        # Referenced: gzip objects at their keys' paths (quoted segments, map indexes).
        self.referenced.add(age(store, task_key("key/ü 1", value={"a": 1})))
        self.referenced.add(age(store, task_key("k2", map_index=3, value=[1, 2])))
        self.referenced.add(age(store, task_key("k", value="x", run=assets_run, task_id="t")))
        # Referenced: written before the compression changed (plain, and .bz2), the row holding that path.
        plain = store.task_ref(DAG, RUN, TASK, 0, "k4")[: -len(store.suffix)]
        # (a risk too: the next write of k4 goes to k4.gz, and nothing ever overwrites this one)
        self.plain = age(store, task_key("k4", map_index=0, ref=self._plain(plain, "plain")))
        self.referenced.add(self.plain)
        # A risk: a row whose reference is not its key's path (a random id), the object present.
        self.risky = store.base + "/custom/5f0c-uuid.json.gz"
        self.referenced.add(age(store, task_key("risky", ref=write_object(store, self.risky, {"r": 1}))))
        # Dangling: a row whose object is missing.
        self.dangling = task_key("lost")
        # Outside the base, and inline: no object.
        self.outside = "file:///elsewhere/state/x.gz"
        task_key("far", ref=self.outside)
        task_key("inline", ref='{"a": 1}')

        # Assets: one accessed by name, one by URI.
        self.by_name = asset_factory(name="assét/1 x", uri="s3://bucket/a b")
        self.by_uri = asset_factory(name="n2", uri="s3://b/ü")
        for asset, identifier, key in ((self.by_name, self.by_name.name, "ak/1"), (self.by_uri, self.by_uri.uri, "uk")):
            ref = write_object(store, store.asset_ref(identifier, key), {"asset": key})
            asset_key_factory(asset, key=key, value=ref_value(ref))
            self.referenced.add(age(store, ref))

        # Orphans, old: a task key's object without a row, one with another compression suffix, one outside
        # the layout, an asset key's object without a row, and the URI path of a key whose row holds its name path.
        self.old = {
            age(store, write_object(store, store.task_ref(DAG, RUN, TASK, 0, "gone/ü"), {"g": 1})),
            age(store, self._plain(store.task_ref(DAG, RUN, TASK, 2, "old")[: -len(store.suffix)] + ".xz", "xz")),
            age(store, self._plain(store.base + "/stray/file.txt", "stray")),
            age(store, write_object(store, store.asset_ref(self.by_name.name, "deleted key"), 1)),
            age(store, write_object(store, store.asset_ref(self.by_name.uri, "ak/1"), 2)),
        }
        # Orphans, young (just written): a write in flight, perhaps.
        self.young = {write_object(store, store.task_ref(DAG, RUN, TASK, -1, "in flight"), 3)}
        self.orphans = self.old | self.young

    def _plain(self, ref, text):
        fs = self.store.filesystem()
        path = self.store.path(ref)
        fs.makedirs(fs._parent(path), exist_ok=True)
        with fs.open(path, "wb") as f:
            f.write(json.dumps(text).encode())
        return ref


@pytest.fixture
def store(tmp_path, monkeypatch):
    return file_storage(tmp_path, monkeypatch)


@pytest.fixture
def world(store, dag_run_factory, task_key_factory, asset_factory, asset_key_factory):
    return World(store, dag_run_factory, task_key_factory, asset_factory, asset_key_factory)


SYSTEM = Actor.command()


def refs(tally) -> set[str]:
    return {item["ref"] for item in tally.sample}


# The report -------------------------------------------------------------------------------------------
def test_the_report_finds_exactly_the_orphans_dangling_risks_and_outside(world, store):
    report = orphans.report(sample=100, actor=SYSTEM)
    assert report.storage == store
    assert report.objects == len(world.referenced) + len(world.orphans)
    assert refs(report.orphans) == world.orphans
    assert report.orphans.count == len(world.orphans)
    fs = store.filesystem()
    assert report.orphans.bytes == sum(fs.size(store.path(r)) for r in world.orphans)
    assert refs(report.dangling) == {world.dangling}
    assert refs(report.risks) == {world.risky, world.plain}
    assert refs(report.outside) == {world.outside}
    assert report.rows_with_refs == 10 and report.inline_refs == 1  # 8 task rows, 2 asset rows
    assert report.complete and report.deletion is None


def test_orphans_are_described_by_the_key_their_path_names(world, store):
    sample = {o["ref"]: o for o in orphans.report(sample=100, actor=SYSTEM).orphans.sample}
    gone = sample[store.task_ref(DAG, RUN, TASK, 0, "gone/ü")]
    assert gone["store"] == "task" and gone["key"] == "gone/ü"
    assert gone["scope"] == {"dag_id": DAG, "run_id": RUN, "task_id": TASK, "map_index": 0}
    assert gone["size"] > 0 and gone["modified"].endswith("Z")
    xz = sample[store.task_ref(DAG, RUN, TASK, 2, "old")[: -len(store.suffix)] + ".xz"]
    assert xz["key"] == "old" and xz["scope"]["map_index"] == 2
    by_uri = sample[store.asset_ref(world.by_name.uri, "ak/1")]
    assert by_uri["store"] == "asset" and by_uri["scope"] == {"identifier": world.by_name.uri}
    stray = sample[store.base + "/stray/file.txt"]
    assert stray["store"] is None and stray["scope"] is None and stray["key"] is None


def test_risks_carry_their_reason_and_the_expected_path(world, store):
    (risk,) = [r for r in orphans.report(actor=SYSTEM).risks.sample if r["ref"] == world.risky]
    assert risk["expected"] == [store.task_ref(DAG, RUN, TASK, -1, "risky")]
    assert "deterministic layout" in risk["reason"] and risk["key"] == "risky"


def test_a_risky_row_keeps_the_object_it_references_even_past_the_memory_cap(world, monkeypatch):
    monkeypatch.setattr(orphans, "RISKY_IN_MEMORY", 0)  # every candidate is then checked by its stored text
    report = orphans.report(sample=100, actor=SYSTEM)
    assert refs(report.orphans) == world.orphans


def test_the_sample_is_bounded_and_the_counts_are_not(world):
    report = orphans.report(sample=2, actor=SYSTEM)
    assert len(report.orphans.sample) == 2 and report.orphans.count == len(world.orphans)
    assert orphans.report(sample=0, actor=SYSTEM).orphans.sample == []


def test_small_chunks_give_the_same_report(world, monkeypatch):
    whole = orphans.report(sample=100, actor=SYSTEM).as_dict()
    monkeypatch.setattr(orphans, "CHUNK", 2)
    chunked = orphans.report(sample=100, actor=SYSTEM).as_dict()
    for part in ("objects", "dangling", "risks", "outside", "rows_with_refs"):
        assert chunked[part] == whole[part]
    assert {o["ref"] for o in chunked["orphans"]["sample"]} == {o["ref"] for o in whole["orphans"]["sample"]}


def test_older_than_counts_the_young_orphans(world):
    report = orphans.report(sample=100, older_than=timedelta(days=1), actor=SYSTEM)
    assert report.young == len(world.young)
    assert orphans.report(older_than=timedelta(days=4), actor=SYSTEM).young == len(world.orphans)


def test_plain_storage_without_compression(tmp_path, monkeypatch, dag_run_factory, task_key_factory):
    store = file_storage(tmp_path, monkeypatch, compression=None)
    run = dag_run_factory(dag_id="d", run_id="r")
    kept = write_object(store, store.task_ref("d", "r", "t", -1, "data.gz"), 1)  # a key ending in .gz, no compression
    task_key_factory(run, task_id="t", key="data.gz", value=ref_value(kept))
    orphan = write_object(store, store.task_ref("d", "r", "t", -1, "other"), 1)
    report = orphans.report(sample=10, actor=SYSTEM)
    assert refs(report.orphans) == {orphan} and report.objects == 2


def test_without_storage_the_rows_are_still_counted(monkeypatch, dag_run_factory, task_key_factory):
    set_option(monkeypatch, ENV_PATH, None)
    run = dag_run_factory()
    task_key_factory(run, key="a", value=ref_value("s3://bucket/state/a.gz"))
    task_key_factory(run, key="b", value=ref_value("[1]"))
    task_key_factory(run, key="c", value={"not": "a ref"})
    report = orphans.report(actor=SYSTEM)
    assert report.storage is None and report.objects == 0
    assert report.rows_with_refs == 2 and report.inline_refs == 1
    assert refs(report.outside) == {"s3://bucket/state/a.gz"}
    assert report.as_dict()["storage"] is None


def test_storage_errors_are_reported_and_stop_the_dangling_check(world, store, task_key_factory, monkeypatch):
    stray = store.base + "/stray/file.txt"  # a file: a path through it is no directory (NotADirectoryError)
    for key in ("through a file", "through it again"):
        task_key_factory(world.run, task_id=TASK, key=key, value=ref_value(f"{stray}/{key.replace(' ', '_')}.gz"))
    monkeypatch.setattr(orphans, "CHECK_ERRORS_MAX", 1)
    report = orphans.report(sample=100, actor=SYSTEM)
    assert not report.complete and report.error_count == 1 and "NotADirectoryError" in report.errors[0]
    assert report.unchecked >= 2  # the second of those, and every object reference after it
    assert report.as_dict()["dangling"]["unchecked"] == report.unchecked
    _, _, code = run_command()
    assert code == 1


# Deleting ---------------------------------------------------------------------------------------------
def test_delete_removes_exactly_the_old_orphans_and_records_one_event(world, store):
    report = orphans.report(sample=100, older_than=timedelta(days=1), delete=True, actor=SYSTEM)
    deletion = report.deletion
    assert deletion.deleted == len(world.old) and deletion.failed_count == 0 and deletion.young == 1
    for ref in world.old:
        assert not object_exists(store, ref)
    for ref in world.referenced | world.young:
        assert object_exists(store, ref)
    (event,) = AuditEvent.objects.filter(action=AuditEvent.Action.ORPHANS)
    assert event.status == AuditEvent.Status.DONE and event.pk == deletion.event_id
    assert event.store == "" and event.via == "command"
    assert set(event.details["deleted_refs"]) == world.old
    assert event.details["deleted"] == len(world.old) and event.details["failed"] == 0
    assert event.details["older_than_seconds"] == 86400 and event.details["base"] == store.base
    assert "audit_event_id" not in event.details and event.details["young"] == 1
    again = orphans.report(sample=100, older_than=timedelta(days=1), actor=SYSTEM)
    assert refs(again.orphans) == world.young


def test_a_delete_records_who_asked_for_it(world, operator):
    actor = Actor(via="api", user=operator, token_id=7, token_name="nightly", host="192.0.2.9")
    report = orphans.report(older_than=timedelta(days=1), delete=True, actor=actor)
    event = AuditEvent.objects.get(pk=report.deletion.event_id)
    assert (event.actor, event.user, event.via, event.host) == ("operator", operator, "api", "192.0.2.9")
    assert (event.token_id, event.token_name) == (7, "nightly")


def test_the_commands_delete_records_the_os_user_and_host(world):
    out, err, code = run_command("--delete", "--older-than", "1")
    assert code == 0, err
    event = AuditEvent.objects.get(action=AuditEvent.Action.ORPHANS)
    command = Actor.command()
    assert (event.actor, event.user, event.via) == (command.name, None, "command")
    assert (event.os_user, event.host) == (command.os_user, command.host)


def test_a_row_written_after_the_listing_keeps_its_object(world, store, task_key_factory):
    """The last check before a delete is fresh: a row written between the listing and the delete (here, after
    the candidates were listed) keeps its object, and so does an object written again meanwhile."""
    fs = store.filesystem()
    listed = [o for o in listing.walk(fs, store, orphans.OrphanReport(sample=0)) if o.ref in world.old]
    late = store.task_ref(DAG, RUN, TASK, 0, "gone/ü")
    task_key_factory(world.run, task_id=TASK, key="gone/ü", map_index=0, value=ref_value(late))
    stray = store.base + "/stray/file.txt"  # outside the layout: found by its stored text
    task_key_factory(world.run, task_id=TASK, key="points at stray", value=ref_value(stray))
    rewritten = store.asset_ref(world.by_name.name, "deleted key")  # a worker's write of that key, in flight
    write_object(store, rewritten, "new value, its row comes next")
    deletion = orphans.Deletion(timedelta(days=1))
    orphans.delete_orphans(fs, listed, deletion)
    assert deletion.kept == 3 and deletion.deleted == len(world.old) - 3
    assert object_exists(store, late) and object_exists(store, stray) and object_exists(store, rewritten)


def test_a_failed_delete_is_counted_not_raised(world, store):
    ref = store.task_ref(DAG, RUN, TASK, 0, "gone/ü")
    directory = os.path.dirname(store.path(ref))
    with read_only(directory):
        report = orphans.report(older_than=timedelta(days=1), delete=True, actor=SYSTEM)
    deletion = report.deletion
    assert deletion.failed_count == 1 and deletion.failures[0]["ref"] == ref
    assert deletion.deleted == len(world.old) - 1
    event = AuditEvent.objects.get(pk=deletion.event_id)
    assert event.status == AuditEvent.Status.DONE and event.details["failed"] == 1
    assert event.details["failures"][0]["ref"] == ref


# Who may ----------------------------------------------------------------------------------------------
def test_access_needs_both_stores_unscoped_and_delete_for_deleting(world, user_factory, viewer, operator, nobody):
    assert orphans.access(viewer) == orphans.OrphansAccess(True, False)
    assert orphans.access(operator) == orphans.OrphansAccess(True, True)
    assert orphans.access(nobody) == orphans.OrphansAccess(False, False)
    task_only = user_factory("task-only", perms=["task.view", "task.delete"])
    assert not orphans.access(task_only).view
    scoped = user_factory("scoped", perms=ALL_PERMS)
    grants.grant(scoped, dags=["etl_*"], assets=["*"], actor=Actor.command())
    assert orphans.access(scoped) == orphans.OrphansAccess(False, False)
    with pytest.raises(Forbidden):
        orphans.report(older_than=timedelta(days=1), delete=True, actor=Actor(via="ui", user=viewer))
    with pytest.raises(Forbidden):
        orphans.report(actor=scoped)
    with pytest.raises(Forbidden):
        orphans.report(older_than=timedelta(days=1), delete=True, actor=Actor(via="ui", user=scoped))
    assert not AuditEvent.objects.filter(action=AuditEvent.Action.ORPHANS).exists()
    assert orphans.report(older_than=timedelta(days=1), delete=True, actor=Actor(via="ui", user=operator)).deletion


# The command ------------------------------------------------------------------------------------------
def test_the_command_prints_the_report(world, store):
    out, err, code = run_command()
    assert code == 0, err
    assert f"Storage {store.base}" in out
    assert f"Orphans: {len(world.orphans)} " in out
    assert "1 modified less than 1 day ago" in out
    assert world.dangling in out and world.risky in out and world.plain in out and world.outside in out
    for ref in world.old:
        assert object_exists(store, ref)  # nothing deleted without --delete


def test_the_command_deletes_and_exits_1_on_a_failed_delete(world, store):
    ref = store.task_ref(DAG, RUN, TASK, 0, "gone/ü")
    with read_only(os.path.dirname(store.path(ref))):
        out, err, code = run_command("--delete", "--older-than", "2")
    assert code == 1
    assert f"Deleted {len(world.old) - 1} orphan(s) modified more than 2 days ago" in out
    assert f"failed: {ref}" in out
    out, err, code = run_command("--delete", "--older-than", "0.5")
    assert code == 0 and "Deleted 1 orphan(s)" in out and object_exists(store, next(iter(world.young)))


def test_the_command_exits_2_on_misconfiguration(monkeypatch):
    set_option(monkeypatch, ENV_PATH, None)
    out, err, code = run_command()
    assert code == 0 and "No [common.io] state_store_objectstorage_path is configured" in out
    out, err, code = run_command("--delete")
    assert code == 2 and "nothing to delete" in err
    _, _, code = run_command("--older-than", "-1")
    assert code == 2


def test_an_unsupported_compression_is_exit_2(tmp_path, monkeypatch):
    file_storage(tmp_path, monkeypatch)
    set_option(monkeypatch, "AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_COMPRESSION", "snappy")
    out, err, code = run_command()
    assert code == 2 and "snappy" in out


def test_the_command_json_is_the_api_body(world, client, viewer):
    out, _, code = run_command("--json", "--sample", "100")
    assert code == 0
    printed = json.loads(out)
    client.force_login(viewer)
    answer = client.get("/api/statestore/v1/orphans?sample=100")
    assert answer.status_code == 200
    body = answer.json()
    for document in (printed, body):
        document.pop("seconds")
        document["orphans"]["sample"].sort(key=lambda o: o["ref"])
    body["orphans"]["young"] = printed["orphans"]["young"] = None  # --older-than: the command's alone
    body["older_than_seconds"] = printed["older_than_seconds"] = None
    assert printed == body
    assert {o["ref"] for o in body["orphans"]["sample"]} == world.orphans


# The API and the page ---------------------------------------------------------------------------------
def test_the_api_shape_and_its_permissions(world, client, viewer, nobody, user_factory):
    client.force_login(viewer)
    body = client.get("/api/statestore/v1/orphans?sample=1").json()
    assert set(body) >= {"storage", "objects", "orphans", "dangling", "risks", "outside", "rows_with_refs", "seconds"}
    assert body["storage"] == {"base": world.store.base, "compression": "gzip", "threshold": 0}
    assert body["orphans"]["count"] == len(world.orphans) and len(body["orphans"]["sample"]) == 1
    assert set(body["orphans"]["sample"][0]) == {"ref", "size", "modified", "store", "scope", "key"}
    assert set(body["risks"]["sample"][0]) >= {"ref", "expected", "reason"}
    assert client.get("/api/statestore/v1/orphans?sample=x").status_code == 422
    client.force_login(nobody)
    assert client.get("/api/statestore/v1/orphans").status_code == 403
    scoped = user_factory("scoped", perms=ALL_PERMS)
    grants.grant(scoped, dags=["*"], assets=["etl.*"], actor=Actor.command())
    client.force_login(scoped)
    assert client.get("/api/statestore/v1/orphans").status_code == 403
    client.logout()
    assert client.get("/api/statestore/v1/orphans").status_code == 401


def test_the_page_shows_the_report_escaped(store, client, viewer, operator, dag_run_factory, task_key_factory):
    hostile = "<script>alert(1)</script>"
    write_object(store, store.task_ref("d<b>", "r", "t", -1, hostile), 1)
    run = dag_run_factory(dag_id="d", run_id="r")
    task_key_factory(run, task_id="t", key=hostile, value=ref_value(store.base + "/x/<i>risk</i>.gz"))
    client.force_login(viewer)
    page = client.get("/orphans/")
    assert page.status_code == 200
    html = page.content.decode()
    assert hostile not in html and "<i>risk</i>" not in html and "d<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert store.base in html and "state_store_orphans --delete --older-than 1" in html
    assert 'data-testid="orphans-count">1<' in html
    assert "deterministic layout" in html  # the risk's reason
    assert "this needs delete on both stores" in html
    assert 'href="/orphans/"' in html  # the nav link
    client.force_login(operator)
    assert "this needs delete on both stores" not in client.get("/orphans/").content.decode()


def test_the_page_says_when_the_storage_cannot_be_opened(monkeypatch, client, viewer):
    set_option(monkeypatch, ENV_PATH, "nosuchprotocol://bucket/state/")
    client.force_login(viewer)
    page = client.get("/orphans/")
    assert page.status_code == 200
    assert "Cannot open nosuchprotocol:// storage" in page.content.decode()


def test_the_page_and_its_link_need_view_on_both_stores_unscoped(client, nobody, user_factory, viewer):
    client.force_login(nobody)
    assert client.get("/orphans/").status_code == 403
    task_only = user_factory("task-only", perms=["task.view"])
    client.force_login(task_only)
    assert client.get("/orphans/").status_code == 403
    assert 'href="/orphans/"' not in client.get("/").content.decode()
    scoped = user_factory("scoped", perms=ALL_PERMS)
    grants.grant(scoped, dags=["etl_*"], assets=["*"], actor=Actor.command())
    client.force_login(scoped)
    assert client.get("/orphans/").status_code == 403
    assert 'href="/orphans/"' not in client.get("/").content.decode()
