from django.apps import AppConfig


class GrantsConfig(AppConfig):
    name = "statestore_admin.grants"
    label = "grants"

    def ready(self):
        from . import signals  # noqa: F401  (a deleted account's or group's grants, removed as an audited change)
