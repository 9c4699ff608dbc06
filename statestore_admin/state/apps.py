from django.apps import AppConfig
from django.db.models.signals import post_migrate


class StateConfig(AppConfig):
    """The domain layer: selectors (reads) and services (writes) shared by every face."""

    name = "statestore_admin.state"
    label = "state"

    def ready(self):
        from . import checks, sign_in  # noqa: F401  (registers the system checks; notes password sign-ins)
        from .roles import sync_roles_after_migrate

        post_migrate.connect(sync_roles_after_migrate, sender=self, dispatch_uid="statestore_sync_roles")
