"""`manage.py state_store_stats`: record a statistics snapshot of the state store (exact figures, in the
dashboard database), then delete the snapshots older than ``--keep-days``. See docs/operations.md.

Exit codes: 0 done; 1 the snapshot failed (recorded as failed, with the error) or a database error;
2 invalid option; 3 another snapshot is being taken (nothing recorded); 130/143 interrupted (recorded as
failed).
"""

import signal
import sys

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from statestore_admin.access.actors import Actor
from statestore_admin.commands.output import add_json_flag, write_json
from statestore_admin.commands.stats_text import snapshot_line
from statestore_admin.core.errors import Invalid
from statestore_admin.stats import snapshots as stats

EXIT_ERROR, EXIT_USAGE, EXIT_IN_PROGRESS = 1, 2, 3  # 3 as state_store_clean's EXIT_LOCKED


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C: the snapshot is marked failed on the way out."""


def _terminate(signum, frame):
    raise Terminated


class Command(BaseCommand):
    help = "Record exact figures of the state store (a statistics snapshot) for the dashboard. Safe to schedule."
    requires_system_checks = []  # a scheduled job: only the databases it needs are touched

    def add_arguments(self, parser):
        parser.add_argument(
            "--keep-days",
            type=int,
            default=stats.DEFAULT_KEEP_DAYS,
            metavar="DAYS",
            help=f"Delete snapshots older than DAYS days afterwards (default {stats.DEFAULT_KEEP_DAYS}, >= 1).",
        )
        add_json_flag(parser, "the snapshot")

    def handle(self, *args, **options):
        keep_days = options["keep_days"]
        if keep_days < 1:
            raise CommandError(f"--keep-days {keep_days}: keep at least one day of snapshots.", returncode=EXIT_USAGE)
        previous = signal.signal(signal.SIGTERM, _terminate)
        try:
            snapshot = stats.take_snapshot(actor=Actor.command(), trigger="command")
        except KeyboardInterrupt as exc:
            self.stderr.write("Interrupted: the statistics snapshot was recorded as failed.")
            sys.exit(128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT))
        except stats.SnapshotInProgress as exc:
            raise CommandError(str(exc), returncode=EXIT_IN_PROGRESS) from exc
        except Exception as exc:
            raise CommandError(f"Statistics snapshot failed: {exc}", returncode=EXIT_ERROR) from exc
        finally:
            signal.signal(signal.SIGTERM, previous)
        try:
            pruned = stats.prune_snapshots(keep_days)
        except (Invalid, OverflowError) as exc:
            raise CommandError(f"--keep-days {keep_days}: too many days.", returncode=EXIT_USAGE) from exc
        except DatabaseError as exc:
            raise CommandError(f"Pruning old snapshots failed: {exc}", returncode=EXIT_ERROR) from exc
        if options["json"]:
            write_json(self, {**stats.as_dict(snapshot), "pruned": pruned})
        elif options["verbosity"] >= 1:
            self.stdout.write(snapshot_line(snapshot))
            if pruned:
                self.stdout.write(f"Deleted {pruned} snapshot(s) older than {keep_days} days.")
