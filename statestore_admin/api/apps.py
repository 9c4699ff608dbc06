from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The REST API: Airflow's /api/v2 state-store endpoints, and our own under /api/statestore/v1."""

    name = "statestore_admin.api"
    label = "api"
    verbose_name = "API"

    # No ready(): the drf-spectacular extensions (schema.py) are imported by this app's URLconf, which
    # every schema generation (/api/schema/, `manage.py spectacular`, its system check) loads before it
    # describes a view. Importing them here cost every manage.py command ~0.2 s of DRF and
    # drf-spectacular imports (state_store_clean's start-up, docs/benchmarks/gc.md).
