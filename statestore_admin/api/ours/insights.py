"""The Insights page's figures as JSON (``/api/statestore/v1/insights/...``): the statistics snapshots over
time, the latest one's expiry and size histograms and top lists, and the GC runs; ``stats.insights`` holds
the rules (who sees what), the same as the page's."""

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from statestore_admin.access import permissions, policies
from statestore_admin.access.scopes import scope_of
from statestore_admin.api.base import OwnView
from statestore_admin.api.parsing import parsed_query
from statestore_admin.api.permissions import ViewsAnyStore
from statestore_admin.api.serializers import insights as shapes
from statestore_admin.api.serializers.errors import ANY_STORE_ERRORS, READ_ERRORS
from statestore_admin.stats import insights

RULES = """Figures as of the latest statistics snapshot (`manage.py state_store_stats`); `snapshot` is null
until one has been taken. Open to users who may view either store; each store's figures only with view on it
(null or empty otherwise). A user with a scope gets their DAGs' sums and the snapshot's lists filtered to their
scope; figures of the whole store that cannot be split by DAG or asset (the expiry and size histograms, asset
totals for an asset scope) are null for them."""

DAYS = OpenApiParameter(
    "days", {"type": "integer", "enum": list(insights.DAYS), "default": insights.DEFAULT_DAYS}, description="Range"
)


# What each view returns, after RULES, in the OpenAPI document.
OUTPUTS = {
    "series": """\
`points`: one per snapshot in the range, oldest first (at most 120: the last snapshot of each period),
with `task_keys`, `task_bytes`, `asset_keys`, `asset_bytes` (null: hidden). `dags`: the top 5 DAGs of the
latest snapshot in the range (in the user's scope) by keys, with `keys` and `bytes` lists aligned with
`points` (0: no state then). `latest`: the latest snapshot's totals.""",
    "expiry": """\
`days`: task keys and bytes expiring on each of the next 30 days (UTC), what GC will delete then (null for
a DAG scope or without view on task state). `by_status`: the user's task keys `expired` (awaiting GC),
`expiring` (within 24 h), `later` and `never` (null without view on task state).""",
    "sizes": """\
`buckets`: `{"store": "task"|"asset", "up_to": bytes (null: larger than the previous bucket), "keys": n}`,
of the stores whose whole figures the user may see.""",
    "top": """\
The latest snapshot's largest consumers, each list 10 long at most: `dags_by_keys`, `dags_by_bytes`
(`dag_id`, `keys`, `bytes`) and `tasks_by_keys`, `tasks_by_bytes` (`dag_id`, `task_id`, `keys`, `bytes`)
with view on task state; `assets_by_keys`, `assets_by_bytes` (`asset_id`, `name`, `uri`, `keys`, `bytes`)
with view on asset state; `largest`: the largest values' keys and sizes (never a value) of the stores the
user may view. Tasks and assets are those of the user's scope among the snapshot's 50 largest.""",
}


def insights_schema(name: str, shape, ranged: bool = False):
    """An Insights view's schema: ``RULES``, then what it returns (``OUTPUTS``); ``ranged``: it takes the ``days``
    parameter (422 when invalid)."""
    responses = {200: shape, **ANY_STORE_ERRORS}
    if ranged:
        responses[422] = READ_ERRORS[422]
    return extend_schema(
        operation_id=f"insights_{name}",
        tags=["statestore-admin"],
        description=f"{RULES}\n\n{OUTPUTS[name]}",
        parameters=[DAYS] if ranged else None,
        responses=responses,
    )


def days(request) -> int:
    return parsed_query(request.query_params, lambda params: insights.parse_days(params.get("days")))


class InsightsView(OwnView):
    permission_classes = [ViewsAnyStore]

    def latest(self, request):
        """The time now, who asks (their scope and the stores they may view) and the latest snapshot's
        figures they may see."""
        scope, stores = scope_of(request.user), tuple(policies.viewable_stores(request.user))
        return timezone.now(), scope, stores, insights.latest(scope=scope, stores=stores)

    def answer(self, request, shape, read, body):
        """``shape`` of ``body(figures, reading)``: the latest snapshot's figures the user may see, and ``read``
        of them (one of ``insights``' readers of a snapshot) for the user's scope and stores."""
        now, scope, stores, figures = self.latest(request)
        reading = read(scope=scope, stores=stores, figures=figures)
        return Response(shape(body(figures, reading), context={"now": now}).data)


class InsightsSeries(InsightsView):
    @insights_schema("series", shapes.InsightsSeries, ranged=True)
    def get(self, request):
        """Keys and bytes over time, per store and for the top DAGs."""
        chosen = days(request)
        now, scope, stores, figures = self.latest(request)
        series = insights.series(chosen, now, scope=scope, stores=stores)
        body = {"days": chosen, "since": series.since, "snapshot": figures, "latest": figures}
        body |= {"points": series.points, "dags": series.dags}
        return Response(shapes.InsightsSeries(body, context={"now": now}).data)


def _expiry(figures, expiry) -> dict:
    empty = {"days": None, "by_status": None}
    return {"snapshot": figures, **(empty if expiry is None else {"days": expiry.days, "by_status": expiry.by_status})}


def _top(figures, top) -> dict:
    return {"snapshot": figures, **{name: getattr(top, name) if top else [] for name in shapes.InsightsTop.LISTS}}


class InsightsExpiry(InsightsView):
    @insights_schema("expiry", shapes.InsightsExpiry)
    def get(self, request):
        """What GC will delete in the next days: the latest snapshot's expiry histogram."""
        return self.answer(request, shapes.InsightsExpiry, insights.expiry, _expiry)


class InsightsSizes(InsightsView):
    @insights_schema("sizes", shapes.InsightsSizes)
    def get(self, request):
        """The latest snapshot's value size distribution."""
        return self.answer(request, shapes.InsightsSizes, insights.sizes, lambda f, b: {"snapshot": f, "buckets": b})


class InsightsTop(InsightsView):
    @insights_schema("top", shapes.InsightsTop)
    def get(self, request):
        """Top DAGs, tasks and assets by keys and by bytes, and the largest values."""
        return self.answer(request, shapes.InsightsTop, insights.top, _top)


class InsightsGc(OwnView):
    @extend_schema(
        operation_id="insights_gc",
        tags=["statestore-admin"],
        description="""The real runs of `state_store_clean` started in the range, oldest first (at most 200, the
latest). Needs view on task state; GC runs span every DAG, so a user with a scope is refused (403).""",
        parameters=[DAYS],
        responses={200: shapes.InsightsGc, **ANY_STORE_ERRORS, 422: READ_ERRORS[422]},
    )
    def get(self, request):
        """GC history: rows deleted per run, duration, outcome."""
        if not policies.sees_store_wide(request.user):
            raise PermissionDenied("GC runs span every DAG and asset: a user with a scope may not see them.")
        chosen = days(request)
        scope = scope_of(request.user)
        runs = insights.gc_history(chosen, timezone.now(), scope=scope, stores=(permissions.TASK,)) or []
        return Response(shapes.InsightsGc({"days": chosen, "runs": runs}).data)
