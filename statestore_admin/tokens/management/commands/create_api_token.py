from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from statestore_admin.tokens.models import ApiToken


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print only the token (it is not stored and cannot be shown again)."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="What the token is for, e.g. 'nightly cleanup script'.")

    def handle(self, *args, username, name, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive.")
        _, token = ApiToken.issue(user, name)
        self.stdout.write(token)
