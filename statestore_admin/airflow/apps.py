from django.apps import AppConfig


class AirflowAppConfig(AppConfig):
    """Unmanaged mirrors of Airflow's tables, Airflow's configuration, and the checks on both."""

    name = "statestore_admin.airflow"
    label = "airflow"
    verbose_name = "Airflow metadata"

    def ready(self) -> None:
        from django.core.signals import request_finished, request_started

        from statestore_admin.airflow import availability, checks  # noqa: F401  (checks registers the system checks)

        # One deadline per request: what failed is remembered for the request, and forgotten after it.
        request_started.connect(availability.begin_request, dispatch_uid="airflow-availability-begin")
        request_finished.connect(availability.end_request, dispatch_uid="airflow-availability-end")
