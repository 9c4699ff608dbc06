from django.apps import AppConfig


class CommandsConfig(AppConfig):
    """The management commands over the domain: GC, orphans, statistics, restore, audit, scopes, tokens."""

    name = "statestore_admin.commands"
    label = "commands"
    verbose_name = "Management commands"
