"""The GC page's policy: who may see it and run GC from it (``access``), its cutoff (now, an age or a
date), the recorded runs (``history``) and whether GC keeps up (``health``). A run from the page is bounded
so that it ends within one request (``PAGE_MAX_*``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from statestore_admin.access import policies
from statestore_admin.access.scopes import Scope
from statestore_admin.core.errors import Invalid
from statestore_admin.core.pagination import Page, paginate
from statestore_admin.gc.plan import GcPlan, parse_cutoff
from statestore_admin.gc.preview import DryRunSummary, dry_run
from statestore_admin.gc.result import SUCCESSFUL
from statestore_admin.records.models import GcRun

# A run from the page must end within one request: at most this many rows a batch, batches and seconds.
PAGE_MAX_BATCH_SIZE = 10_000
PAGE_MAX_BATCHES = 1_000
PAGE_MAX_SECONDS = 20
HISTORY_PAGE_SIZE = 25
CUTOFF_KINDS = {"now": gettext_lazy("now"), "age": gettext_lazy("an age"), "date": gettext_lazy("a date")}
AGE_UNITS = {"hours": timedelta(hours=1), "days": timedelta(days=1)}


@dataclass(frozen=True)
class GcAccess:
    """What ``user`` may do on the GC page: see it (the preview, the history, the recipes), run GC now."""

    view: bool
    run: bool


def access(user) -> GcAccess:
    """Asks the GC policies (``access.policies``: store-wide view of task state; running also needs delete on it
    and "Can add GC run")."""
    return GcAccess(policies.may_view_gc(user), policies.may_run_gc(user))


def page_cutoff(kind: str | None, *, age: str | None, unit: str | None, before: str | None, now: datetime) -> datetime:
    """The GC page's cutoff: ``now`` (every key past its own expiry), an ``age`` (keys that expired more than
    ``age`` hours or days ago) or a ``date`` (``parse_cutoff``'s rules: ISO 8601 with a time zone, not in the
    future). A field of another kind filled in is refused, not ignored: counting for a cutoff other than the
    one typed would answer another question. ``Invalid`` on field cutoff, age or before."""
    kind = kind or "now"
    if kind not in CUTOFF_KINDS:
        raise Invalid({"cutoff": _("Unknown cutoff %(kind)r: choose now, an age or a date.") % {"kind": kind}})
    typed = tuple(name for name, text in (("age", age), ("date", before)) if name != kind and text)
    if typed:
        raise Invalid({"cutoff": _mixed_cutoff(kind, typed)})
    if kind == "now":
        return now
    if kind == "date":
        if not before:
            raise Invalid({"before": _("Pick a date and time, or choose another cutoff.")})
        return parse_cutoff(before, now)
    try:
        amount = float(age or "")
    except ValueError:
        amount = None
    if amount is None or not math.isfinite(amount) or amount <= 0:
        raise Invalid({"age": _("The age must be a number above 0.")})
    if unit not in AGE_UNITS:
        raise Invalid({"age": _("The age is in hours or days.")})
    try:
        return now - AGE_UNITS[unit] * amount
    except OverflowError:
        raise Invalid({"age": _("This age reaches before the year 1.")}) from None


def _mixed_cutoff(kind: str, typed: tuple[str, ...]) -> str:
    """The cutoff chosen is one kind, but the field of another (``typed``) is filled in."""
    if kind == "age":
        return _(
            "The cutoff chosen is an age but a date is filled in: choose the option you typed into, or clear the "
            "other field."
        )
    if kind == "date":
        return _(
            "The cutoff chosen is a date but an age is filled in: choose the option you typed into, or clear the "
            "other field."
        )
    if typed == ("age",):
        return _(
            "The cutoff chosen is now but an age is filled in: choose the option you typed into, or clear the "
            "other field."
        )
    if typed == ("date",):
        return _(
            "The cutoff chosen is now but a date is filled in: choose the option you typed into, or clear the "
            "other field."
        )
    return _(
        "The cutoff chosen is now but an age and a date are filled in: choose the option you typed into, or clear "
        "the other field."
    )


def history(cursor: str | None, *, scope: Scope, size: int = HISTORY_PAGE_SIZE) -> Page:
    """The recorded runs, newest first, a page after ``cursor``. Unscoped users only (GC spans every DAG)."""
    scope.require_unrestricted(_("Garbage collection"))
    return paginate(GcRun.objects.all(), ["-started_at", "-id"], cursor, size)


@dataclass(frozen=True)
class GcHealth:
    """Is GC keeping up? ``stale``: no successful run, or the last one finished more than
    ``GC_STALE_AFTER_HOURS`` ago; ``backlog_large``: at least ``GC_BACKLOG_WARN_ROWS`` rows have expired (the
    dry run's figure, estimated past its exact cap). Neither applies with a backend GC does not clean."""

    last_success: GcRun | None
    since_seconds: float | None
    stale_after_hours: float
    backlog: DryRunSummary
    backlog_warn_rows: int

    @property
    def backlog_rows_at_least(self) -> int:
        """The expired rows now: exact, the planner's estimate, or past the cap with no estimate the cap + 1."""
        if self.backlog.rows is not None:
            return self.backlog.rows
        return (self.backlog.rows_more_than or 0) + 1

    @property
    def stale(self) -> bool:
        if not self.backlog.backend.is_metastore:
            return False
        return self.since_seconds is None or self.since_seconds > self.stale_after_hours * 3600

    @property
    def backlog_large(self) -> bool:
        return self.backlog.backend.is_metastore and self.backlog_rows_at_least >= self.backlog_warn_rows


def health(now: datetime, *, scope: Scope, backlog: DryRunSummary | None = None) -> GcHealth:
    """``backlog``: a dry run at ``now`` over every DAG, when the caller has one already."""
    backlog = backlog or dry_run(GcPlan(cutoff=now), scope=scope)
    last = GcRun.objects.filter(outcome__in=SUCCESSFUL).order_by("-started_at", "-id").first()
    since = max((now - (last.finished_at or last.started_at)).total_seconds(), 0.0) if last else None
    return GcHealth(last, since, settings.GC_STALE_AFTER_HOURS, backlog, settings.GC_BACKLOG_WARN_ROWS)
