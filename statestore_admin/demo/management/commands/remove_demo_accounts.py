from django.core.management.base import BaseCommand

from statestore_admin.demo.accounts import remove_demo_accounts


class Command(BaseCommand):
    help = (
        "Delete the demo's accounts (demo, demo-etl, demo-viewer and any other that demo_setup made) and their API "
        "tokens from the dashboard's database; their audit events stay. What statestore.E050 asks for."
    )
    requires_system_checks = []  # E050 is what it fixes

    def handle(self, *args, **options):
        names, tokens = remove_demo_accounts()
        if not names:
            self.stdout.write("No demo account in the dashboard's database.")
            return
        self.stdout.write(
            f"Deleted the demo's accounts {', '.join(names)} and their {tokens} API token(s). "
            "Their audit events stay, under their names."
        )
