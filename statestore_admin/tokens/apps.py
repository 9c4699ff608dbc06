from django.apps import AppConfig


class TokensConfig(AppConfig):
    """API tokens (``Authorization: Bearer``): the model, its authentication class, the page, the commands."""

    name = "statestore_admin.tokens"
    label = "tokens"
    verbose_name = "API tokens"
