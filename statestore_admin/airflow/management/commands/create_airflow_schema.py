from django.core.management.base import CommandError
from django.db import connections

from statestore_admin.airflow.management.setup import SetupCommand
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.schema import SchemaExists, create_airflow_schema, has_state_tables


class Command(SetupCommand):
    help = (
        "Create Airflow 3.3.2's schema in an EMPTY Airflow database from the committed fixture "
        "(for the embedded demo, tests and benchmarks). Refuses any database that has Airflow tables."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--if-missing",
            action="store_true",
            help="Do nothing, successfully, when both state tables already exist.",
        )

    def handle(self, *args, if_missing=False, **options):
        connection = connections[airflow_alias()]
        if if_missing and has_state_tables(connection):
            self.stdout.write("The Airflow schema is already there.")
            return
        try:
            create_airflow_schema(connection)
        except SchemaExists as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(self.style.SUCCESS(f"Created Airflow's schema in {connection.settings_dict['NAME']}."))
