"""statestore-admin's own API, beyond Airflow's (``/api/statestore/v1``): statistics here; search in
``api.search``, the GC dry run in ``api.gc``, the audit trail in ``api.audit``."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import permissions as drf_permissions
from rest_framework.response import Response
from rest_framework.views import APIView

from statestore_admin import gc
from statestore_admin.access import permissions, policies
from statestore_admin.access.scopes import scope_of
from statestore_admin.api import shapes
from statestore_admin.api.airflow_v2 import ERRORS, StorePermission, iso
from statestore_admin.api.errors import ErrorBody, RequestInvalid, error
from statestore_admin.core.errors import Invalid
from statestore_admin.state import selectors

# 429: too many failed tokens from the caller's address (throttling.py).
READ_ERRORS = {code: ERRORS[code] for code in (401, 403, 422)} | {429: ErrorBody}


def query_errors(exc: Invalid, params, names: dict[str, str] | None = None) -> RequestInvalid:
    """The domain's ``Invalid`` about query parameters as FastAPI reports them: an ``enum`` error lists the
    choices, anything else is a ``value_error``; ``loc`` names the parameter (``names``: field -> parameter)."""
    items = []
    for field, errors in exc.error_dict.items():
        name = (names or {}).get(field, field)
        value = params.get(name)
        for e in errors:
            if e.code == "enum":
                choices = ", ".join(e.params["choices"])
                items.append(error("enum", ["query", name], f"Input should be one of {choices}", value))
            else:
                items.append(error("value_error", ["query", name], f"Value error, {' '.join(e.messages)}", value))
    return RequestInvalid(*items)


class OwnView(APIView):
    permission_classes = [StorePermission]
    store = permissions.TASK


class ViewsAnyStore(drf_permissions.BasePermission):
    """GET by a user who may view task state, asset state or both."""

    def has_permission(self, request, view):
        return bool(policies.viewable_stores(request.user))


STATS_DESCRIPTION = """The overview's figures: totals, expiry and configuration, with the latest statistics
snapshot's exact figures and age.

Each figure comes with `<figure>_estimated` (true: not an exact current count) and `how[<figure>]`, how it was
obtained, so that the endpoint answers in a bounded time whatever the tables' size:
`exact` (below 100,000 rows, counted now), `estimated` (above: PostgreSQL's planner estimate,
`pg_class.reltuples` or the row estimate of the status's query, a planning-only `EXPLAIN`), `capped` (a count
stopped at 10,000: the figure is a lower bound, "more than") or `snapshot` (a scoped caller's figure on a
large table: the exact sum of their DAGs in the latest snapshot, as of `snapshot.taken_at`; not estimated).

`snapshot` is null until `manage.py state_store_stats` has run; otherwise `{taken_at, age_seconds, figures}`
with `figures` the snapshot's exact `task_keys`, `asset_keys`, `expired`, `expiring_24h` (within 24 h of
`taken_at`) and `never_expire`, as this caller may see them.

Open to users who may view either store; each store's figures only to those who may view it. Without view
on task state, `task_keys`, `expired`, `expiring_24h`, `never_expire` (their `_estimated` flags too) and
`gc_runs` (garbage collection deletes task state only) are `null`; without view on asset state, `asset_keys`
and `asset_keys_estimated` are `null`. A user with a scope counts only their DAGs and assets (the snapshot's
`asset_keys` is `null` for an asset scope: a snapshot does not split asset keys by asset), and gets no GC
runs (`null`).

`backend_modes` explains the configured backends: `[{mode, explanation, docs, details}]`, `mode` one of
`metastore`, `custom` (a `[state_store] backend` that keeps state outside the metastore; `details`: `backend`,
`importable` in the dashboard's environment, `import_error`, the `methods` of get/set/delete/clear and their
async twins it defines, and `methods_called`, always empty: the dashboard reads only the metastore tables) and
`worker` (`[workers] state_store_backend`; `details`: `backend`, `object_storage_backend`, `storage`
`{base, compression, threshold}` or null when no `[common.io] state_store_objectstorage_path` is configured,
and `read`, whether key pages and `?resolve=true` read objects)."""


class Stats(OwnView):
    permission_classes = [ViewsAnyStore]

    @extend_schema(
        operation_id="state_store_stats",
        tags=["statestore-admin"],
        description=STATS_DESCRIPTION,
        responses={200: shapes.Stats, 401: ERRORS[401], 403: ERRORS[403], 429: ErrorBody},
    )
    def get(self, request):
        """The overview's figures: totals, expiry, configuration; each store's only with view on it."""
        stores = policies.viewable_stores(request.user)
        overview = selectors.overview(timezone.now(), scope=scope_of(request.user), stores=tuple(stores))
        totals = overview.totals
        gc_runs = None
        if overview.gc_runs is not None:
            gc_runs = [gc.run_as_dict(r) for r in overview.gc_runs]
        figures = {
            "task_keys": totals.task,
            "asset_keys": totals.asset,
            "expired": overview.statuses[selectors.EXPIRED],
            "expiring_24h": overview.statuses[selectors.EXPIRING],
            "never_expire": overview.statuses[selectors.NEVER],
        }
        seen = overview.snapshot
        snapshot = None
        if seen is not None:
            snapshot = {
                "taken_at": iso(seen.taken_at),
                "age_seconds": round(seen.age_seconds(timezone.now()), 1),
                "figures": {
                    "task_keys": seen.task_keys,
                    "asset_keys": seen.asset_keys,
                    "expired": seen.expired,
                    "expiring_24h": seen.expiring,
                    "never_expire": seen.never,
                },
            }
        return Response(
            {
                **{
                    part: value
                    for name, figure in figures.items()
                    for part, value in ((name, figure.value), (f"{name}_estimated", figure.estimated))
                },
                "how": {name: figure.how for name, figure in figures.items() if figure.value is not None},
                "snapshot": snapshot,
                "config": [{"option": v.name, "value": v.raw, "source": v.source} for v in overview.config],
                "config_error": overview.config_error,
                "backend_modes": [
                    {"mode": m.mode, "explanation": m.text, "docs": m.docs or None, "details": m.details}
                    for m in overview.backend_modes
                ],
                "gc_runs": gc_runs,
            }
        )
