from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The htmx pages."""

    name = "statestore_admin.dashboard"
    label = "dashboard"

    def ready(self):
        from statestore_admin.dashboard import checks  # noqa: F401  (registers the system checks)
        from statestore_admin.sso import checks as sso_checks  # noqa: F401  (sso is no app: its system checks)
        from statestore_admin.sso import passwords, proxy  # noqa: F401
