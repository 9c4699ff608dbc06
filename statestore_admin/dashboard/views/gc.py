"""The GC page (``/gc/``): what garbage collection would delete now, the runs so far and whether GC keeps
up, how to schedule ``state_store_clean`` for this deployment, and, for Admins, a bounded run now.

GC spans every DAG: the page is for users with view on task state and no scope (``gc.access``). Every figure
and every deletion goes through ``gc``: the preview is ``gc.dry_run`` and a run is ``gc.run_gc``, the
very code of ``state_store_clean``, recorded (``GcRun``, with the user) and audited like the command's runs,
and followed by the same statistics snapshot (``gc.snapshot_after``).
A run from the page is bounded so that it ends within the request: a batch size, a number of batches and a
time limit (``gc.PAGE_MAX_*``). The confirmation fixes the cutoff it showed, so that the run deletes only
rows that had expired when the user confirmed; when an object storage is configured it offers to delete the
worker-side objects of the rows deleted too (``GcPlan.with_objects``, as ``state_store_clean --with-objects``).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass, replace

from django.conf import settings
from django.contrib import messages
from django.db import DatabaseError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_http_methods

from statestore_admin import gc
from statestore_admin.access import policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import scope_of
from statestore_admin.core import formatting
from statestore_admin.core.errors import Invalid
from statestore_admin.dashboard.http.fragments import fragment
from statestore_admin.dashboard.http.htmx import dialog, error_messages
from statestore_admin.dashboard.timezones import active_zone_name, as_wall_time, local_to_utc
from statestore_admin.records.models import GcRun
from statestore_admin.state import selectors

# A run from the page: the form's defaults (each within gc.PAGE_MAX_*).
DEFAULT_BATCH_SIZE = 1_000
DEFAULT_MAX_BATCHES = 100
DEFAULT_TIME_LIMIT = 10
LIMITS = {  # field: (message when out of range, default, maximum)
    "batch_size": (
        gettext_lazy("The batch size must be a whole number from 1 to %(maximum)s."),
        DEFAULT_BATCH_SIZE,
        gc.PAGE_MAX_BATCH_SIZE,
    ),
    "max_batches": (
        gettext_lazy("The batch limit must be a whole number from 1 to %(maximum)s."),
        DEFAULT_MAX_BATCHES,
        gc.PAGE_MAX_BATCHES,
    ),
    "time_limit": (
        gettext_lazy("The time limit must be a whole number from 1 to %(maximum)s."),
        DEFAULT_TIME_LIMIT,
        gc.PAGE_MAX_SECONDS,
    ),
}
PREVIEW_FIELDS = ("cutoff", "age", "unit", "before", "dag_id")
DAG_CHOICES = 500  # the DAG field's list of existing DAGs: one index probe each
# What a scheduled run does: bounded work per run (docs/gc.md, Scheduling).
SCHEDULE_OPTIONS = ("--batch-size", "10000", "--max-batches", "500", "--json")
# The environment variables the command reads, when this server has them (names only: values may be secret).
COMMAND_ENVIRONMENT = (
    "DJANGO_SETTINGS_MODULE",
    "DATABASE_URL",
    "SECRET_KEY",
    "AIRFLOW_DATABASE_URL",
    "AIRFLOW_HOME",
    "AIRFLOW_CONFIG",
    "STATESTORE_VAR_DIR",
    "STATESTORE_DEMO",
    "STATESTORE_METASTORE_BACKENDS",
    "AIRFLOW_DATABASE_GC_QUERY_TIMEOUT",
    "TIME_ZONE",
)


def _limit(params, name: str, errors: dict) -> int:
    refusal, default, maximum = LIMITS[name]
    text = (params.get(name) or "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not 1 <= value <= maximum:
        errors[name] = [refusal % {"maximum": f"{maximum:,}"}]
        return default
    return value


def _before(params) -> str:
    """The "Before" cutoff as ISO 8601 with its offset: the date-time input's wall time read in the zone the
    page was shown in (``tz``), as every date-time input of the pages."""
    text = (params.get("before") or "").strip()
    if not text or params.get("cutoff") != "date":
        return text  # page_cutoff refuses a date typed for another cutoff
    empty = _("Pick a date and time, or choose another cutoff.")
    return local_to_utc(text, params.get("tz") or "", "before", empty).isoformat()


def _plan(params, now, *, bounded: bool = False) -> gc.GcPlan:
    """The plan the query string or form asks for; ``bounded``: with the run's limits. ``Invalid`` names
    every field in error."""
    errors = {}
    cutoff = now
    try:
        cutoff = gc.page_cutoff(
            params.get("cutoff"), age=params.get("age"), unit=params.get("unit"), before=_before(params), now=now
        )
    except Invalid as exc:
        errors.update(exc.message_dict)
    dag_id = (params.get("dag_id") or "").strip()
    limits = {}
    if bounded:
        limits = {name: _limit(params, name, errors) for name in LIMITS}
        limits["with_objects"] = params.get("with_objects") == "1"
    if errors:
        raise Invalid(errors)
    return gc.GcPlan(cutoff=cutoff, dag_ids=(dag_id,) if dag_id else (), **limits)


def _values(params) -> dict[str, str]:
    """The form's fields as given, to show them again."""
    values = {name: params.get(name, "") for name in (*PREVIEW_FIELDS, *LIMITS)}
    values["cutoff"] = values["cutoff"] or "now"
    values["before"] = as_wall_time(values["before"])  # a link's ISO 8601 cutoff, in the reader's zone
    values["unit"] = values["unit"] or "days"
    for name, (_refusal, default, _maximum) in LIMITS.items():
        values[name] = values[name] or str(default)
    return values


@dataclass(frozen=True)
class Schedule:
    """The command as this deployment runs it, for the scheduling recipes."""

    directory: str
    python: str
    arguments: tuple[str, ...]
    environment: list[str]  # the names of the variables this server has set

    @property
    def command(self) -> str:
        return f"cd {shlex.quote(self.directory)} && {shlex.quote(self.python)} manage.py {' '.join(self.arguments)}"

    @property
    def exec_start(self) -> str:
        return f"{shlex.quote(self.python)} manage.py {' '.join(self.arguments)}"

    @property
    def command_literal(self) -> str:
        """``command`` as a Python string literal (the Airflow DAG's ``bash_command``)."""
        return repr(self.command)

    @property
    def container_command(self) -> str:
        return json.dumps([self.python, "manage.py", *self.arguments])


def schedule() -> Schedule:
    environment = [name for name in COMMAND_ENVIRONMENT if name in os.environ]
    environment += sorted(name for name in os.environ if name.startswith("AIRFLOW__"))
    return Schedule(str(settings.BASE_DIR), sys.executable, ("state_store_clean", *SCHEDULE_OPTIONS), environment)


def gc_page(request):
    """The preview (``?cutoff=now|age|date&age=&unit=hours|days&before=&dag_id=``), the health of GC, the runs
    (``?runs=`` a cursor) and the recipes. Bad input: the form with its messages (422), no preview."""
    policies.require_view_gc(request.user)
    now = timezone.now()
    scope = scope_of(request.user)
    errors = {}
    try:
        plan = _plan(request.GET, now)
    except Invalid as exc:
        plan, errors = None, exc.message_dict
    preview = gc.dry_run(plan, scope=scope) if plan else None
    whole_store_now = plan is not None and plan.cutoff == now and not plan.dag_ids
    context = {
        "preview": preview,
        "errors": errors,
        "values": _values(request.GET),
        "health": gc.health(now, scope=scope, backlog=preview if whole_store_now else None),
        "runs": gc.history(request.GET.get("runs"), scope=scope),
        "may_run": gc.access(request.user).run,
        "limits": {name: maximum for name, (*_rest, maximum) in LIMITS.items()},
        "schedule": schedule(),
        "now": now,
        "zone": active_zone_name(),
        "dag_choices": selectors.distinct_dags("", "", DAG_CHOICES),
    }
    return render(request, "gc/index.html", context, status=422 if errors else 200)


@require_http_methods(["GET", "POST"])
@fragment(gettext_lazy("Run GC now"))
def gc_run(request):
    """GET: the confirmation of a bounded run (what would go now, the limits; the cutoff fixed). POST: the run,
    through ``gc.run_gc``; then back to the page, whose history shows it."""
    policies.require_run_gc(request.user)
    now = timezone.now()
    params = request.POST if request.method == "POST" else request.GET
    try:
        plan = _plan(params, now, bounded=True)
    except Invalid as exc:
        return dialog(request, "gc/_run_confirm.html", {"errors": error_messages(exc)}, status=422)
    if request.method == "GET":
        preview = gc.dry_run(replace(plan, with_objects=False), scope=scope_of(request.user))  # rows only
        nothing = preview.backend.is_metastore and preview.rows == 0 and preview.rows_more_than is None
        context = {"plan": plan, "preview": preview, "offer_objects": gc.can_delete_objects(), "nothing": nothing}
        return dialog(request, "gc/_run_confirm.html", context)
    try:
        actor = Actor.from_request(request)
        result = gc.run_gc(plan, actor=actor)
    except (gc.GcNotMigrated, gc.GcMisconfigured) as exc:
        messages.error(request, str(exc))
    except DatabaseError as exc:
        messages.error(
            request,
            _("GC failed: %(error)s. Committed batches are kept; the run is recorded as failed.") % {"error": exc},
        )
    else:
        _report(request, result)
        taken = gc.snapshot_after(result, actor=actor)  # the figures Insights and the overview show follow the run
        if taken and taken.error:
            messages.warning(request, taken.describe())
    page = reverse("gc")
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = page
        return response
    return redirect(page)


def _partial(result: gc.GcResult) -> str:
    """Why a bounded run stopped, in the words of the form's fields (the domain's message names the command's
    options)."""
    plan = result.plan
    if plan.max_batches is not None and result.batches >= plan.max_batches:
        return _("It stopped at the batch limit (%(batches)s): expired keys remain; run GC again to go on.") % {
            "batches": _batches(plan.max_batches)
        }
    return _("It stopped at the time limit (%(seconds)s s): expired keys remain; run GC again to go on.") % {
        "seconds": f"{plan.time_limit:g}"
    }


def _batches(n: int) -> str:
    return ngettext("%(count)s batch", "%(count)s batches", n) % {"count": f"{n:,}"}


def _report(request, result: gc.GcResult) -> None:
    outcome = result.outcome
    if outcome in gc.WITHOUT_DELETING:
        level, text = messages.WARNING, result.message
    else:
        rows = ngettext("%(count)s expired task state row", "%(count)s expired task state rows", result.rows_deleted)
        text = _("GC run #%(run)s: deleted %(rows)s in %(batches)s, %(duration)s.") % {
            "run": result.record.pk,
            "rows": rows % {"count": f"{result.rows_deleted:,}"},
            "batches": _batches(result.batches),
            "duration": formatting.duration(result.duration),
        }
        if outcome == GcRun.Outcome.PARTIAL:
            text += " " + _partial(result)
        elif result.message:
            text += " " + result.message
        if result.object_deletes is not None:
            text += " " + result.object_deletes.summary()
        elif result.objects_left_behind:
            text += " " + _("Their worker-side objects were left behind, as Airflow's GC leaves them.")
        failed_objects = result.objects_failed > 0
        level = messages.SUCCESS if outcome == GcRun.Outcome.COMPLETED and not failed_objects else messages.WARNING
    messages.add_message(request, level, text)
