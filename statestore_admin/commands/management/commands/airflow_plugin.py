from django.core.management.base import BaseCommand

from statestore_admin.commands.airflow_plugin import plugin_source


class Command(BaseCommand):
    help = (
        "Print an Airflow plugin file that links Airflow's UI to this dashboard: "
        "manage.py airflow_plugin --url https://statestore.example.com > $AIRFLOW_HOME/plugins/statestore_admin.py"
    )
    requires_system_checks = []  # it reads no database: it runs wherever the dashboard's code is

    def add_arguments(self, parser):
        parser.add_argument("--url", required=True, help="The dashboard's address, as Airflow's users open it.")
        parser.add_argument(
            "--embed",
            action="store_true",
            help="Show the dashboard's pages inside Airflow (a tab on DAG, run, task, task instance and asset "
            "pages); the dashboard must allow Airflow's origin in STATESTORE_FRAME_ANCESTORS.",
        )

    def handle(self, *args, url, embed=False, **options):
        self.stdout.write(plugin_source(url, embed=embed), ending="")
