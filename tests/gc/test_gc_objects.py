"""`state_store_clean` and worker-side objects: rows only by default (like Airflow's GC), `--with-objects`
deletes the objects of the rows it deleted after each committed batch. A real `file://` storage, objects
written as common.io's backend writes them (gzip through fsspec)."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connections
from django.utils import timezone

from statestore_admin import gc
from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.objects import store as objects
from statestore_admin.records.models import AuditEvent, GcRun
from tests.conftest import BOTH_DATABASES
from tests.objects_helpers import (
    ENV_BACKEND,
    ENV_PATH,
    file_storage,
    object_exists,
    read_only,
    ref_value,
    set_option,
    write_object,
)

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

DAG = "gc_objects.ü-1"  # a valid Airflow dag_id; keys and run ids carry "/", spaces, ":" and "+"


def clean(*args, **options):
    """Run the command; return (stdout, stderr, exit code)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("state_store_clean", *args, stdout=out, stderr=err, **options)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return out.getvalue(), err.getvalue(), code


def clean_json(**options):
    out, err, code = clean(json=True, **options)
    return json.loads(out), err, code


@pytest.fixture(autouse=True)
def index_order(monkeypatch):
    """Batches in expires_at order on PostgreSQL too, so that "the second batch" is known (SQLite's always are)."""
    monkeypatch.setattr(gc.sql, "_batch_order", lambda connection, plan: gc.INDEX)


@pytest.fixture
def store(tmp_path, monkeypatch):
    return file_storage(tmp_path, monkeypatch)


class World:
    """Expired rows with object references (tasks a, b, c: 2, 2 and 1 rows, oldest first, so that batches of 2
    are exactly a, b, c), expired rows without references, an expired inline reference, and rows that stay:
    a NEVER_EXPIRE reference and a live one, each with its object."""

    def __init__(self, store, dag_run_factory, task_key_factory):
        self.store = store
        now = timezone.now()
        self.run = run = dag_run_factory(dag_id=DAG, run_id="manual__2026-01-01T00:00:00+00:00")
        self.expired = {}  # task_id -> refs
        minute = 0
        for task_id, count in (("a", 2), ("b", 2), ("c", 1)):
            for i in range(count):
                minute += 1
                key = f"key {task_id}{i}/ü"
                ref = write_object(store, store.task_ref(DAG, run.run_id, task_id, -1, key), {"n": minute})
                task_key_factory(
                    run, task_id=task_id, key=key, value=ref_value(ref), expires_at=now - timedelta(hours=10 - minute)
                )
                self.expired.setdefault(task_id, []).append(ref)
        for i in range(3):  # plain values, expired after every reference
            task_key_factory(run, task_id="plain", key=f"p{i}", value={"v": i}, expires_at=now - timedelta(minutes=5))
        # An inline reference (under the threshold): no object, nothing to delete, not a failure
        task_key_factory(
            run, task_id="inline", key="i", value=ref_value('{"a": 1}'), expires_at=now - timedelta(minutes=4)
        )
        self.kept = []
        for key, expires_at in (("never", None), ("live", now + timedelta(days=1))):
            ref = write_object(store, store.task_ref(DAG, run.run_id, "kept", -1, key), [key])
            task_key_factory(run, task_id="kept", key=key, value=ref_value(ref), expires_at=expires_at)
            self.kept.append(ref)

    @property
    def expired_refs(self):
        return [ref for refs in self.expired.values() for ref in refs]

    def task_dir(self, task_id):
        return self.store.path(self.store.task_ref(DAG, self.run.run_id, task_id, -1, "x")).rsplit("/", 1)[0]

    def existing(self, refs):
        return [ref for ref in refs if object_exists(self.store, ref)]

    @staticmethod
    def rows():
        return sorted(TaskStateStore.objects.values_list("task_id", "key"))


@pytest.fixture
def world(store, dag_run_factory, task_key_factory):
    return World(store, dag_run_factory, task_key_factory)


SURVIVORS = [("kept", "live"), ("kept", "never")]


# Default: rows only, like Airflow ----------------------------------------------------------------------
@pytest.mark.parametrize("batch_size", [0, 2])
def test_default_deletes_rows_only_and_says_objects_are_left_behind(world, batch_size):
    out, err, code = clean(batch_size=batch_size)
    assert code == 0 and world.rows() == SURVIVORS
    assert world.existing(world.expired_refs) == world.expired_refs  # orphaned, as Airflow's GC leaves them
    assert world.existing(world.kept) == world.kept
    assert "Deleted 9 expired task state rows" in out
    assert gc.OBJECTS_LEFT_BEHIND in out and "--with-objects" in out and "state_store_orphans" in out
    assert out.count("left behind") == 1 and "Note:" not in err  # said once
    event = AuditEvent.objects.get(action="gc")
    assert event.details["with_objects"] is False
    assert event.details["objects"] == {"left_behind": True, "note": gc.OBJECTS_LEFT_BEHIND}


def test_default_json_names_the_left_behind_objects(world):
    summary, _, code = clean_json(batch_size=2)
    assert code == 0 and summary["with_objects"] is False
    assert summary["objects"] == {"left_behind": True, "note": gc.OBJECTS_LEFT_BEHIND}


def test_default_says_nothing_about_objects_without_common_io_or_without_deletes(world, monkeypatch):
    out, _, _ = clean(before=(timezone.now() - timedelta(days=1)).isoformat())  # nothing expired that early
    assert "Deleted 0" in out and "left behind" not in out
    set_option(monkeypatch, ENV_BACKEND, None)
    out, _, _ = clean()
    assert "left behind" not in out and world.rows() == SURVIVORS
    assert AuditEvent.objects.filter(action="gc").latest("at").details["objects"] is None


def test_default_keeps_the_batch_statements_of_before(world):
    """The default path's statements return no values: the same SQL as without objects."""
    plan = gc.GcPlan(cutoff=timezone.now(), batch_size=2)
    vendor = connections["airflow"].vendor
    for sql, _ in (gc.sql._statement(vendor, plan), gc.sql._PgBatches(plan, gc.INDEX).statement(False)):
        assert "substr" not in sql and "array_agg" not in sql
    assert "RETURNING" not in gc.sql._statement(vendor, plan)[0]


# --with-objects ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("batch_size", "batches"), [(0, 1), (2, 5), (4, 3), (100, 1)])
def test_with_objects_deletes_exactly_the_objects_of_the_deleted_rows(world, batch_size, batches):
    out, err, code = clean(batch_size=batch_size, with_objects=True)
    assert (code, err) == (0, "")
    assert world.rows() == SURVIVORS
    assert world.existing(world.expired_refs) == []
    assert world.existing(world.kept) == world.kept  # NEVER_EXPIRE and live rows keep theirs
    assert f"Deleted 9 expired task state rows in {batches} batch{'' if batches == 1 else 'es'}" in out
    assert "Worker-side objects: 5 deleted, 0 already missing, 0 could not be deleted." in out
    assert "left behind" not in out
    event = AuditEvent.objects.get(action="gc")
    assert event.details["with_objects"] is True
    objects_ = event.details["objects"]
    assert (objects_["deleted"], objects_["missing"], objects_["failed"], objects_["failures"]) == (5, 0, 0, [])
    assert GcRun.objects.get().message == ""


def test_with_objects_json(world):
    summary, _, code = clean_json(batch_size=3, with_objects=True)
    assert code == 0 and summary["with_objects"] is True and summary["rows_deleted"] == 9
    assert {k: summary["objects"][k] for k in ("deleted", "missing", "failed", "failures")} == {
        "deleted": 5,
        "missing": 0,
        "failed": 0,
        "failures": [],
    }
    assert summary["objects"]["seconds"] >= 0


def test_a_missing_object_is_counted_missing_not_failed(world):
    world.store.filesystem().rm_file(world.store.path(world.expired["b"][0]))
    summary, _, code = clean_json(batch_size=2, with_objects=True)
    assert code == 0
    assert (summary["objects"]["deleted"], summary["objects"]["missing"], summary["objects"]["failed"]) == (4, 1, 0)


def test_the_gzip_layout_matches_the_provider(world):
    """The objects the test wrote are where common.io puts them: gzip, suffix .gz, quoted segments."""
    ref = world.expired["a"][0]
    assert ref.endswith(".gz") and "/gc_objects.%C3%BC-1/manual__2026-01-01T00%3A00%3A00%2B00%3A00/a/-1/" in ref
    assert ref.endswith("/key%20a0%2F%C3%BC.gz")
    assert objects.read_object(world.store, ref, 100) == b'{"n": 1}'


def test_objects_are_deleted_batch_by_batch_and_a_failure_never_rolls_rows_back(world):
    """Batches of 2 delete tasks a, b, c in turn. b's directory cannot be changed: its 2 objects fail (counted,
    reported, exit 4), its rows stay deleted, and a's (before) and c's (after) objects are deleted."""
    with read_only(world.task_dir("b")):
        out, err, code = clean(batch_size=2, with_objects=True)
        assert world.existing(world.expired_refs) == world.expired["b"]
    assert code == gc_exit_objects_failed()
    assert world.rows() == SURVIVORS  # every expired row went, b's too
    assert "Worker-side objects: 3 deleted, 0 already missing, 2 could not be deleted." in out
    assert "2 worker-side objects could not be deleted and are orphaned" in out
    assert all(f"Object not deleted (orphaned): {ref}: " in err for ref in world.expired["b"])
    event = AuditEvent.objects.get(action="gc")
    details = event.details["objects"]
    assert (details["deleted"], details["failed"]) == (3, 2)
    assert [f["ref"] for f in details["failures"]] == world.expired["b"]
    assert all(f["error"] for f in details["failures"])
    assert (event.status, event.key_count, details["failed"]) == ("done", 9, 2)
    record = GcRun.objects.get()
    assert (record.outcome, record.rows_deleted) == ("completed", 9)
    assert "could not be deleted and are orphaned" in record.message and world.expired["b"][0] in record.message


def test_failures_are_reported_at_verbosity_0_and_in_json(world):
    with read_only(world.task_dir("c")):
        out, err, code = clean(batch_size=2, with_objects=True, verbosity=0)
        assert (out, code) == ("", gc_exit_objects_failed())
        assert f"Object not deleted (orphaned): {world.expired['c'][0]}" in err
        summary, _, code = clean_json(with_objects=True)  # nothing left to delete: no failure this time
    assert code == 0 and summary["objects"]["failed"] == 0


def gc_exit_objects_failed():
    from statestore_admin.commands.management.commands.state_store_clean import EXIT_OBJECTS_FAILED

    assert EXIT_OBJECTS_FAILED == 4
    return EXIT_OBJECTS_FAILED


def test_a_reference_outside_the_base_is_never_deleted_and_counts_as_failed(
    world, tmp_path, dag_run_factory, task_key_factory
):
    outside = tmp_path / "elsewhere" / "value.gz"
    outside.parent.mkdir()
    outside.write_bytes(b"not ours")
    for ref in (f"file://{outside}", f"{world.store.base}/../elsewhere/value.gz"):
        task_key_factory(world.run, task_id="out", key=ref[-30:], value=ref_value(ref), expires_at=timezone.now())
    summary, _, code = clean_json(batch_size=2, with_objects=True)
    assert code == gc_exit_objects_failed() and summary["rows_deleted"] == 11
    assert outside.read_bytes() == b"not ours"
    assert (summary["objects"]["deleted"], summary["objects"]["failed"]) == (5, 2)
    assert {f["error"] for f in summary["objects"]["failures"]} == {objects.Reference("x", objects.OUTSIDE).explanation}


@pytest.mark.django_db(transaction=True, databases=BOTH_DATABASES)
def test_the_objects_of_a_batch_go_once_it_has_committed(
    store, dag_run_factory, task_key_factory, committed_airflow_tables
):
    """Real commits: when a batch is reported, its rows are gone for every session and its objects too,
    while the next batch's rows and objects are still there (objects go batch by batch, not at the end)."""
    world = World(store, dag_run_factory, task_key_factory)
    seen = []

    def on_batch(progress):
        connection = connections["airflow"]
        assert not connection.in_atomic_block  # committed
        left = set(TaskStateStore.objects.filter(task_id__in=["a", "b", "c"]).values_list("task_id", flat=True))
        seen.append((progress.batch, sorted(left), [t for t in "abc" if world.existing(world.expired[t])]))

    result = gc.run_gc(
        gc.GcPlan(cutoff=timezone.now(), batch_size=2, with_objects=True),
        actor=Actor.command(via="gc"),
        on_batch=on_batch,
    )
    assert result.object_deletes.deleted == 5 and result.objects_failed == 0
    assert seen[:3] == [(1, ["b", "c"], ["b", "c"]), (2, ["c"], ["c"]), (3, [], [])]


# Dry run ----------------------------------------------------------------------------------------------
def test_dry_run_with_objects_counts_the_references_and_deletes_nothing(world, tmp_path, task_key_factory):
    task_key_factory(
        world.run, task_id="out", key="o", value=ref_value(f"file://{tmp_path}/x.gz"), expires_at=timezone.now()
    )
    out, _, code = clean(dry_run=True, with_objects=True)
    assert code == 0 and len(world.rows()) == 12 and world.existing(world.expired_refs) == world.expired_refs
    assert (
        "Worker-side objects (--with-objects), among the expired rows: 5 reference(s) to objects, deleted after "
        "their rows; 1 inline value(s), no object; 1 URL(s) outside the configured base path, never deleted" in out
    )
    summary, _, _ = clean_json(dry_run=True, with_objects=True)
    assert summary["objects"] == {"rows_looked_at": 10, "exact": True, "objects": 5, "inline": 1, "unreachable": 1}
    assert "objects" not in clean_json(dry_run=True)[0]  # the default dry run (and the API's) is unchanged
    assert not GcRun.objects.exists()


def test_dry_run_past_the_cap_says_how_many_rows_it_looked_at(world, monkeypatch):
    monkeypatch.setattr(gc.preview, "DRY_RUN_EXACT_CAP", 3)
    summary, _, _ = clean_json(dry_run=True, with_objects=True)
    assert (summary["objects"]["rows_looked_at"], summary["objects"]["exact"]) == (4, False)
    assert summary["objects"]["objects"] + summary["objects"]["inline"] <= 4
    out, _, _ = clean(dry_run=True, with_objects=True)
    assert "among the first 4 expired rows" in out


# Misconfiguration -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dry_run", [False, True])
def test_with_objects_and_no_storage_is_refused_and_deletes_nothing(world, monkeypatch, dry_run):
    set_option(monkeypatch, ENV_PATH, None)
    before = world.rows()
    with pytest.raises(CommandError, match="state_store_objectstorage_path") as excinfo:
        clean(with_objects=True, dry_run=dry_run)
    assert excinfo.value.returncode == 2
    assert "Nothing was deleted" in str(excinfo.value) and str(excinfo.value).startswith("--with-objects: ")
    assert world.rows() == before and world.existing(world.expired_refs) == world.expired_refs
    assert not GcRun.objects.exists() and not AuditEvent.objects.filter(action="gc").exists()


def test_with_objects_and_an_unsupported_protocol_is_refused(world, monkeypatch):
    set_option(monkeypatch, ENV_PATH, "nosuchfs://bucket/state/")
    with pytest.raises(CommandError, match="Cannot delete worker-side objects") as excinfo:
        clean(with_objects=True)
    assert excinfo.value.returncode == 2 and len(world.rows()) == 11


def test_run_gc_refuses_without_storage(world, monkeypatch):
    set_option(monkeypatch, ENV_PATH, None)
    with pytest.raises(gc.GcMisconfigured):
        gc.run_gc(gc.GcPlan(cutoff=timezone.now(), with_objects=True), actor=Actor.command(via="gc"))
    assert len(world.rows()) == 11 and not GcRun.objects.exists()


# PostgreSQL: a held row makes a batch fall back (SKIP LOCKED); the fallback returns its references too -----
@pytest.mark.django_db(transaction=True, databases=BOTH_DATABASES)
@pytest.mark.usefixtures("postgres_only", "committed_airflow_tables")
@pytest.mark.parametrize("order", [gc.PHYSICAL, gc.INDEX])
@pytest.mark.parametrize("batch_size", [0, 2])
def test_a_held_row_keeps_its_object_and_the_fallback_deletes_the_others(
    store, dag_run_factory, task_key_factory, monkeypatch, batch_size, order
):
    """A writer re-writes b's first key with a later expiry (its transaction open) while GC runs: the batch
    that meets it falls back to SKIP LOCKED (batch size 0: past lock_timeout, one statement that skips it),
    the row survives with its object, every other expired row's object goes."""
    import psycopg

    monkeypatch.setattr(gc.sql, "OPTIMISTIC_LOCK_TIMEOUT", 0.05)
    monkeypatch.setattr(gc.sql, "_batch_order", lambda connection, plan: order)
    world = World(store, dag_run_factory, task_key_factory)
    held = TaskStateStore.objects.get(task_id="b", key="key b0/ü")
    db = connections["airflow"].settings_dict
    with psycopg.connect(host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname=db["NAME"]) as writer:
        writer.execute(
            "UPDATE task_state_store SET expires_at = now() + interval '1 day' WHERE id = %s", [held.id]
        )  # not committed: the row is held
        plan = gc.GcPlan(cutoff=timezone.now(), batch_size=batch_size, lock_timeout=0.5, with_objects=True)
        result = gc.run_gc(plan, actor=Actor.command(via="gc"))
        writer.commit()
    assert (result.outcome, result.rows_deleted) == ("completed", 8)
    assert (result.safe_batches > 0) == (batch_size > 0) and ("were skipped" in result.message) == (batch_size == 0)
    assert (result.object_deletes.deleted, result.objects_failed) == (4, 0)
    assert world.existing(world.expired_refs) == [world.expired["b"][0]]
    assert world.rows() == sorted([*SURVIVORS, ("b", "key b0/ü")])


# The GC page: "also delete the objects" in the run's confirmation --------------------------------------
@pytest.fixture
def gc_admin(user_factory):
    from django.contrib.auth.models import Group

    from tests.conftest import ALL_PERMS

    user = user_factory("gc-admin", perms=ALL_PERMS)
    user.groups.add(Group.objects.get(name="Admin"))
    return type(user).objects.get(pk=user.pk)


LIMITS = {"batch_size": "2", "max_batches": "100", "time_limit": "10"}


def test_the_page_offers_the_objects_only_with_a_storage(client, gc_admin, world, monkeypatch):
    client.force_login(gc_admin)
    page = client.get("/gc/run/", LIMITS, HTTP_HX_REQUEST="true").content.decode()
    assert (
        'name="with_objects" value="1"' in page
        and "Also delete the files these keys point to in worker-side storage" in page
    )
    set_option(monkeypatch, ENV_PATH, None)
    page = client.get("/gc/run/", LIMITS, HTTP_HX_REQUEST="true").content.decode()
    assert "with_objects" not in page


def test_a_page_run_without_the_box_leaves_the_objects(client, gc_admin, world):
    client.force_login(gc_admin)
    client.post("/gc/run/", {"cutoff": "now", **LIMITS})
    assert world.rows() == SURVIVORS and world.existing(world.expired_refs) == world.expired_refs
    page = client.get("/gc/").content.decode()
    assert "Their worker-side objects were left behind, as Airflow&#x27;s GC leaves them." in page
    assert AuditEvent.objects.get(action="gc").details["with_objects"] is False


def test_a_page_run_with_the_box_deletes_the_objects_and_reports_failures(client, gc_admin, world):
    client.force_login(gc_admin)
    with read_only(world.task_dir("a")):
        client.post("/gc/run/", {"cutoff": "now", "with_objects": "1", **LIMITS})
    assert world.rows() == SURVIVORS and world.existing(world.expired_refs) == world.expired["a"]
    assert world.existing(world.kept) == world.kept
    record = GcRun.objects.get()
    assert (record.via, record.rows_deleted) == ("ui", 9) and "could not be deleted" in record.message
    assert AuditEvent.objects.get(action="gc").details["objects"]["failed"] == 2
    page = client.get("/gc/").content.decode()
    assert "Worker-side objects: 3 deleted, 0 already missing, 2 could not be deleted." in page


def test_a_page_run_with_the_box_and_no_storage_deletes_nothing(client, gc_admin, world, monkeypatch):
    client.force_login(gc_admin)
    set_option(monkeypatch, ENV_PATH, None)
    client.post("/gc/run/", {"cutoff": "now", "with_objects": "1", **LIMITS})
    assert len(world.rows()) == 11 and not GcRun.objects.exists()
    assert "Cannot delete worker-side objects" in client.get("/gc/").content.decode()


def test_the_confirmation_previews_rows_only_whatever_the_query_says(client, gc_admin, world, monkeypatch):
    client.force_login(gc_admin)
    set_option(monkeypatch, ENV_PATH, None)
    response = client.get("/gc/run/", {"with_objects": "1", **LIMITS}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "with_objects" not in response.content.decode()


@pytest.mark.django_db(transaction=True, databases=BOTH_DATABASES)
@pytest.mark.usefixtures("committed_airflow_tables")
def test_the_scheduled_command_exits_4_when_objects_could_not_be_deleted(store, dag_run_factory, task_key_factory):
    """As a scheduler runs it: a separate process, its exit status; then exit 0 once nothing fails."""
    import os
    import subprocess
    import sys

    from .test_gc_concurrency import ROOT, manage_env

    world = World(store, dag_run_factory, task_key_factory)
    env = {**manage_env(), **{k: v for k, v in os.environ.items() if k.startswith("AIRFLOW__")}}
    command = [sys.executable, "manage.py", "state_store_clean", "--batch-size", "2", "--with-objects", "--no-stats"]
    with read_only(world.task_dir("b")):
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 4, done.stderr
    assert "Worker-side objects: 3 deleted, 0 already missing, 2 could not be deleted." in done.stdout
    assert done.stderr.count("Object not deleted (orphaned): ") == 2
    assert world.rows() == SURVIVORS and world.existing(world.expired_refs) == world.expired["b"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Deleted 0 expired" in done.stdout
