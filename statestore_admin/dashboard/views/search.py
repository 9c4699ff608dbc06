"""The Search page: keys of both stores found by key, value, DAG, run, task, status or asset."""

from functools import partial

from django.contrib import messages
from django.http import HttpResponseBadRequest
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from statestore_admin.access import permissions, policies
from statestore_admin.access.scopes import scope_of
from statestore_admin.core.errors import Invalid
from statestore_admin.dashboard.http import params as query_params
from statestore_admin.dashboard.http.htmx import error_messages
from statestore_admin.dashboard.http.pages import render_page
from statestore_admin.state import search as searching
from statestore_admin.state import selectors


def search(request):
    """Across both stores; each store's results appear only to users who may view that store."""

    now = timezone.now()
    params = request.GET
    try:
        query = searching.SearchQuery.from_params(params)
        invalid = ""
    except Invalid as exc:  # a hand-made link: say what is wrong rather than search with other filters
        invalid = " ".join(error_messages(exc))
        if request.htmx:
            return HttpResponseBadRequest(invalid, content_type="text/plain; charset=utf-8")
        messages.error(request, invalid)
        valid = params.copy()  # the form keeps the other filters; nothing is searched
        for name in exc.message_dict:
            valid.pop(name, None)
        query = searching.SearchQuery.from_params(valid)
    store = query_params.choice(params, "store", (permissions.TASK, permissions.ASSET), "all")
    searched = not invalid and any(
        [query.key, query.value, query.dag_id, query.run_id, query.task_id, query.status, query.asset]
        + [query.iteration is not None]
    )
    pages = {}
    deadline = searching.search_deadline()  # one time budget for both stores, the task keys' search first
    for name, search_keys in (
        (permissions.TASK, partial(searching.search_task_keys, query, now)),
        (permissions.ASSET, partial(searching.search_asset_keys, query)),
    ):
        if searched and store in ("all", name) and policies.allows(request.user, name, "view"):
            pages[name] = search_keys(
                params.get(f"{name}_cursor"),
                scope=scope_of(request.user),
                deadline=deadline,
                before=params.get(f"{name}_before"),
                count=True,
            )
    task_page, asset_page = pages.get(permissions.TASK), pages.get(permissions.ASSET)
    response = render_page(
        request,
        "search/index.html",
        {
            "query": query,
            "store": store,
            "searched": searched,
            "task_page": task_page,
            "asset_page": asset_page,
            "task_links": _links(params, permissions.TASK, task_page),
            "asset_links": _links(params, permissions.ASSET, asset_page),
            "statuses": searching.STATUSES,
            "matches": [
                ("contains", pgettext("key match", "contains")),
                ("prefix", _("starts with")),
                ("exact", _("exact")),
            ],
            "dag_matches": [
                ("contains", _("contains (as on the DAG list)")),
                ("prefix", _("starts with")),
                ("exact", _("exact")),
            ],
            "budget": searching.time_budget(),
            "regions": selectors.regions_enabled(),  # Airflow 3.4: the loop iteration filter
            "now": now,
        },
        "search/_panel.html",
    )
    if invalid:
        response.status_code = 400
    return response


def _links(params, store: str, page) -> dict:
    """The first, previous and next pages of one store's results: the query string with that store's cursor
    (``<store>_cursor`` after a page, ``<store>_before`` before one), every filter and the other store's page
    kept, so that each link can be shared."""
    if page is None:
        return {}

    def link(name: str = "", cursor: str | None = None) -> str:
        linked = params.copy()
        for param in (f"{store}_cursor", f"{store}_before"):
            linked.pop(param, None)
        if name:
            linked[f"{store}_{name}"] = cursor
        return f"?{linked.urlencode()}"

    return {
        "first": link() if page.cursor else None,
        "prev": link("before", page.prev_cursor) if page.prev_cursor else None,
        "next": link("cursor", page.next_cursor) if page.next_cursor else None,
    }
