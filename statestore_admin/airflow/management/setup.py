"""The base of the commands that set up an Airflow database for the demo, the tests and the benchmarks."""

from django.core.management.base import BaseCommand


class SetupCommand(BaseCommand):
    """A command that may run before any Airflow table exists: Django's system checks would look for what it is
    about to create (the Airflow database check), so it runs none."""

    requires_system_checks = []
