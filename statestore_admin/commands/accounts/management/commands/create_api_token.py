import re
from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from statestore_admin.access.actors import Actor
from statestore_admin.identity import usernames
from statestore_admin.tokens import services
from statestore_admin.tokens.models import max_age

DURATION = re.compile(r"^\s*(\d+)\s*([dh])\s*$")


def parse_duration(text: str) -> timedelta:
    """``90d`` or ``12h``."""
    match = DURATION.match(text or "")
    if not match or int(match.group(1)) == 0:
        raise CommandError(f"--expires-in {text!r}: give a number of days or hours, e.g. 90d or 12h.")
    number, unit = int(match.group(1)), match.group(2)
    try:
        return timedelta(days=number) if unit == "d" else timedelta(hours=number)
    except OverflowError:
        raise CommandError(f"--expires-in {text!r} is too long.") from None


class Command(BaseCommand):
    help = "Create an API token for USERNAME and print only the token (it is not stored and cannot be shown again)."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="What the token is for, e.g. 'nightly cleanup script'.")
        parser.add_argument(
            "--expires-in",
            default=None,
            help="Lifetime, e.g. 90d or 12h; default and maximum: API_TOKEN_MAX_AGE_DAYS days.",
        )
        parser.add_argument("--read-only", action="store_true", help="Safe methods only: any write answers 403.")

    def handle(self, *args, username, name, expires_in=None, read_only=False, **options):
        lifetime = parse_duration(expires_in) if expires_in is not None else max_age()
        if lifetime > max_age():
            raise CommandError(
                f"--expires-in {expires_in}: more than the maximum of {settings.API_TOKEN_MAX_AGE_DAYS} days "
                "(API_TOKEN_MAX_AGE_DAYS)."
            )
        user = usernames.find(username)
        if user is None:
            raise CommandError(f"No user {username!r}.")
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive.")
        _, token = services.issue(user, name, expires_in=lifetime, read_only=read_only, actor=Actor.command())
        self.stdout.write(token)
