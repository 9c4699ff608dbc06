from urllib.parse import urlencode, urljoin, urlsplit

from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from statestore_admin.access.actors import Actor
from statestore_admin.core.errors import Invalid
from statestore_admin.identity import break_glass

MAX_MINUTES = 24 * 60


class Command(BaseCommand):
    help = (
        "Print a one-time sign-in link for the superuser USERNAME, for when single sign-on is down or local "
        "passwords are off (docs/sign-in.md, Break-glass). It signs in once, within --minutes."
    )
    # A broken configuration (a check error) is when this is needed most.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--minutes", type=int, default=15, help=f"How long the link works, 1 to {MAX_MINUTES}.")
        parser.add_argument(
            "--url",
            default="http://127.0.0.1:8000/",
            help="The dashboard's address as the person's browser reaches it (default: make serve's).",
        )
        parser.add_argument(
            "--create", action="store_true", help="Make USERNAME a superuser without a usable password if missing."
        )

    def handle(self, *args, username, minutes, url, create, **options):
        if not 1 <= minutes <= MAX_MINUTES:
            raise CommandError(f"--minutes {minutes}: give 1 to {MAX_MINUTES}.")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise CommandError(
                f"--url {url!r}: give the dashboard's http(s) address, e.g. https://statestore.example.com/"
            )
        try:
            user = break_glass.user_for(username, create)
        except Invalid as exc:
            raise CommandError(" ".join(exc.messages)) from None
        if user is None:
            raise CommandError(f"No user {username!r}. Give an existing superuser, or --create to make one.")
        try:
            token = break_glass.issue(user, minutes, actor=Actor.command())
        except ValueError as exc:
            raise CommandError(f"{exc} Break-glass links are for those only.") from None
        page = urljoin(url if url.endswith("/") else url + "/", reverse("break-glass").lstrip("/"))
        link = f"{page}?{urlencode({'token': token})}"
        self.stdout.write(link)
        self.stderr.write(
            f"Signs in as {user.get_username()} once, within {minutes} minutes. Logged and audited as break-glass."
        )
