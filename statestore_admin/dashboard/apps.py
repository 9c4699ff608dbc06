from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The htmx pages."""

    name = "statestore_admin.dashboard"
    label = "dashboard"
