"""GC beside other processes: signals, a second run, Airflow's writers and Airflow's own GC.

These tests commit their data (transactional tests) so that other processes and connections see it.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.db import connections
from django.utils import timezone

from statestore_admin import gc
from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import TaskStateStore
from tests.airflow_schema import index_column, task_key_conflict
from tests.conftest import BOTH_DATABASES
from tests.factories import make_task_keys

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True)
ROOT = Path(__file__).resolve().parents[2]
GC_ACTOR = Actor.command(via="gc")


pytestmark = [pytestmark, pytest.mark.usefixtures("committed_airflow_tables")]


def url_of(alias):
    db = connections[alias].settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    return f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def libpq_url():
    return url_of("airflow")


def manage_env():
    """The environment of a scheduled run against the test databases."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/tmp"),
        "AIRFLOW_HOME": os.environ["AIRFLOW_HOME"],
        "SECRET_KEY": "tests",
        "DATABASE_URL": url_of("default").replace("postgresql://", "postgres://"),
        "AIRFLOW_DATABASE_URL": url_of("airflow"),
        "PYTHONUNBUFFERED": "1",
    }


def manage(*args, stdout=subprocess.PIPE):
    """Start `manage.py state_store_clean` on the test databases, as a scheduler would."""
    return subprocess.Popen(
        [sys.executable, "manage.py", "state_store_clean", *args],
        cwd=ROOT,
        env=manage_env(),
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_line(process, prefix):
    for line in process.stdout:
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no line starting with {prefix!r}; stderr: {process.stderr.read()}")


@pytest.fixture
def expired_and_live(dag_run_factory, task_key_factory):
    def make(expired, live=10):
        run = dag_run_factory(dag_id="busy")
        now = timezone.now()
        make_task_keys(
            run,
            expired + live,
            key="k{i:05d}",
            updated_at=now,
            expires_at=lambda i: now - timedelta(hours=1) if i < expired else now + timedelta(days=1),
        )
        return run

    return make


def expired_count():
    return TaskStateStore.objects.filter(expires_at__lt=timezone.now()).count()


@pytest.fixture(params=[gc.PHYSICAL, gc.INDEX])
def batch_order(request, monkeypatch):
    """PostgreSQL's batches in either order, whatever the planner expects (gc.sql._batch_order)."""
    monkeypatch.setattr(gc.sql, "_batch_order", lambda connection, plan: request.param)
    return request.param


def test_sigterm_between_batches_keeps_committed_batches_and_a_rerun_finishes(expired_and_live):
    expired_and_live(2_000, live=25)
    process = manage("--batch-size", "100", "--sleep", "0.3", "-v", "2")
    wait_for_line(process, "batch 3:")
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, err
    assert "Interrupted by signal 15" in err and "committed batch(es) kept" in err
    left = expired_count()
    assert 0 < left <= 2_000 - 300 and left % 100 == 0  # whole batches only
    assert TaskStateStore.objects.count() - left == 25  # nothing live touched
    rerun = manage("--batch-size", "100", "--json")
    out, err = rerun.communicate(timeout=60)
    assert rerun.returncode == 0, err
    assert json.loads(out)["rows_deleted"] == left
    assert expired_count() == 0 and TaskStateStore.objects.count() == 25


def test_interrupted_run_is_recorded(expired_and_live):
    from statestore_admin.records.models import AuditEvent, GcRun

    expired_and_live(500)
    process = manage("--batch-size", "50", "--sleep", "0.3", "-v", "2")
    wait_for_line(process, "batch 1:")
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGINT
    record = GcRun.objects.get()
    assert record.outcome == "interrupted" and record.rows_deleted % 50 == 0 and record.rows_deleted >= 50
    event = AuditEvent.objects.get()  # written by the scheduled process, as the OS user on this host
    assert (event.via, event.action, event.status, event.key_count) == ("gc", "gc", "done", record.rows_deleted)
    assert (event.details["outcome"], event.details["gc_run_id"]) == ("interrupted", record.pk) and event.os_user


@pytest.mark.usefixtures("postgres_only")
def test_two_runs_never_overlap(expired_and_live):
    expired_and_live(300)
    # Two batches and a pause of 10 s between them: the second run starts (Django and all, some seconds on a busy
    # machine) while the first holds the lock. With 30 batches of 0.1 s the first once finished before the second
    # asked (CI's stages beside it), and the second, finding nothing to do, completed.
    first = manage("--batch-size", "200", "--sleep", "10", "-v", "2")
    wait_for_line(first, "batch 1:")
    second = manage("--batch-size", "10")
    out, err = second.communicate(timeout=60)
    assert second.returncode == 3, (out, err)
    assert "Another state_store_clean run is in progress" in err and "statestore-admin" in err
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert expired_count() == 0 and TaskStateStore.objects.count() == 10


@pytest.mark.usefixtures("postgres_only")
def test_lock_held_elsewhere_gives_exit_code_3(expired_and_live):
    expired_and_live(5)
    with psycopg.connect(libpq_url(), autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [gc.ADVISORY_LOCK_KEY])
        process = manage()
        _, err = process.communicate(timeout=60)
    assert process.returncode == 3
    assert "in progress" in err
    assert expired_count() == 5


def run_threads(*targets):
    """Start targets together with our GC (batch size 5) in this thread; return GC results and errors."""
    errors = []
    start = threading.Barrier(len(targets) + 1)

    def guarded(target):
        try:
            with psycopg.connect(libpq_url(), autocommit=True) as conn:
                start.wait()
                target(conn)
        except Exception as exc:  # reported by the assertion on errors
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    start.wait()
    result = gc.run_gc(gc.GcPlan(cutoff=timezone.now(), batch_size=5), actor=GC_ACTOR)
    for thread in threads:
        thread.join(timeout=60)
    return result, errors


@pytest.mark.usefixtures("postgres_only")
def test_a_key_rewritten_during_gc_survives(expired_and_live, batch_order):
    """A writer upserts every third expired key with a later expiry while GC runs: no error, and every key
    it wrote is there afterwards (the optimistic DELETE re-checks the expiry on the newest row version, a
    safe batch re-checks it under the row lock, or the writer re-inserts a key deleted just before)."""
    run = expired_and_live(600, live=0)
    rewritten = []
    index, conflict = index_column(), task_key_conflict()

    def writer(conn):
        for i in range(0, 600, 3):
            key = f"k{i:05d}"
            conn.execute(
                f"INSERT INTO task_state_store (dag_run_id, task_id, {index}, key, dag_id, run_id, value, "
                "updated_at, expires_at) VALUES (%s, 't', -1, %s, %s, %s, '2', now(), now() + interval '1 day') "
                f"ON CONFLICT ({conflict}) DO UPDATE SET value = excluded.value, "
                "updated_at = excluded.updated_at, expires_at = excluded.expires_at",
                [run.id, key, run.dag_id, run.run_id],
            )
            rewritten.append(key)

    result, errors = run_threads(writer)
    assert not errors and (result.outcome, result.batch_order) == ("completed", batch_order)
    gc.run_gc(gc.GcPlan(cutoff=timezone.now(), batch_size=5), actor=GC_ACTOR)  # rows skipped while the writer held them
    assert set(TaskStateStore.objects.values_list("key", flat=True)) == set(rewritten)
    assert len(rewritten) == 200 and expired_count() == 0


@pytest.mark.usefixtures("postgres_only")
def test_airflow_gc_at_the_same_time_no_error_no_double_count(expired_and_live, batch_order):
    """Airflow 3.3.2's cleanup algorithm (ids into Python, DELETE … IN, batch 7) runs beside ours."""
    expired_and_live(700, live=20)
    airflow_deleted = []

    def airflow_gc(conn):
        while ids := [
            r[0] for r in conn.execute("SELECT id FROM task_state_store WHERE expires_at < now() LIMIT 7").fetchall()
        ]:
            airflow_deleted.append(conn.execute("DELETE FROM task_state_store WHERE id = ANY(%s)", [ids]).rowcount)

    result, errors = run_threads(airflow_gc)
    assert not errors and result.outcome == "completed"
    leftover = gc.run_gc(gc.GcPlan(cutoff=timezone.now(), batch_size=5), actor=GC_ACTOR).rows_deleted
    assert result.rows_deleted + leftover + sum(airflow_deleted) == 700
    assert result.rows_deleted > 0 and sum(airflow_deleted) > 0
    assert TaskStateStore.objects.count() == 20


@pytest.mark.usefixtures("postgres_only")
def test_batch_size_zero_waits_for_rows_held_briefly_and_rechecks_them(expired_and_live):
    """Batch size 0 is one plain DELETE: on rows another transaction holds (shorter than lock_timeout) it
    waits, then re-checks them. Rows Airflow's GC deleted are not counted again; a key a writer re-wrote
    with a later expiry survives."""
    expired_and_live(50, live=0)
    locked, done = threading.Event(), threading.Event()

    def airflow_side():
        with psycopg.connect(libpq_url()) as conn:
            conn.execute("DELETE FROM task_state_store WHERE key < 'k00007'")  # Airflow's GC, 7 rows
            conn.execute(
                "UPDATE task_state_store SET value = '2', updated_at = now(), expires_at = now() + interval '1 day' "
                "WHERE key = 'k00010'"
            )  # a writer re-writes one key
            locked.set()
            done.wait(0.5)  # GC is blocked on these rows meanwhile
            conn.commit()

    thread = threading.Thread(target=airflow_side)
    thread.start()
    assert locked.wait(10)
    result = gc.run_gc(gc.GcPlan(cutoff=timezone.now(), batch_size=0, lock_timeout=10), actor=GC_ACTOR)
    done.set()
    thread.join(10)
    assert (result.outcome, result.rows_deleted, result.message) == ("completed", 42, "")
    assert list(TaskStateStore.objects.values_list("key", "value")) == [("k00010", "2")]


def test_progress_bar_on_a_terminal(expired_and_live):
    import pty

    expired_and_live(250)
    primary, secondary = pty.openpty()
    attached = manage("--batch-size", "100", stdout=secondary)
    os.close(secondary)
    attached.wait(timeout=60)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    screen = b"".join(chunks).decode()
    assert attached.returncode == 0
    assert "\r[############" in screen and " 40% 100/250 rows, batch 1" in screen
    assert "100% 250/250 rows, batch 3" in screen
    assert "Deleted 250 expired task state rows in 3 batches" in screen


@pytest.mark.usefixtures("postgres_only")
@pytest.mark.parametrize("batch_size", [0, 50])
def test_rows_held_by_a_long_transaction_are_skipped_not_waited_on(expired_and_live, batch_size, batch_order):
    """`airflow db clean` deletes expired rows in one long transaction: GC neither fails nor waits on the
    rows it holds (a lock timeout of 0.5 s would fail it), and the two never count a row twice."""
    expired_and_live(300, live=10)
    with psycopg.connect(libpq_url()) as db_clean:
        held = db_clean.execute(
            "DELETE FROM task_state_store WHERE expires_at < now() AND key < 'k00100'"
        ).rowcount  # not committed yet: 100 rows locked
        result = gc.run_gc(gc.GcPlan(cutoff=timezone.now(), batch_size=batch_size, lock_timeout=0.5), actor=GC_ACTOR)
        db_clean.commit()
    assert (result.outcome, held, result.rows_deleted) == ("completed", 100, 200)
    assert ("were skipped" in result.message) == (batch_size == 0)  # batch size 0 fell back to SKIP LOCKED
    assert (result.safe_batches > 0) == (batch_size > 0)  # an optimistic batch met the held rows: retried safely
    assert expired_count() == 0 and TaskStateStore.objects.count() == 10


@pytest.mark.usefixtures("postgres_only")
def test_a_held_row_makes_an_optimistic_batch_fall_back_not_wait(expired_and_live, batch_order, monkeypatch):
    """A writer is re-writing one expired key (its transaction still open) while GC runs in batches: the
    optimistic batch that meets the row waits at most OPTIMISTIC_LOCK_TIMEOUT, not the plan's lock_timeout,
    then is retried with SKIP LOCKED. Every other expired row goes; the key, once committed, keeps its new
    expiry. In physical order only that batch falls back; in index order the held row would come first in
    every batch, so the rest of the run is safe batches (still one fallback)."""
    monkeypatch.setattr(gc.sql, "OPTIMISTIC_LOCK_TIMEOUT", 0.2)
    run = expired_and_live(300, live=10)
    with psycopg.connect(libpq_url()) as writer:
        writer.execute(
            "UPDATE task_state_store SET value = '2', expires_at = now() + interval '1 day' "
            "WHERE dag_run_id = %s AND key = 'k00123'",
            [run.id],
        )  # not committed: the row is held
        plan = gc.GcPlan(cutoff=timezone.now(), batch_size=50, lock_timeout=60)
        result = gc.run_gc(plan, actor=GC_ACTOR)
        assert result.delete_seconds < 30  # never the 60 s lock_timeout: the batch fell back
        writer.commit()
    assert (result.outcome, result.batch_order, result.safe_batches) == ("completed", batch_order, 1)
    assert result.rows_deleted == 299 and result.message == ""
    assert TaskStateStore.objects.get(key="k00123").value == "2"
    assert expired_count() == 0 and TaskStateStore.objects.count() == 11


@pytest.mark.usefixtures("postgres_only")
def test_a_row_deleted_elsewhere_while_held_is_not_counted(expired_and_live, batch_order, monkeypatch):
    """Airflow's own GC holds (deletes, uncommitted) some expired rows: our optimistic batch falls back, the
    held rows are left to Airflow, and after it commits nothing is left and nothing was counted twice."""
    monkeypatch.setattr(gc.sql, "OPTIMISTIC_LOCK_TIMEOUT", 0.05)
    expired_and_live(200, live=5)
    with psycopg.connect(libpq_url()) as airflow:
        held = airflow.execute("DELETE FROM task_state_store WHERE key IN ('k00010', 'k00150')").rowcount
        result = gc.run_gc(gc.GcPlan(cutoff=timezone.now(), batch_size=40, lock_timeout=60), actor=GC_ACTOR)
        airflow.commit()
    assert (held, result.outcome, result.rows_deleted) == (2, "completed", 198)
    assert result.safe_batches == (2 if batch_order == gc.PHYSICAL else 1)
    assert expired_count() == 0 and TaskStateStore.objects.count() == 5


@pytest.mark.usefixtures("postgres_only")
def test_optimistic_batches_run_in_the_server_one_round_trip_for_several(expired_and_live, batch_order):
    """Outside a transaction, optimistic batches are looped in the server (a DO block): each commits on its own
    and is reported as it was (progress per batch), --max-batches stops the loop, and the rest is done by the
    next round trip."""
    expired_and_live(230, live=5)
    statements, progress = [], []

    def counted(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    with connections["airflow"].execute_wrapper(counted):
        plan = gc.GcPlan(cutoff=timezone.now(), batch_size=50, max_batches=2)
        partial = gc.run_gc(plan, actor=GC_ACTOR, on_batch=lambda p: progress.append((p.batch, p.rows, p.total_rows)))
        assert [s for s in statements if s.startswith("DO ")] and progress == [(1, 50, 50), (2, 50, 100)]
        assert (partial.outcome, partial.rows_deleted, partial.batches) == ("partial", 100, 2)
        statements.clear()
        rest = gc.run_gc(gc.GcPlan(cutoff=timezone.now(), batch_size=50), actor=GC_ACTOR)
    assert (rest.outcome, rest.rows_deleted, rest.batches, rest.batch_order) == ("completed", 130, 3, batch_order)
    assert len([s for s in statements if s.startswith("DO ")]) == 1  # three batches, one round trip
    assert expired_count() == 0 and TaskStateStore.objects.count() == 5


@pytest.mark.usefixtures("postgres_only")
def test_batches_in_the_server_take_a_dag_filter_as_data(dag_run_factory, batch_order):
    """The DAG filter's values are literals inside the block the server loops: quotes and percent signs in
    them are data."""
    now = timezone.now()
    for dag_id in ("it's 100%", "other"):
        make_task_keys(
            dag_run_factory(dag_id=dag_id),
            30,
            key="k{i:05d}",
            updated_at=now,
            expires_at=lambda i: now - timedelta(hours=1) if i < 20 else now + timedelta(days=1),
        )
    plan = gc.GcPlan(cutoff=timezone.now(), batch_size=7, dag_ids=("it's 100%",))
    result = gc.run_gc(plan, actor=GC_ACTOR)
    assert (result.outcome, result.rows_deleted, result.batches, result.batch_order) == (
        "completed",
        20,
        3,
        batch_order,
    )
    assert not TaskStateStore.objects.filter(dag_id="it's 100%", expires_at__lt=now).exists()
    assert TaskStateStore.objects.filter(dag_id="other").count() == 30


@pytest.mark.usefixtures("postgres_only")
def test_a_signal_while_the_server_loops_batches_keeps_those_committed(expired_and_live, batch_order, monkeypatch):
    """SIGINT while the server loops batches: the batch in flight (here waiting on a row a writer holds) is
    cancelled and rolled back, every batch committed before it is counted, and the next run deletes the rest."""
    monkeypatch.setattr(gc.sql, "OPTIMISTIC_LOCK_TIMEOUT", 60)  # the tenth batch waits until the signal
    run = expired_and_live(1_000, live=5)
    interrupter = gc.Interrupter()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupter.request(signum))

    def interrupt_after_nine_batches():
        with psycopg.connect(libpq_url(), autocommit=True) as watcher:
            expired = "SELECT count(*) FROM task_state_store WHERE expires_at < now()"
            while watcher.execute(expired).fetchone()[0] > 100:
                time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    try:
        with psycopg.connect(libpq_url()) as writer:
            # Not committed: the row is held, in the tenth batch of 100. Both walks take rows that expire at the
            # same instant (all of them here) by their place in the table, which the rows of earlier tests, deleted
            # and their space reused, decide: the 951st by place, not by name.
            writer.execute(
                "UPDATE task_state_store SET value = '2' WHERE ctid = (SELECT ctid FROM task_state_store"
                " WHERE dag_run_id = %s AND expires_at < now() ORDER BY ctid OFFSET 950 LIMIT 1)",
                [run.id],
            )
            thread = threading.Thread(target=interrupt_after_nine_batches)
            thread.start()
            plan = gc.GcPlan(cutoff=timezone.now(), batch_size=100, lock_timeout=120)
            result = gc.run_gc(plan, actor=GC_ACTOR, interrupter=interrupter)
            thread.join(30)
            writer.rollback()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (result.outcome, result.batches, result.rows_deleted) == ("interrupted", 9, 900)
    assert expired_count() == 100
    assert gc.run_gc(gc.GcPlan(cutoff=timezone.now(), batch_size=100), actor=GC_ACTOR).rows_deleted == 100


@pytest.mark.usefixtures("postgres_only")
def test_a_signal_in_psycopgs_notice_callback_still_stops_the_batch_in_flight(expired_and_live, monkeypatch):
    """SIGINT handled while psycopg runs a notice callback (here right after the ninth batch's notice): raised
    there, the interrupt would be printed and dropped by psycopg and the tenth batch would wait on the held row
    until its lock timeout; the run stops at once instead, with every reported batch counted."""
    monkeypatch.setattr(gc.sql, "OPTIMISTIC_LOCK_TIMEOUT", 20)  # what a lost interrupt would wait for
    run = expired_and_live(1_000, live=5)
    interrupter = gc.Interrupter()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupter.request(signum))
    raw = connections["airflow"]
    raw.ensure_connection()
    heard = []

    def ninth_notice_signals(diagnostic):
        if (diagnostic.message_primary or "").startswith(gc.sql.RUN_NOTICE + "|"):
            heard.append(diagnostic.message_primary)
            if len(heard) == 9:
                os.kill(os.getpid(), signal.SIGINT)  # handled before this callback returns

    raw.connection.add_notice_handler(ninth_notice_signals)
    try:
        with psycopg.connect(libpq_url()) as writer:
            writer.execute(  # the 951st row by place: the tenth batch of 100 in either walk (test above)
                "UPDATE task_state_store SET value = '2' WHERE ctid = (SELECT ctid FROM task_state_store"
                " WHERE dag_run_id = %s AND expires_at < now() ORDER BY ctid OFFSET 950 LIMIT 1)",
                [run.id],
            )
            plan = gc.GcPlan(cutoff=timezone.now(), batch_size=100, lock_timeout=120)
            result = gc.run_gc(plan, actor=GC_ACTOR, interrupter=interrupter)
            writer.rollback()
    finally:
        signal.signal(signal.SIGINT, previous)
        if raw.connection is not None:
            raw.connection.remove_notice_handler(ninth_notice_signals)
    # Lost, the interrupt would have let the tenth batch time out on the held row and a safe batch delete 99 more.
    assert (result.outcome, result.batches, result.rows_deleted) == ("interrupted", 9, 900), result.message
    assert expired_count() == 100


class LandsWhileSending(gc.Interrupter):
    """SIGINT a moment earlier than the test above: psycopg has sent the batch's query but not yet begun to wait
    for its result, so it cannot cancel it, and the session is left with a result that nobody reads (what
    failed CI on a busy machine: every later statement on that connection, GC's unlock first, failed)."""

    @contextmanager
    def statement(self, cancel=None):
        with super().statement(cancel):
            connections["airflow"].connection.pgconn.send_query(b"SELECT pg_sleep(0.5)")
            self.request(signal.SIGINT)
            yield


@pytest.mark.usefixtures("postgres_only")
@pytest.mark.parametrize("batch_size", [100, 0], ids=["batches looped in the server", "one statement"])
def test_a_signal_while_a_batch_is_being_sent_ends_the_session_not_the_next_runs(expired_and_live, batch_size):
    """The run says it was interrupted (not failed), GC's advisory lock is free for another session at once,
    and the next run, on the same alias, deletes every expired row."""
    expired_and_live(300, live=5)
    plan = gc.GcPlan(cutoff=timezone.now(), batch_size=batch_size)
    result = gc.run_gc(plan, actor=GC_ACTOR, interrupter=LandsWhileSending())
    assert (result.outcome, result.rows_deleted) == ("interrupted", 0), result.message
    with psycopg.connect(libpq_url(), autocommit=True) as other:
        assert other.execute("SELECT pg_try_advisory_lock(%s)", [gc.sql.ADVISORY_LOCK_KEY]).fetchone()[0]
    assert gc.run_gc(plan, actor=GC_ACTOR).rows_deleted == 300
    assert expired_count() == 0 and TaskStateStore.objects.count() == 5


@pytest.mark.usefixtures("postgres_only")
def test_optimistic_batches_leave_the_sessions_settings_as_they_were(expired_and_live, batch_order):
    """Optimistic batches run in autocommit with the run's settings set on the session (lock_timeout,
    asynchronous commit, generic plans, notices, the planner kept to its walk); the run puts the session's
    own values back."""
    expired_and_live(120, live=5)
    names = [
        "lock_timeout",
        "synchronous_commit",
        "plan_cache_mode",
        "client_min_messages",
        "enable_seqscan",
        "enable_indexscan",
        "enable_bitmapscan",
        "max_parallel_workers_per_gather",
    ]
    connection = connections["airflow"]

    def current():
        with connection.cursor() as cursor:
            cursor.execute("SELECT " + ", ".join(["current_setting(%s)"] * len(names)), names)
            return cursor.fetchone()

    before = current()
    result = gc.run_gc(gc.GcPlan(cutoff=timezone.now(), batch_size=50, lock_timeout=7), actor=GC_ACTOR)
    assert (result.outcome, result.rows_deleted, result.batches, result.batch_order) == (
        "completed",
        120,
        3,
        batch_order,
    )
    assert current() == before and not connection.in_atomic_block
