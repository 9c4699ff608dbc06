from django.apps import AppConfig


class AirflowAppConfig(AppConfig):
    """Unmanaged mirrors of Airflow's tables, Airflow's configuration, and the checks on both."""

    name = "statestore_admin.airflow"
    label = "airflow"
    verbose_name = "Airflow metadata"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
