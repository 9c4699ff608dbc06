from django.core.management.base import BaseCommand

from statestore_admin import grants
from statestore_admin.commands.accounts.management.commands._scope_args import add_holder_arguments, change_scope


class Command(BaseCommand):
    help = (
        "Let a group or user see the DAGs and assets matching glob patterns (adds to what they have), or with "
        "--unscoped every DAG and asset. A user without any grant (their own or their groups') sees nothing; "
        "with DAG patterns only, no asset (add --assets '*')."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        add_holder_arguments(parser)
        parser.add_argument(
            "--unscoped",
            action="store_true",
            help="Every DAG and asset, the GC page and other store-wide data included (replaces the holder's "
            "patterns; patterns granted later replace this).",
        )

    def handle(self, *args, **options):
        change_scope(self, grants.grant, "Added", options, unscoped=options["unscoped"])
