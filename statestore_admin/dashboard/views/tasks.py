"""The task pages: the DAGs, a DAG's runs, a run's keys, a task instance's keys, and one task key with its
history. Each reads through ``state.selectors`` and renders a page, or only its panel for htmx; filters and
cursors live in the query string, so every view of a list can be shared as a link.
"""

from django.shortcuts import redirect, render
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from statestore_admin.access import permissions
from statestore_admin.access.scopes import scope_of
from statestore_admin.core.errors import Invalid, NotFound
from statestore_admin.dashboard.diffs import key_history
from statestore_admin.dashboard.http import params
from statestore_admin.dashboard.http.fragments import fragment
from statestore_admin.dashboard.http.pages import invalid_page, render_page, requires_view
from statestore_admin.dashboard.json_view import value_part
from statestore_admin.objects import sizes
from statestore_admin.objects import store as objects
from statestore_admin.state import selectors, services


@requires_view(permissions.TASK)
def dag_list(request):
    """``q``: the DAGs whose id contains it (any case), as the asset list's filter; ``prefix`` (links made before
    ``q``): those starting with it."""
    now = timezone.now()
    q, prefix = request.GET.get("q", "").strip(), request.GET.get("prefix", "")
    dags = selectors.dags_with_state(
        now, request.GET.get("cursor"), prefix=prefix, contains=q, scope=scope_of(request.user)
    )
    context = {"page": dags.page, "dags": dags, "q": q, "prefix": prefix, "now": now}
    return render_page(request, "dags/list.html", context, "dags/_panel.html")


@requires_view(permissions.TASK)
def dag_runs(request, dag_id):
    now = timezone.now()
    page = selectors.runs_with_state(dag_id, now, request.GET.get("cursor"), scope=scope_of(request.user))
    return render_page(request, "dags/runs.html", {"dag_id": dag_id, "page": page, "now": now}, "dags/_runs_panel.html")


@requires_view(permissions.TASK)
def run_detail(request, run_pk):
    """A run's keys, a table a task, with each task's capped count; ``q`` keeps keys starting with it (any case),
    ``sort`` orders them (``selectors.SORTS``). Both stay in every link of the page."""
    run = selectors.get_run(run_pk, scope=scope_of(request.user))
    regions = selectors.run_regions(run)  # Airflow 3.4's loops and expansions (none on 3.3)
    sort, prefix = _sort_and_filter(request)
    groups, page = selectors.run_state(run, request.GET.get("cursor"), regions=regions, sort=sort, prefix=prefix)
    tasks = selectors.run_tasks(run, prefix, listed_max=services.LISTED_MAX)
    for group in groups:
        group.count = tasks.counts.get(group.task_id)
    context = {
        "run": run,
        "groups": groups,
        "page": page,
        "tasks": tasks,
        "sort": sort,
        "q": prefix,
        "loops": regions.loops(shown=(row.coordinate for group in groups for row in group.keys)),
        "now": timezone.now(),
        **_refresh(run),
    }
    return render_page(request, "runs/detail.html", context, "runs/_panel.html")


@requires_view(permissions.TASK)
@fragment(gettext_lazy("Loop iterations"), frame="loop-iterations")
def run_iterations(request, run_pk):
    """A page of one loop's iterations, which a gap in a long loop's list on the run page opens in its place:
    ``loop`` (the loop's root region id), the indexes ``from`` … ``to`` (absent: to the loop's end). Without
    ``loop``, the run's loops as its page lists them. The run page's ``q``, ``sort`` and ``cursor`` ride along
    in the links, back to the run as it was."""
    try:
        loop = params.region_id(request.GET, "loop")
    except Invalid as exc:
        return invalid_page(request, exc)
    run = selectors.get_run(run_pk, scope=scope_of(request.user))
    context = {"run": run, "whole": not request.htmx}
    if loop is None:
        context["loops"] = selectors.run_regions(run).loops()
    else:
        first = params.integer(request.GET, "from", 0, low=0)
        last = params.integer(request.GET, "to", None)
        context["page"] = selectors.loop_iterations(run, loop, first, last)
    return TemplateResponse(request, "runs/_iterations.html", context)


def _sort_and_filter(request) -> tuple[str, str]:
    return selectors.key_sort(request.GET.get("sort")), request.GET.get("q", "").strip()[:512]


def _refresh(run) -> dict:
    """What the pages of ``run`` tell ``includes/_refresh.html``: poll while the run is live."""
    return {"auto_refresh": selectors.auto_refreshes(run), "refresh_seconds": selectors.AUTO_REFRESH_SECONDS}


@requires_view(permissions.TASK)
def task_instance(request, run_pk, task_id):
    """One map index of a task, or (a mapped task without ``map_index``, or ``map_index=all``) every one. On
    Airflow 3.4, ``region_id`` with ``map_index`` is one coordinate of a task in a loop or expansion; a
    malformed ``region_id`` is a 400 page."""
    try:
        region_id = params.region_id(request.GET)
    except Invalid as exc:
        return invalid_page(request, exc)
    run = selectors.get_run(run_pk, scope=scope_of(request.user))
    sort, prefix = _sort_and_filter(request)
    view = selectors.task_view(
        run,
        task_id,
        request.GET.get("map_index"),
        request.GET.get("cursor"),
        region_id=region_id,
        sort=sort,
        prefix=prefix,
    )
    context = {
        "run": run,
        "task_id": task_id,
        "view": view,
        "map_index": view.map_index,
        "ti": view.task_instance,
        "map_indexes": view.map_indexes,
        "page": view.page,
        "sort": sort,
        "q": prefix,
        "now": timezone.now(),
        "from_airflow": _from_airflow(request, view),
        **_refresh(run),
    }
    return render_page(request, "tasks/detail.html", context, "tasks/_panel.html")


def _from_airflow(request, view) -> dict | None:
    """Every coordinate of a task in Airflow 3.4's regions, reached from Airflow's ``/mapped/{n}`` page of one of
    them (``airflow_map_index``: Airflow's link names no region, views.from_airflow._task_instance): the index and the
    coordinates at it, which the page names. None on any other page."""
    raw = request.GET.get("airflow_map_index", "")
    if not (view.regional and view.every_map_index and raw.isdigit() and len(raw) <= 9):
        return None
    index = int(raw)
    return {"index": index, "at": [c for c in view.coordinates if c.index == index]}


@requires_view(permissions.TASK)
def task_instance_lookup(request):
    """A task instance named by (dag_id, run_id, task_id, map_index), e.g. an asset key's writer."""
    run = selectors.find_run(request.GET.get("dag_id", ""), request.GET.get("run_id", ""), scope=scope_of(request.user))
    task_id = request.GET.get("task_id", "")
    if not task_id or "/" in task_id:  # Airflow's task ids are never empty and never hold "/"
        raise NotFound(
            _("No task %(task_id)s in DAG run %(run_id)s.") % {"task_id": repr(task_id), "run_id": repr(run.run_id)}
        )
    try:
        region_id = params.region_id(request.GET)
    except Invalid as exc:
        return invalid_page(request, exc)
    url = reverse("task-instance", args=[run.pk, task_id])
    query = {"map_index": params.integer(request.GET, "map_index", -1)}
    if region_id is not None:  # an Airflow 3.4 writer in a region: that coordinate, not the public map index
        query["region_id"] = region_id
    return redirect(f"{url}?{urlencode(query)}")


@requires_view(permissions.TASK)
def task_key(request, key_id):
    """One task key. A worker-side reference is shown with the value behind it (``objects.resolve_task_row``:
    read only here, never on lists, and only with ``WORKER_BACKEND_READ``) or why that value is not shown."""
    try:
        key = selectors.get_task_key(key_id, scope=scope_of(request.user))
    except NotFound:
        # A key deleted and restored is a new row: an earlier link to it follows the key (302).
        successor = selectors.successor_task_key(key_id, scope=scope_of(request.user))
        if successor is None or successor.pk == key_id:
            raise
        return redirect("task-key", successor.pk)
    history = key_history(selectors.task_key_history(key))
    context = {
        "key": key,
        "coordinate": selectors.key_coordinate(key),
        "history": history,
        "now": timezone.now(),
        "resolved": objects.resolve_task_row(key),
        "value_src": reverse("task-key-value", args=[key.pk]),
    }
    context["size"] = sizes.stored_size(key.value)  # after the read, which records the object's size
    return render(request, "keys/task.html", context)


@requires_view(permissions.TASK)
def task_key_value(request, key_id):
    """A part of a task key's value for its page's tree (``json_view.value_part``); ``of=resolved``: of the
    value behind its worker-side reference."""
    key = selectors.get_task_key(key_id, scope=scope_of(request.user))
    return value_part(request, key.value, lambda: objects.resolve_task_row(key))


@requires_view(permissions.TASK)
@fragment(gettext_lazy("Actions"))
def task_key_actions(request, key_id):
    """A task key row's actions menu, which the key tables fetch when it is opened (keys/_row_menu.html: the buttons
    the user may use, each opening its confirmation). To a normal request, the key's page, which has every action."""
    key = selectors.get_task_key(key_id, scope=scope_of(request.user))
    if not request.htmx:
        return redirect("task-key", key.pk)
    return TemplateResponse(request, "keys/_row_menu.html", {"row": key})
