from django.core.management.base import BaseCommand, CommandError

from statestore_admin import grants
from statestore_admin.access.actors import Actor
from statestore_admin.commands.accounts.management.commands._scope_args import add_holder_arguments, describe, holder_of
from statestore_admin.core.errors import Invalid


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

    def handle(self, *args, dags, assets, everything, **options):
        holder = holder_of(options)
        try:
            removed = grants.revoke(holder, dags=dags, assets=assets, everything=everything, actor=Actor.command())
        except Invalid as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(f"Removed {removed} pattern(s). Scope of {describe(holder)}.")
