"""System checks of the domain's settings (``manage.py check``, and at every start)."""

import math

from django.conf import settings
from django.core import checks


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
    rows = settings.GC_BACKLOG_WARN_ROWS
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < 1:
        errors.append(
            checks.Error(
                f"GC_BACKLOG_WARN_ROWS is {rows!r}: it must be a whole number of rows, 1 or more.",
                hint="Set it to the number of expired rows that should not wait for GC, e.g. 100000.",
                id="statestore.E008",
            )
        )
    return errors
