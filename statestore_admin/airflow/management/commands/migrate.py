"""Django's `migrate`, except that it never touches the Airflow metadata database.

Django's migration executor creates `django_migrations` and records migrations on any database it
is pointed at, whatever the router says. Airflow owns its schema, so for the Airflow alias this
command does nothing and says so.
"""

from django.core.management.commands.migrate import Command as DjangoMigrate

from statestore_admin.airflow.router import airflow_alias


class Command(DjangoMigrate):
    def handle(self, *args, **options):
        if options["database"] == airflow_alias():
            if options["verbosity"] >= 1:
                self.stdout.write(
                    f"Not migrating the '{airflow_alias()}' database: Airflow owns that schema "
                    "and statestore-admin never creates or alters tables there."
                )
            return
        return super().handle(*args, **options)
