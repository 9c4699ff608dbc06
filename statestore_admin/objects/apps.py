from django.apps import AppConfig


class ObjectsConfig(AppConfig):
    name = "statestore_admin.objects"
    label = "statestore_objects"

    def ready(self):
        from . import checks  # noqa: F401  (registers the system checks)
