"""System checks of the dashboard's own settings (``manage.py check``, and at every start)."""

import importlib
import math
import re
import runpy
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.core import checks

from statestore_admin.core.checks import positive_whole_number

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
REDIS_CACHE = "statestore_admin.cache.RedisCache"
# What may hold the cache: the dashboard's backends, which store signed JSON, and the per-process ones, whose
# memory nobody else writes. Django's others unpickle what they read from a store that others may write (a
# table, a file, a memcached, a Redis): whoever writes there would run code as the dashboard.
SAFE_CACHES = (REDIS_CACHE, "statestore_admin.cache.DatabaseCache", *PER_PROCESS_CACHES)


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def server_workers() -> int:
    """The worker processes `make serve` starts: gunicorn.conf.py's own rule, read where it lives."""
    return runpy.run_path(str(settings.BASE_DIR / "gunicorn.conf.py"))["workers"]


def unsafe_caches() -> list[checks.Error]:
    """statestore.E012 for each cache whose backend would unpickle a shared store (also refused by wsgi.py:
    no worker starts with one)."""
    return [
        checks.Error(
            f"The cache {alias!r} ({config['BACKEND']}) stores pickles in a store others may write: whoever "
            "writes there would run code as the dashboard.",
            hint="Unset CACHE_URL (the dashboard's database), or set it to redis://... or rediss://...: the "
            'dashboard\'s own backends store signed JSON (docs/operations.md, "Several servers").',
            id="statestore.E012",
        )
        for alias, config in settings.CACHES.items()
        if config["BACKEND"] not in SAFE_CACHES
    ]


@checks.register("statestore")
def check_cache(app_configs=None, **kwargs):
    """The cache that the token throttle and the kept figures share (README, Production; settings.CACHES)."""
    refused = unsafe_caches()
    if refused:
        return refused
    if any(c["BACKEND"] == REDIS_CACHE for c in settings.CACHES.values()) and not _importable("redis"):
        return [
            checks.Error(
                "CACHE_URL names Redis, but the redis package is not installed: every cached figure and the "
                "token throttle would fail.",
                hint="Install the runtime requirements (`make install`, or pip install -r requirements.txt).",
                id="statestore.E011",
            )
        ]
    backend = settings.CACHES["default"]["BACKEND"]
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


def _port(url) -> str:
    try:
        return str(url.port or 6379)
    except ValueError:  # not a number: named as written (redis-py will refuse it), never a traceback here
        return url.netloc.rpartition(":")[2]


@checks.register("statestore", deploy=True)
def check_cache_password(app_configs=None, **kwargs):
    """statestore.W012 (``check --deploy``, outside DEBUG): a Redis cache reached without a password. TLS
    (rediss://) alone is no answer: it hides the traffic, yet anyone who reaches the server may still write."""
    if settings.DEBUG:
        return []
    found = []
    for config in settings.CACHES.values():
        if config["BACKEND"] != REDIS_CACHE or config.get("OPTIONS", {}).get("password"):
            continue
        locations = config["LOCATION"]
        for location in re.split("[;,]", locations) if isinstance(locations, str) else locations:
            url = urlsplit(location)
            if url.scheme in ("redis", "rediss") and not url.password and "password" not in parse_qs(url.query):
                found.append(f"{url.scheme}://{url.hostname}:{_port(url)}")
    if not found:
        return []
    return [
        checks.Warning(
            f"The cache's Redis ({', '.join(found)}) is reached without a password: anyone who can connect can "
            "empty it or fill it (what the dashboard reads there is signed, so it is never believed or run).",
            hint="Start Redis with --requirepass (or an ACL user) and put the password in CACHE_URL: "
            'redis://:PASSWORD@host:6379/0 (docs/operations.md, "Several servers").',
            id="statestore.W012",
        )
    ]


@checks.register("statestore")
def check_gc_page_settings(app_configs=None, **kwargs):
    """The GC page's warning thresholds (docs/gc.md, The GC page)."""
    errors = []
    hours = settings.GC_STALE_AFTER_HOURS
    if not isinstance(hours, int | float) or not math.isfinite(hours) or hours <= 0:
        errors.append(
            checks.Error(
                f"GC_STALE_AFTER_HOURS is {hours!r}: it must be a number of hours above 0.",
                hint="Set it to how long GC may go without a successful run, e.g. 26 for a daily schedule.",
                id="statestore.E007",
            )
        )
    return errors + positive_whole_number(
        "GC_BACKLOG_WARN_ROWS",
        "rows",
        hint="Set it to the number of expired rows that should not wait for GC, e.g. 100000.",
        id="statestore.E008",
    )
