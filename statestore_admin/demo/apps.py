from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The embedded demo's data and its ``demo_data`` and ``demo_setup`` commands."""

    name = "statestore_admin.demo"
    label = "demo"
    verbose_name = "Demo"
