"""`manage.py state_store_orphans`: worker-side objects no row references, and rows whose object is missing.

Lists the objects under ``[common.io] state_store_objectstorage_path`` and the rows holding references
(``objects.orphans``): orphans (count, bytes, a sample), dangling references, references outside the base
path and orphan risks. ``--delete`` deletes the orphans last modified more than ``--older-than`` days ago
(default 1: a worker writes its object before its row, so a younger one may be a write in flight), each
checked again right before its delete, in one audited run (audit action ``orphans``).

Exit codes: 0 done (also: nothing configured, without --delete); 1 some orphan deletes failed, or the
storage could not be listed completely (the figures are then incomplete); 2 invalid option or configuration
(an invalid ``[common.io]`` option, or --delete without a configured storage).
"""

import sys
from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from statestore_admin.access.actors import Actor
from statestore_admin.commands.orphans_text import report_lines
from statestore_admin.commands.output import add_json_flag, write_json
from statestore_admin.objects import orphans
from statestore_admin.objects import store as objects

EXIT_FAILED, EXIT_USAGE = 1, 2


class Command(BaseCommand):
    help = (
        "Report worker-side objects that no state row references (orphans) and references whose object is "
        "missing; with --delete, delete the orphans older than --older-than days."
    )
    requires_system_checks = []  # a scheduled job: only the databases and the storage it needs are touched

    def add_arguments(self, parser):
        parser.add_argument("--delete", action="store_true", help="Delete the orphans older than --older-than.")
        parser.add_argument(
            "--older-than",
            type=float,
            default=1.0,
            metavar="DAYS",
            help="Orphans modified less than this many days ago are kept (default 1; fractions allowed).",
        )
        parser.add_argument(
            "--sample",
            type=int,
            default=orphans.DEFAULT_SAMPLE,
            metavar="N",
            help=f"Items listed in each sample (default {orphans.DEFAULT_SAMPLE}, at most {orphans.SAMPLE_MAX}).",
        )
        add_json_flag(parser, "the report (the API's shape)")

    def handle(self, *args, **options):
        older_than = options["older_than"]
        if not older_than >= 0 or older_than > 36_500:
            raise CommandError("--older-than: a number of days from 0 to 36500.", returncode=EXIT_USAGE)
        if not 0 <= options["sample"] <= orphans.SAMPLE_MAX:
            raise CommandError(f"--sample: a number from 0 to {orphans.SAMPLE_MAX}.", returncode=EXIT_USAGE)
        if settings.AIRFLOW_API_MODE:  # the report compares every row with every object
            raise CommandError(
                "state_store_orphans needs Airflow's metadata database, and this dashboard reaches Airflow through its "
                "REST API (AIRFLOW_API_URL) (docs/managed-airflow.md).",
                returncode=EXIT_USAGE,
            )
        try:
            result = orphans.report(
                sample=options["sample"],
                older_than=timedelta(days=older_than),
                delete=options["delete"],
                actor=Actor.command(),
            )
        except objects.StorageError as exc:
            raise CommandError(str(exc), returncode=EXIT_USAGE) from exc
        if options["json"]:
            write_json(self, result.as_dict())
        else:
            for line in report_lines(result):
                self.stdout.write(line)
        if result.config_error:
            if options["json"]:
                self.stderr.write(f"Airflow configuration error: {result.config_error}")
            sys.exit(EXIT_USAGE)
        if result.failed_deletes or not result.complete:
            sys.exit(EXIT_FAILED)
