"""`manage.py state_store_restore FILE`: put back the keys of an export file (as downloaded from the
dashboard or the API: format "statestore-admin/keys"), recorded as a restore by the OS user on this host.
`manage.py state_store_restore --event ID`: undo an audited change, as its page's Restore does. Unlike a
page or the API (``RESTORE_MAX_KEYS``), the command restores any number of keys.

Exit codes: 0 restored (also: nothing to change; keys whose DAG run or asset is gone are listed and
skipped); 1 keys were written again since the export and --overwrite was not given (nothing restored;
they are listed), or a database error; 2 the file cannot be read or is not a valid export, or the event
does not exist or cannot be restored.
"""

import sys

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from statestore_admin.access.actors import Actor
from statestore_admin.commands.output import add_json_flag, write_json
from statestore_admin.core.errors import Conflict, Invalid, NotFound
from statestore_admin.exports import documents as exports
from statestore_admin.exports import restore as restores

EXIT_CONFLICT, EXIT_USAGE = 1, 2  # 1 is also a database error


def _scope(item: dict) -> str:
    if item.get("asset_id") is not None:
        return f"asset {item['asset_id']}"
    return f"dag {item['dag_id']!r} run {item['run_id']!r} task {item['task_id']!r} map_index {item['map_index']}"


class Command(BaseCommand):
    help = "Restore task and asset keys from a statestore-admin export file (- reads standard input)."

    def add_arguments(self, parser):
        parser.add_argument("file", metavar="FILE", nargs="?", help="The export (JSON), or - for standard input.")
        parser.add_argument("--event", type=int, metavar="ID", help="Undo this audit event instead of a file.")
        parser.add_argument(
            "--overwrite", action="store_true", help="Also restore keys written again since the export."
        )
        add_json_flag(parser, "the outcome")

    def handle(self, *args, **options):
        self.as_json = options["json"]
        if (options["file"] is None) == (options["event"] is None):
            raise CommandError("Give either FILE or --event ID.", returncode=EXIT_USAGE)
        source = options["file"] if options["event"] is None else f"Event {options['event']}"
        try:
            if options["event"] is None:
                document = self.read(options["file"])
                outcome = restores.restore_document(
                    actor=Actor.command(), document=document, overwrite=options["overwrite"]
                )
            else:
                outcome = restores.restore_event(
                    actor=Actor.command(), event_id=options["event"], overwrite=options["overwrite"]
                )
        except NotFound as exc:
            raise CommandError(f"{source}: {exc}", returncode=EXIT_USAGE) from exc
        except Invalid as exc:
            message = " ".join(m for ms in exc.message_dict.values() for m in ms)
            raise CommandError(f"{source}: {message}", returncode=EXIT_USAGE) from exc
        except Conflict as exc:
            self.conflicts(exc)
            sys.exit(EXIT_CONFLICT)
        except DatabaseError as exc:
            raise CommandError(f"Restore failed, nothing restored: {exc}", returncode=EXIT_CONFLICT) from exc
        self.report(outcome)

    def read(self, path: str):
        """The file's JSON, read as the Audit page and the API read an upload (``exports.read_document``)."""
        try:
            if path == "-":
                data = sys.stdin.buffer.read()
            else:
                with open(path, "rb") as file:
                    data = file.read()
        except OSError as exc:
            raise CommandError(f"Cannot read {path}: {exc.strerror or exc}.", returncode=EXIT_USAGE) from exc
        try:
            return exports.read_document(data)
        except Invalid as exc:
            message = " ".join(m for ms in exc.message_dict.values() for m in ms)
            raise CommandError(f"{path}: {message}", returncode=EXIT_USAGE) from exc

    def report(self, outcome: restores.RestoreOutcome):
        if self.as_json:
            write_json(self, {"outcome": "restored", **outcome.as_dict()})
            return
        self.stdout.write(outcome.describe())
        for item in outcome.missing:
            self.stdout.write(f"  not restored: {_scope(item)} key {item['key']!r}: {item['reason']}")
        if outcome.events:
            self.stdout.write(f"Audit event(s): {', '.join(f'#{event.pk}' for event in outcome.events)}.")

    def conflicts(self, exc: Conflict):
        if self.as_json:
            write_json(self, {"outcome": "conflict", "message": str(exc), "conflicts": exc.details})
            return
        self.stderr.write(f"{exc} Use --overwrite to restore them anyway.")
        for item in exc.details:
            now = item["current"]["value"] if item.get("current") else "(no key)"
            wanted = item["restore"]["value"] if item.get("restore") else "(no key)"
            self.stderr.write(f"  {_scope(item)} key {item['key']!r}: now {now[:80]!r}, in the file {wanted[:80]!r}")
