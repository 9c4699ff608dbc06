"""`manage.py audit_prune --older-than DAYS`: delete audit events older than DAYS days, with their keys.

Exit codes: 0 done (also: nothing to delete, dry run); 1 database error (committed batches are kept);
2 invalid option (DAYS or the batch size under 1).
"""

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from statestore_admin.access.actors import Actor
from statestore_admin.audit import retention
from statestore_admin.core.errors import Invalid

EXIT_ERROR, EXIT_USAGE = 1, 2
OPTIONS = {"older_than": "--older-than", "batch_size": "--batch-size"}


class Command(BaseCommand):
    help = "Delete audit events (and their keys) older than DAYS days, in bounded batches. Safe to schedule."
    requires_system_checks = []  # a scheduled job: only the dashboard database is touched

    def add_arguments(self, parser):
        parser.add_argument(
            "--older-than", type=int, required=True, metavar="DAYS", help="Delete events older than DAYS days (>= 1)."
        )
        parser.add_argument(
            "--batch-size", type=int, default=1000, metavar="N", help="Events per transaction (default 1000)."
        )
        parser.add_argument("--dry-run", action="store_true", help="Count what would be deleted; delete nothing.")

    def handle(self, *args, **options):
        try:
            result = retention.prune(
                timedelta(days=options["older_than"]),
                options["batch_size"],
                actor=Actor.command(),
                dry_run=options["dry_run"],
            )
        except OverflowError as exc:
            raise CommandError(f"--older-than {options['older_than']}: too many days.", returncode=EXIT_USAGE) from exc
        except Invalid as exc:
            message = " ".join(
                f"{OPTIONS.get(name, name)}: {m}" for name, messages in exc.message_dict.items() for m in messages
            )
            raise CommandError(message, returncode=EXIT_USAGE) from exc
        except DatabaseError as exc:
            raise CommandError(
                f"Audit pruning failed (committed batches are kept): {exc}", returncode=EXIT_ERROR
            ) from exc
        if options["verbosity"] >= 1:
            self.stdout.write(result.describe())
