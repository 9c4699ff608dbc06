from django.apps import AppConfig, apps
from django.contrib.auth import get_user_model
from django.db.models.signals import post_migrate


class IdentityConfig(AppConfig):
    name = "statestore_admin.identity"
    label = "identity"

    def ready(self):
        from . import checks, sign_in  # noqa: F401  (registers the system checks; notes password sign-ins)
        from .roles import sync_roles_after_migrate
        from .usernames import validate_new_username

        # Every form and command that takes a user name through the model's field (the admin's user forms,
        # createsuperuser) refuses unsafe names and look-alikes of existing accounts.
        field = get_user_model()._meta.get_field(get_user_model().USERNAME_FIELD)
        if validate_new_username not in field.validators:
            field.validators.append(validate_new_username)

        # post_migrate is sent for apps with models only: the roles follow the dashboard's own tables.
        tables = apps.get_app_config("state")
        post_migrate.connect(sync_roles_after_migrate, sender=tables, dispatch_uid="statestore_sync_roles")
