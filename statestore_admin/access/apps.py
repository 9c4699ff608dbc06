from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "statestore_admin.access"
    label = "statestore_access"

    def ready(self):
        from . import checks  # noqa: F401  (registers the system checks)
