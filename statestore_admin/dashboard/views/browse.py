"""The pages that browse Airflow by its own names (a DAG's id, a run's id, a task id, an asset's id) rather than by
rows of its database: DAGs, a DAG's runs, a run's task instances with their keys, one task instance's keys and an
asset's keys. They read through ``state.sources.current()``, so they serve the same pages from Airflow's metadata
database and, on managed Airflow where the dashboard has none, from Airflow's REST API; the database pages
(``views.tasks``, ``views.assets``) add what only the database can say (key counts across runs, sizes, history,
search). Each list is a page of offsets in the query string, so a view of it can be shared as a link.
"""

from functools import partial, wraps

from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from statestore_admin.access import permissions
from statestore_admin.access.scopes import scope_of
from statestore_admin.airflow import rest
from statestore_admin.core.errors import Invalid
from statestore_admin.dashboard.diffs import short_diff
from statestore_admin.dashboard.http import params
from statestore_admin.dashboard.http.addresses import address_of, address_query
from statestore_admin.dashboard.http.downloads import bad_request, export_download
from statestore_admin.dashboard.http.pages import invalid_page, requires_view
from statestore_admin.dashboard.views import exports as exports_view
from statestore_admin.dashboard.views.story import MAX_DIFF_LINES
from statestore_admin.exports import documents
from statestore_admin.state import across_runs, sources
from statestore_admin.state.listing import Listing, page_of

PAGE_SIZE = 50
INSTANCES_PAGE = 25  # a run page reads the keys of each task instance it shows: one request each over the API
KEYS_SHOWN = 10  # keys of each task instance on a run page (its own page lists them all)


def _offset(request) -> int:
    return params.integer(request.GET, "offset", 0, low=0)


@requires_view(permissions.TASK)
def dags(request):
    """``q``: the DAGs whose id contains it (any case)."""
    q = request.GET.get("q", "").strip()[:250]
    listing = sources.current().dags(q, _offset(request), PAGE_SIZE, scope=scope_of(request.user))
    return render(request, "browse/dags.html", {"listing": listing, "q": q, "base": urlencode({"q": q}) if q else ""})


@requires_view(permissions.TASK)
def runs(request, dag_id):
    listing = sources.current().dag_runs(dag_id, _offset(request), PAGE_SIZE, scope=scope_of(request.user))
    return render(request, "browse/runs.html", {"dag_id": dag_id, "listing": listing})


@requires_view(permissions.TASK)
def run(request):
    """A run's task instances, each with its first keys and how many it has."""
    source, scope = sources.current(), scope_of(request.user)
    dag_id, run_id = request.GET.get("dag_id", ""), request.GET.get("run_id", "")
    found = source.dag_run(dag_id, run_id, scope=scope)
    listing = page_of(source.run_instances(dag_id, run_id, scope=scope), _offset(request), INSTANCES_PAGE)
    rows = []
    for instance in listing.items:
        keys, total = source.task_keys_page(instance.address, 0, KEYS_SHOWN, scope=scope)
        rows.append({"instance": instance, "keys": keys, "total": total, "query": address_query(instance.address)})
    base = urlencode({"dag_id": dag_id, "run_id": run_id})
    context = {"run": found, "listing": listing, "rows": rows, "base": base}
    return render(request, "browse/run.html", context)


@requires_view(permissions.TASK)
def task(request):
    """One task instance's keys, with the actions on them."""
    try:
        address = address_of(request)
    except Invalid as exc:
        return invalid_page(request, exc)
    source, scope = sources.current(), scope_of(request.user)
    found = source.dag_run(address.dag_id, address.run_id, scope=scope)
    source.find_task_instance(address, scope=scope)
    offset = _offset(request)
    keys, total = source.task_keys_page(address, offset, PAGE_SIZE, scope=scope)
    context = {
        "run": found,
        "address": address,
        "query": address_query(address),
        "base": address_query(address),
        "listing": Listing(keys, total, offset, PAGE_SIZE),
        "now": timezone.now(),
    }
    return render(request, "browse/task.html", context)


@requires_view(permissions.ASSET)
def assets(request):
    """``q``: the assets whose name contains it (any case)."""
    q = request.GET.get("q", "").strip()[:1500]
    listing = sources.current().assets(q, _offset(request), PAGE_SIZE, scope=scope_of(request.user))
    return render(request, "browse/assets.html", {"listing": listing, "q": q, "base": urlencode({"q": q}) if q else ""})


@requires_view(permissions.ASSET)
def asset(request, asset_id):
    source, scope = sources.current(), scope_of(request.user)
    found = source.asset(asset_id, scope=scope)
    offset = _offset(request)
    keys, total = source.asset_keys_page(asset_id, offset, PAGE_SIZE, scope=scope)
    listing = Listing(keys, total, offset, PAGE_SIZE)
    return render(request, "browse/asset.html", {"asset": found, "listing": listing, "now": timezone.now()})


def over_api(name: str, *arguments: str):
    """A database page that, on managed Airflow (no database), sends its reader to the browsing page ``name``
    (with the view's ``arguments``, by name, and the query string: ``q``, and a comparison's ``a`` and ``b``,
    mean the same there) instead of answering that it needs the database."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if rest.api_mode():
                url = reverse(name, args=[kwargs[a] for a in arguments])
                query = request.META.get("QUERY_STRING", "")
                return redirect(f"{url}?{query}" if query else url)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


@requires_view(permissions.TASK)
@exports_view.in_format
def task_export(request, *, chosen):
    """A task instance's keys as its page lists them, as JSON (a restore document) or CSV."""
    try:
        address = address_of(request)
    except Invalid as exc:
        return bad_request(exc)
    source, scope = sources.current(), scope_of(request.user)
    source.dag_run(address.dag_id, address.run_id, scope=scope)
    source.find_task_instance(address, scope=scope)
    region = [str(address.region_id)] if address.in_region else []
    name = "-".join([address.dag_id, address.run_id, address.task_id, *region, str(address.map_index), "keys"])
    read = partial(source.task_keys_page, address, scope=scope)
    return export_download(documents.paged_task_keys(name, read), chosen)


@requires_view(permissions.TASK)
@exports_view.in_format
def run_export(request, *, chosen):
    """A run's keys, a task instance after the other in the run page's order, as JSON or CSV."""
    source, scope = sources.current(), scope_of(request.user)
    dag_id, run_id = request.GET.get("dag_id", ""), request.GET.get("run_id", "")
    instances = source.run_instances(dag_id, run_id, scope=scope)
    reads = [partial(source.task_keys_page, instance.address, scope=scope) for instance in instances]
    return export_download(documents.paged_task_keys(f"{dag_id}-{run_id}-keys", *reads), chosen)


@requires_view(permissions.ASSET)
@exports_view.in_format
def asset_export(request, asset_id, *, chosen):
    source, scope = sources.current(), scope_of(request.user)
    found = source.asset(asset_id, scope=scope)
    read = partial(source.asset_keys_page, asset_id, scope=scope)
    return export_download(documents.paged_asset_keys(f"asset-{asset_id}-keys", found, read), chosen)


@requires_view(permissions.TASK)
def story(request):
    """A task key (``key``) of a task instance in each run of its DAG, newest run first (``offset``)."""
    try:
        address = address_of(request)
    except Invalid as exc:
        return invalid_page(request, exc)
    key = request.GET.get("key", "")
    source, scope = sources.current(), scope_of(request.user)
    entries, runs = across_runs.key_across_runs(source, address, key, _offset(request), scope=scope)
    for newer, older in zip(entries, entries[1:] + [None], strict=True):
        changed = older is not None and newer.row is not None and older.row is not None
        newer.diff = short_diff(older.row.value, newer.row.value, MAX_DIFF_LINES) if changed else None
    context = {"address": address, "key": key, "entries": entries, "listing": runs, "now": timezone.now()}
    context["base"], context["query"] = address_query(address, key=key), address_query(address)
    return render(request, "browse/story.html", context)


@requires_view(permissions.TASK)
def compare(request, dag_id):
    """Runs ``a`` and ``b`` (run ids) of ``dag_id`` key by key."""
    try:
        a, b, result = across_runs.compare_runs(
            sources.current(), dag_id, request.GET.get("a", ""), request.GET.get("b", ""), scope=scope_of(request.user)
        )
    except Invalid as exc:
        return invalid_page(request, exc)
    for entry in result.changed:
        entry.diff = short_diff(entry.a.value, entry.b.value, MAX_DIFF_LINES)
    return render(request, "browse/compare.html", {"dag_id": dag_id, "a": a, "b": b, "cmp": result})
