"""The overview's figures (``/api/statestore/v1/stats``): totals, expiry and configuration."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from statestore_admin.access import policies
from statestore_admin.access.scopes import scope_of
from statestore_admin.api.base import OwnView
from statestore_admin.api.permissions import ViewsAnyStore
from statestore_admin.api.serializers import stats as shapes
from statestore_admin.api.serializers.errors import ANY_STORE_ERRORS
from statestore_admin.state import selectors

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
        responses={200: shapes.Stats, **ANY_STORE_ERRORS},
    )
    def get(self, request):
        """The overview's figures: totals, expiry, configuration; each store's only with view on it."""
        now = timezone.now()
        stores = tuple(policies.viewable_stores(request.user))
        overview = selectors.overview(now, scope=scope_of(request.user), stores=stores)
        return Response(shapes.Stats(overview, context={"now": now}).data)
