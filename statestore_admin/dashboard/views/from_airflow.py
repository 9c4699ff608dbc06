"""Deep links from Airflow's UI (the plugin of ``manage.py airflow_plugin``): ``/airflow/<destination>/``.

Airflow fills the plugin's ``href`` templates with the ids of the page it shows (docs/airflow-plugin.md) and
leaves a placeholder it has no value for as typed, e.g. ``{ASSET_ID}`` on a version without asset pages. Each
destination redirects to the dashboard's page of the same object, through the selectors the other pages use, so
scope and a missing object answer as they do there. An object without state lands on its page, empty. On managed
Airflow (its REST API, no database ids) each lands on the browsing page of the same object (``/browse/``).
"""

import re

from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _

from statestore_admin.access import permissions
from statestore_admin.access.scopes import scope_of
from statestore_admin.airflow import rest
from statestore_admin.core.errors import Invalid, NotFound
from statestore_admin.dashboard.http.pages import invalid_page, requires_view
from statestore_admin.state import selectors

# A value that is still one of Airflow's placeholders: Airflow had nothing to put there.
_UNFILLED = re.compile(r"^\{[A-Z_]+\}$")


def _ids(request, *names) -> dict:
    """The named query parameters; Invalid naming each one Airflow did not fill or did not send."""
    values, errors = {}, {}
    for name in names:
        value = request.GET.get(name, "")
        if not value:
            errors[name] = _("The link from Airflow has no %(name)s.") % {"name": name}
        elif _UNFILLED.match(value):
            errors[name] = _("Airflow did not fill %(value)s in the link: this page of Airflow has no %(name)s.") % {
                "value": value,
                "name": name,
            }
        values[name] = value
    if errors:
        raise Invalid(errors)
    return values


def _map_index(request) -> dict:
    """The task page's ``map_index`` query. Airflow fills ``{MAP_INDEX}`` on a mapped task instance's page only
    (``/mapped/{n}``); unfilled (or absent) there is no map index to name, and the task page's own rule picks
    (``selectors.task_view``): the unmapped task instance, or on Airflow 3.4 every coordinate of a task that sits
    in a loop, whose page in Airflow names no map index either."""
    raw = request.GET.get("map_index", "")
    if not raw or _UNFILLED.match(raw):
        return {}
    if not re.fullmatch(r"-1|\d{1,9}", raw):  # Airflow's map indexes: -1, or a position that fits its integer column
        message = _("map_index %(value)s is not a map index (-1 or a whole number from 0).") % {"value": repr(raw[:40])}
        raise Invalid({"map_index": message})
    return {"map_index": int(raw)}


def _to(url: str, query: dict) -> str:
    return f"{url}?{urlencode(query)}" if query else url


def from_airflow(request, destination):
    """One of Airflow's plugin destinations to the dashboard's page; ``embed=1`` stays on (the framed layout)."""
    view = _DESTINATIONS.get(destination)
    if view is None:
        known = ", ".join(_DESTINATIONS)
        message = _("Unknown Airflow page %(page)s: use one of %(known)s.") % {
            "page": repr(destination),
            "known": known,
        }
        return invalid_page(request, Invalid(message))
    try:
        url, query = view(request)
    except Invalid as exc:
        return invalid_page(request, exc)
    if request.GET.get("embed") == "1":
        query["embed"] = "1"
    return redirect(_to(url, query))


def _nav(request):
    return reverse("home"), {}


def _dag_id(request) -> str:
    dag_id = _ids(request, "dag_id")["dag_id"]
    if "/" in dag_id:  # Airflow's DAG ids never hold "/" (its KEY_REGEX), and no page could name one
        raise NotFound(_("No DAG %(dag_id)s.") % {"dag_id": repr(dag_id)})
    return dag_id


@requires_view(permissions.TASK)
def _dag(request):
    return reverse("browse-runs" if rest.api_mode() else "dag-runs", args=[_dag_id(request)]), {}


@requires_view(permissions.TASK)
def _dag_run(request):
    ids = _ids(request, "dag_id", "run_id")
    if rest.api_mode():
        return reverse("browse-run"), ids
    run = selectors.find_run(ids["dag_id"], ids["run_id"], scope=scope_of(request.user))
    return reverse("run-detail", args=[run.pk]), {}


@requires_view(permissions.TASK)
def _task(request):
    """A task across its runs: the Search page of its keys (which needs the database: on managed Airflow, the
    DAG's runs)."""
    ids = _ids(request, "dag_id", "task_id")
    if rest.api_mode():
        return reverse("browse-runs", args=[_dag_id(request)]), {}
    return reverse("search"), {
        "store": "task",
        "dag_id": ids["dag_id"],
        "dag_match": "exact",
        "task_id": ids["task_id"],
    }


@requires_view(permissions.TASK)
def _task_instance(request):
    """A task instance's page at the map index Airflow's page shows. On Airflow 3.4 that index is the public
    one and Airflow's templates carry no region (docs/airflow-plugin.md): a mapped task inside a loop has its
    ``/mapped/{n}`` page in Airflow, but no task instance and no key at public index ``n``. Its link lands on
    every iteration and map position of the task, the page naming those at index ``n`` (``airflow_map_index``),
    rather than on an empty page."""
    ids = _ids(request, "dag_id", "run_id", "task_id")
    map_index = _map_index(request)
    if rest.api_mode():  # the browsing page asks Airflow, which resolves the index as its own pages do
        return reverse("browse-task"), {**ids, **map_index}
    run = selectors.find_run(ids["dag_id"], ids["run_id"], scope=scope_of(request.user))
    task_id = ids["task_id"]
    if "/" in task_id:  # Airflow's task ids never hold "/", as task_instance_lookup says
        raise NotFound(
            _("No task %(task_id)s in DAG run %(run_id)s.") % {"task_id": repr(task_id), "run_id": repr(run.run_id)}
        )
    if map_index:
        view = selectors.task_view(run, task_id, str(map_index["map_index"]), size=1)
        if view.regional and view.task_instance is None and not view.has_keys:
            map_index = {"map_index": selectors.ALL_MAP_INDEXES, "airflow_map_index": map_index["map_index"]}
    return reverse("task-instance", args=[run.pk, task_id]), map_index


@requires_view(permissions.ASSET)
def _asset(request):
    raw = _ids(request, "asset_id")["asset_id"]
    if not raw.isdigit() or len(raw) > 18:  # a bigint
        message = _("asset_id %(value)s is not an asset id (a whole number).") % {"value": repr(raw[:40])}
        raise Invalid({"asset_id": message})
    if rest.api_mode():
        return reverse("browse-asset", args=[int(raw)]), {}
    asset = selectors.get_asset(int(raw), scope=scope_of(request.user))
    return reverse("asset-detail", args=[asset.pk]), {}


_DESTINATIONS = {
    "nav": _nav,
    "dag": _dag,
    "dag_run": _dag_run,
    "task": _task,
    "task_instance": _task_instance,
    "asset": _asset,
}
