from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The REST API: Airflow's /api/v2 state-store endpoints, and our own under /api/statestore/v1."""

    name = "statestore_admin.api"
    label = "api"
    verbose_name = "API"

    def ready(self):
        from . import schema  # noqa: F401  (registers the Bearer scheme with drf-spectacular)
