from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The htmx pages and the demo set-up."""

    name = "statestore_admin.dashboard"
    label = "dashboard"
