from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The htmx pages."""

    name = "statestore_admin.dashboard"
    label = "dashboard"

    def ready(self):
        from . import checks  # noqa: F401  (registers the system checks)
