from django.core.management.base import BaseCommand, CommandError

from statestore_admin.state import scopes

from ._scope_args import add_holder_arguments, describe, holder_of


class Command(BaseCommand):
    help = (
        "Restrict a group or user to DAGs and assets matching glob patterns (adds to what they have). "
        "A holder without patterns sees everything; with DAG patterns only, no asset (add --assets '*')."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        add_holder_arguments(parser)

    def handle(self, *args, dags, assets, **options):
        holder = holder_of(options)
        try:
            added = scopes.grant(holder, dags=dags, assets=assets)
        except scopes.Invalid as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(f"Added {added} pattern(s). Scope of {describe(holder)}.")
