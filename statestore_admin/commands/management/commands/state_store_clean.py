"""`manage.py state_store_clean`: delete expired task state, as Airflow's `airflow state-store clean`.

A real run that completed, stopped at --max-batches or was skipped (custom backend) then records a
statistics snapshot (``gc.snapshot_after``, as after a run from the GC page), unless ``--no-stats``. A
snapshot that fails is reported on stderr (and recorded as failed); it does not change the run's outcome
or exit code. A snapshot taken is described with --json ("stats") or at --verbosity 3.

Like Airflow's GC it deletes rows only: the worker-side objects of expired references are left behind
(orphans; ``state_store_orphans`` lists them). ``--with-objects`` (our extension) also deletes the objects
of the rows it deleted, after each committed batch; an object that cannot be deleted is counted and
reported, and its row stays deleted.

Exit codes: 0 done (also: nothing to delete, dry run, custom backend skipped, stopped at
--max-batches); 1 database or other error; 2 invalid option or Airflow configuration (also
--with-objects without an object storage the dashboard can open: nothing deleted); 3 another run
holds the lock; 4 rows deleted but some of their objects could not be deleted (--with-objects; they
are orphaned); 128+N stopped by signal N (130 SIGINT, 143 SIGTERM), committed batches kept.
"""

import signal
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from statestore_admin import gc
from statestore_admin.access.actors import GC, Actor
from statestore_admin.access.scopes import EVERYTHING
from statestore_admin.airflow.availability import query_timeout
from statestore_admin.airflow.config import AirflowConfigError, airflow_config
from statestore_admin.commands.gc_text import dry_run_lines
from statestore_admin.commands.output import add_json_flag, write_json
from statestore_admin.commands.stats_text import snapshot_line
from statestore_admin.core import formatting
from statestore_admin.core.errors import Invalid
from statestore_admin.objects import store as objects
from statestore_admin.records.models import GcRun

EXIT_ERROR, EXIT_USAGE, EXIT_LOCKED, EXIT_OBJECTS_FAILED = 1, 2, 3, 4
DESTS = {"cutoff": "before", "dag_ids": "dag_id"}  # domain field -> option, where the names differ


def _usage_error(exc: Invalid, options: dict) -> CommandError:
    """The domain's ``Invalid`` in the command's words: the option, what was given, the message; exit 2."""
    lines = []
    for name, messages in exc.message_dict.items():
        dest = DESTS.get(name, name)
        given = options.get(dest)
        option = "--" + dest.replace("_", "-") + (f" {given!r}" if given not in (None, []) else "")
        lines += [f"{option}: {message}" for message in messages]
    return CommandError(" ".join(lines), returncode=EXIT_USAGE)


class Command(BaseCommand):
    help = (
        "Delete expired task_state_store rows (expires_at < now) by Airflow's rules. Safe to schedule. "
        "Rows only, like Airflow: worker-side objects of expired references are left behind unless "
        "--with-objects. Exit codes: 0 done; 1 error; 2 invalid option or configuration (also --with-objects "
        "without object storage); 3 another run holds the lock; 4 rows deleted, some objects could not be "
        "deleted (orphaned); 128+N stopped by signal N."
    )
    requires_system_checks = []  # a scheduled job: only the database it needs is touched

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="Show what would be deleted; delete nothing.")
        parser.add_argument("--before", metavar="TIMESTAMP", help="Timezone-aware cutoff in the past (default: now).")
        parser.add_argument(
            "--dag-id", action="append", default=[], metavar="DAG_ID", help="Only this DAG (repeatable)."
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            metavar="N",
            help="Rows per batch; 0 = one statement (default: [state_store] state_cleanup_batch_size).",
        )
        parser.add_argument("--sleep", type=float, default=0.0, metavar="SECONDS", help="Pause between batches.")
        parser.add_argument("--max-batches", type=int, metavar="N", help="Stop after N batches.")
        parser.add_argument(
            "--lock-timeout",
            type=float,
            default=5.0,
            metavar="SECONDS",
            help="PostgreSQL lock_timeout of each batch (default 5).",
        )
        parser.add_argument("--top", type=int, default=10, help="Dry run: DAGs listed (default 10).")
        add_json_flag(parser, "a summary")
        parser.add_argument(
            "--no-stats", action="store_true", help="Do not record a statistics snapshot after a real run."
        )
        parser.add_argument(
            "--with-objects",
            action="store_true",
            help="Also delete the worker-side objects ([common.io] state_store_objectstorage_path) of the rows "
            "deleted, after each committed batch (not done by Airflow's GC). Failures are counted and reported, "
            "the rows stay deleted, exit code 4. With --dry-run: how many expired rows reference objects.",
        )

    def execute(self, *args, **options):
        if settings.AIRFLOW_API_MODE:  # GC deletes with SQL; Airflow's API has no route for it
            raise CommandError(
                "state_store_clean needs Airflow's metadata database, and this dashboard reaches Airflow through its "
                "REST API (AIRFLOW_API_URL). On managed Airflow run Airflow's own `airflow state-store clean` where "
                "Airflow's CLI has the database (docs/managed-airflow.md).",
                returncode=EXIT_USAGE,
            )
        # Deletes and counts over a large table outlast a page's query deadline: GC has its own.
        with query_timeout(settings.AIRFLOW_DATABASE_GC_QUERY_TIMEOUT):
            return super().execute(*args, **options)

    def handle(self, *args, **options):
        self.verbosity = options["verbosity"]
        self.as_json = options["json"]
        config = airflow_config()
        try:
            batch_size = options["batch_size"] if options["batch_size"] is not None else config.state_cleanup_batch_size
            worker_backend = config.worker_backend
            gc.backend_status(config)
        except AirflowConfigError as exc:
            raise CommandError(str(exc), returncode=EXIT_USAGE) from exc
        try:
            plan = gc.GcPlan(
                cutoff=gc.parse_cutoff(options["before"], timezone.now()),
                dag_ids=tuple(dict.fromkeys(options["dag_id"])),
                batch_size=batch_size,
                sleep=options["sleep"],
                max_batches=options["max_batches"],
                lock_timeout=options["lock_timeout"],
                with_objects=options["with_objects"],
            )
        except Invalid as exc:
            raise _usage_error(exc, options) from exc
        if plan.with_objects:
            try:
                gc.object_storage(config)
            except gc.GcMisconfigured as exc:
                raise CommandError(f"--with-objects: {exc}", returncode=EXIT_USAGE) from exc
        if options["dry_run"]:
            return self.dry_run(plan, config, options["top"])
        objects_noted = not worker_backend or plan.with_objects or objects.backend_is_object_storage(config)
        if not objects_noted and self.verbosity >= 1 and not self.as_json:
            # Another worker-side backend than common.io's: the dashboard cannot reach its objects.
            self.stderr.write(
                f"Note: [workers] state_store_backend = {worker_backend}: values are references; "
                "deleting rows does not delete the external objects (as in Airflow)."
            )
        result = self.run(plan, config)
        if not self.as_json:
            self.report(result)
        snapshot = None if options["no_stats"] else self.snapshot(result)
        if self.as_json:
            self.report(result, snapshot)
        if result.outcome == GcRun.Outcome.LOCKED:
            sys.exit(EXIT_LOCKED)
        if result.outcome == GcRun.Outcome.INTERRUPTED:
            sys.exit(128 + (self.interrupter.signum or signal.SIGTERM))
        if result.objects_failed:
            sys.exit(EXIT_OBJECTS_FAILED)

    # -- real run -------------------------------------------------------------------------------
    def run(self, plan, config):
        self.interrupter = gc.Interrupter()
        previous = {
            sig: signal.signal(sig, lambda signum, frame: self.interrupter.request(signum))
            for sig in (signal.SIGINT, signal.SIGTERM)
        }
        self.tty = self.stdout.isatty() and not self.as_json and self.verbosity >= 1
        # On a terminal, a progress bar: its total is counted once, through the expires_at index.
        self.expected = gc.expired_rows(plan.cutoff, plan.dag_ids).count() if self.tty else None
        try:
            return gc.run_gc(
                plan, actor=Actor.command(via=GC), interrupter=self.interrupter, on_batch=self.progress, config=config
            )
        except gc.GcNotMigrated as exc:
            raise CommandError(str(exc), returncode=EXIT_ERROR) from exc
        except gc.GcMisconfigured as exc:
            raise CommandError(f"--with-objects: {exc}", returncode=EXIT_USAGE) from exc
        except Exception as exc:
            raise CommandError(f"State store GC failed: {exc}", returncode=EXIT_ERROR) from exc
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if self.tty:
                self.stdout.write("")

    def progress(self, p: gc.GcProgress):
        rate = p.total_rows / p.elapsed if p.elapsed > 0 else 0.0
        line = f"batch {p.batch}: {p.rows} rows deleted, {p.total_rows} in all, {rate:,.0f} rows/s"
        if self.tty:
            share = min(p.total_rows / self.expected, 1.0) if self.expected else 1.0
            bar = "#" * round(share * 30)
            self.stdout.write(
                f"\r[{bar:<30}] {share:4.0%} {p.total_rows:,}/{self.expected:,} rows, "
                f"batch {p.batch}, {rate:,.0f} rows/s ",
                ending="",
            )
            self.stdout.flush()
        elif self.verbosity >= 2 and not self.as_json:
            self.stdout.write(line)

    # -- statistics snapshot after a real run ---------------------------------------------------
    def snapshot(self, result: gc.GcResult) -> dict | None:
        """The domain's snapshot after the run (``gc.snapshot_after``); never fails the command."""
        try:
            taken = gc.snapshot_after(result, actor=Actor.command(via=GC))
        except KeyboardInterrupt:
            self.stderr.write("Statistics snapshot interrupted (recorded as failed); the GC run itself is done.")
            sys.exit(128 + signal.SIGINT)
        if taken is None:
            return None
        if taken.error:
            self.stderr.write(taken.describe())
        elif self.verbosity >= 3 and not self.as_json:  # the GC's own line stays the last one at lower verbosity
            self.stdout.write(snapshot_line(taken.snapshot))
        return taken.as_dict()

    def report(self, result: gc.GcResult, snapshot: dict | None = None):
        if self.as_json:
            write_json(self, {**result.as_dict(), "stats": snapshot})
            return
        failed = result.outcome in gc.STOPPED
        if self.verbosity < 1 and not failed:
            self.report_object_failures(result)
            return
        if result.outcome in gc.WITHOUT_DELETING:
            line = result.message
        else:
            line = (
                f"Deleted {formatting.plural(result.rows_deleted, 'expired task state row')} in "
                f"{formatting.plural(result.batches, 'batch', 'batches')}, "
                f"cutoff {formatting.iso(result.plan.cutoff)}, {result.duration:.2f}s ({result.outcome})."
            )
            if result.message:
                line += " " + result.message
            if result.object_deletes is not None:
                line += " " + result.object_deletes.summary()
            elif result.objects_left_behind:
                line += " " + gc.OBJECTS_LEFT_BEHIND
        (self.stderr if failed else self.stdout).write(line)
        self.report_object_failures(result)

    def report_object_failures(self, result: gc.GcResult):
        """Each object that could not be deleted (the first ones), on stderr: they are orphans now."""
        if not result.objects_failed:
            return
        for ref, error in result.object_deletes.failed:
            self.stderr.write(f"Object not deleted (orphaned): {ref}: {error}")
        named = len(result.object_deletes.failed)
        if result.objects_failed > named:
            more = result.objects_failed - named
            self.stderr.write(f"… and {more:,} more (the audit event names the first {named}).")

    # -- dry run --------------------------------------------------------------------------------
    def dry_run(self, plan, config, top):
        summary = gc.dry_run(plan, top=top, config=config, scope=EVERYTHING)
        if self.as_json:
            write_json(self, summary.as_dict())
            return
        for line in dry_run_lines(summary):  # exact, or capped and estimated (docs/gc.md)
            self.stdout.write(line)
