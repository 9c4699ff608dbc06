from django.apps import AppConfig


class StateConfig(AppConfig):
    """The domain layer: selectors (reads) and services (writes) shared by every face."""

    name = "statestore_admin.state"
    label = "state"
