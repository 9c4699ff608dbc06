from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from statestore_admin.demo.data import load_demo_data
from statestore_admin.demo.scale import LAYOUTS, SPREAD, load_scale_data


class Command(BaseCommand):
    help = (
        "Fill the Airflow database with a believable demo deployment (idempotent). "
        "Only the embedded demo database, unless --allow-any-database."
    )

    def add_arguments(self, parser):
        parser.add_argument("--scale", type=int, default=0, metavar="N", help="Also add N generated task keys.")
        parser.add_argument(
            "--expired-fraction", type=float, default=0.5, help="Share of the --scale keys that are expired."
        )
        parser.add_argument(
            "--layout",
            choices=LAYOUTS,
            default=SPREAD,
            help="Where the expired --scale keys are: a share of every run (spread, the default), or the first "
            "runs written, whole (clustered: old runs expire together).",
        )
        parser.add_argument(
            "--allow-any-database",
            action="store_true",
            help="Write to a non-embedded Airflow database (a scratch copy for benchmarks; never production).",
        )

    def handle(self, *args, scale, expired_fraction, layout, allow_any_database, **options):
        if not settings.AIRFLOW_DATABASE.embedded and not allow_any_database:
            raise CommandError(
                f"Refusing to write demo data into {settings.AIRFLOW_DATABASE.display_url} "
                f"(from {settings.AIRFLOW_DATABASE.source}): it is not the embedded demo database. "
                "Pass --allow-any-database for a scratch database."
            )
        if scale < 0 or not 0 <= expired_fraction <= 1:
            raise CommandError("--scale must be 0 or more and --expired-fraction between 0 and 1.")
        counts = load_demo_data()
        self.stdout.write("Demo data: " + ", ".join(f"{n} {what.replace('_', ' ')}" for what, n in counts.items()))
        if scale:
            inserted = load_scale_data(scale, expired_fraction, layout)
            self.stdout.write(f"Scale data: {inserted:,} task keys added to DAG 'scale_test'.")
