from django.apps import AppConfig
from django.contrib.auth import get_user_model
from django.db.models.signals import post_migrate


class StateConfig(AppConfig):
    """The domain layer: selectors (reads) and services (writes) shared by every face."""

    name = "statestore_admin.state"
    label = "state"

    def ready(self):
        from . import checks, sign_in  # noqa: F401  (registers the system checks; notes password sign-ins)
        from .roles import sync_roles_after_migrate
        from .usernames import validate_new_username

        # Every form and command that takes a user name through the model's field (the admin's user forms,
        # createsuperuser) refuses unsafe names and look-alikes of existing accounts.
        field = get_user_model()._meta.get_field(get_user_model().USERNAME_FIELD)
        if validate_new_username not in field.validators:
            field.validators.append(validate_new_username)

        post_migrate.connect(sync_roles_after_migrate, sender=self, dispatch_uid="statestore_sync_roles")
