from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The embedded demo's data, its ``demo_data``, ``demo_setup`` and ``remove_demo_accounts`` commands, and the
    check that keeps its accounts out of any other deployment (statestore.E050)."""

    name = "statestore_admin.demo"
    label = "demo"
    verbose_name = "Demo"

    def ready(self):
        from statestore_admin.demo import checks  # noqa: F401  (registers statestore.E050)
