from django.core.management.base import BaseCommand

from statestore_admin import grants
from statestore_admin.commands.accounts.management.commands._scope_args import add_holder_arguments, change_scope


class Command(BaseCommand):
    help = (
        "Remove patterns from a group's or user's scope; with --all, every grant of its own (--unscoped included). "
        "A user left without any grant (their own or their groups') sees nothing."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        add_holder_arguments(parser)
        parser.add_argument(
            "--all", dest="everything", action="store_true", help="Remove every pattern, and --unscoped."
        )

    def handle(self, *args, **options):
        change_scope(self, grants.revoke, "Removed", options, everything=options["everything"])
