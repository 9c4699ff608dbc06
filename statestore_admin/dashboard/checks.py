"""System checks of the dashboard's own settings (``manage.py check``, and at every start)."""

from django.conf import settings
from django.core import checks

# The colours of the environment band (static/css/app.css, .env-<colour>): each readable in both themes.
ENVIRONMENT_COLORS = ("red", "orange", "yellow", "green", "blue", "grey")


@checks.register("statestore")
def check_environment(app_configs=None, **kwargs):
    """STATESTORE_ENVIRONMENT_COLOR is one of the band's colours (README, Configuration)."""
    color = settings.STATESTORE_ENVIRONMENT_COLOR
    if color in ENVIRONMENT_COLORS:
        return []
    return [
        checks.Error(
            f"STATESTORE_ENVIRONMENT_COLOR is {color!r}: it must be one of {', '.join(ENVIRONMENT_COLORS)}.",
            hint="Red for production is usual; the band shows STATESTORE_ENVIRONMENT on every page.",
            id="statestore.E020",
        )
    ]
