"""System checks of the dashboard's own settings (``manage.py check``, and at every start)."""

import importlib
import runpy

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


# Django's backends that keep their entries in one process's memory (or none at all).
PER_PROCESS_CACHES = (
    "django.core.cache.backends.locmem.LocMemCache",
    "django.core.cache.backends.dummy.DummyCache",
)


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def server_workers() -> int:
    """The worker processes `make serve` starts: gunicorn.conf.py's own rule, read where it lives."""
    return runpy.run_path(str(settings.BASE_DIR / "gunicorn.conf.py"))["workers"]


@checks.register("statestore")
def check_cache(app_configs=None, **kwargs):
    """The cache that the token throttle and the kept figures share (README, Production; settings.CACHES)."""
    backend = settings.CACHES["default"]["BACKEND"]
    if backend == "statestore_admin.cache.RedisCache" and not _importable("redis"):
        return [
            checks.Error(
                "CACHE_URL names Redis, but the redis package is not installed: every cached figure and the "
                "token throttle would fail.",
                hint="Install the runtime requirements (`make install`, or pip install -r requirements.txt).",
                id="statestore.E011",
            )
        ]
    if backend not in PER_PROCESS_CACHES:
        return []
    workers = server_workers()  # gunicorn.conf.py run only for a per-process cache, not at every start
    if workers > 1:
        return [
            checks.Warning(
                f"The cache ({backend.rsplit('.', 1)[-1]}) is per process, and the server runs {workers} "
                f"workers: each counts failed tokens on its own (up to {workers} x TOKEN_FAILURE_LIMIT "
                "tries) and keeps figures of its own.",
                hint="Unset CACHE_URL (the dashboard's database, shared by every worker), or set it to "
                "redis://... for several servers.",
                id="statestore.W004",
            )
        ]
    return []
