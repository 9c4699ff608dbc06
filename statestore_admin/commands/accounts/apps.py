from django.apps import AppConfig


class AccountCommandsConfig(AppConfig):
    """The management commands over accounts: break-glass links, API tokens, access scopes."""

    name = "statestore_admin.commands.accounts"
    label = "commands_accounts"
    verbose_name = "Account commands"
