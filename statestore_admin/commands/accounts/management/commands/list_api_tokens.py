from django.core.management.base import BaseCommand

from statestore_admin.identity import usernames
from statestore_admin.tokens.models import ApiToken


class Command(BaseCommand):
    help = "List API tokens (their prefixes, never the tokens), newest first, with their expiry."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--user", help="Only this user's tokens.")
        parser.add_argument("--all", action="store_true", help="Include revoked tokens.")

    def handle(self, *args, user=None, all=False, **options):
        tokens = ApiToken.objects.select_related("user")
        if user:
            tokens = tokens.filter(user=usernames.find(user))  # none for a name no account has
        if not all:
            tokens = tokens.active()
        for t in tokens:
            if t.revoked_at:
                reason = f" ({t.revoked_reason})" if t.revoked_reason else ""
                state = f"revoked {t.revoked_at:%Y-%m-%d %H:%M}{reason}"
            else:
                state = "expired" if t.expired else "active"
            used = f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "never"
            access = "read-only" if t.read_only else "read-write"
            self.stdout.write(
                f"{t.pk}\t{t.prefix}…\t{t.user.get_username()}\t{t.name or '-'}\t"
                f"created {t.created_at:%Y-%m-%d %H:%M}\texpires {t.expires_at:%Y-%m-%d %H:%M}\t"
                f"last used {used}\t{access}\t{state}"
            )
