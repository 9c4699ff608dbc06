from django.apps import AppConfig


class CommandsConfig(AppConfig):
    """The management commands over the state store: GC, orphans, statistics, restore, audit pruning."""

    name = "statestore_admin.commands"
    label = "commands"
    verbose_name = "Management commands"
