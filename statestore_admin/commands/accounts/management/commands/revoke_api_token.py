from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q

from statestore_admin.access.actors import Actor
from statestore_admin.tokens import services
from statestore_admin.tokens.models import ApiToken


class Command(BaseCommand):
    help = "Revoke an API token, named by its id or its prefix (as list_api_tokens shows them)."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("token", help="The token's id or prefix.")

    def handle(self, *args, token, **options):
        match = Q(prefix=token.rstrip("…"))
        if token.isdigit():
            match |= Q(pk=int(token))
        tokens = list(ApiToken.objects.active().filter(match))
        if not tokens:
            raise CommandError(f"No active token {token!r}.")
        if len(tokens) > 1:
            raise CommandError(f"{token!r} names {len(tokens)} tokens; use the id.")
        actor = Actor.command()
        services.revoke(tokens[0], f"revoked by {actor.name} (revoke_api_token)", actor=actor)
        self.stdout.write(f"Revoked token {tokens[0].pk} ({tokens[0].prefix}…) of {tokens[0].user}.")
