from django.core.management.base import BaseCommand

from statestore_admin.tokens.models import ApiToken


class Command(BaseCommand):
    help = "List API tokens (their prefixes, never the tokens), newest first."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--user", help="Only this user's tokens.")
        parser.add_argument("--all", action="store_true", help="Include revoked tokens.")

    def handle(self, *args, user=None, all=False, **options):
        tokens = ApiToken.objects.select_related("user")
        if user:
            tokens = tokens.filter(user__username=user)
        if not all:
            tokens = tokens.active()
        for t in tokens:
            state = f"revoked {t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "active"
            used = f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "never"
            self.stdout.write(
                f"{t.pk}\t{t.prefix}…\t{t.user.get_username()}\t{t.name or '-'}\t"
                f"created {t.created_at:%Y-%m-%d %H:%M}\tlast used {used}\t{state}"
            )
