from django.apps import AppConfig


class TokensConfig(AppConfig):
    """API tokens (``Authorization: Bearer``): the model, its authentication class, the page."""

    name = "statestore_admin.tokens"
    label = "tokens"
    verbose_name = "API tokens"

    def ready(self):
        from statestore_admin.tokens import signals  # noqa: F401  (revoke tokens on password change or deactivation)
