from django.apps import AppConfig


class RecordsConfig(AppConfig):
    """The dashboard's own tables. Their Django label stays ``state`` (where they were first defined), so
    table names, migrations, content types and permission codenames of existing databases are unchanged."""

    name = "statestore_admin.records"
    label = "state"
    verbose_name = "State"
