"""The Insights page's figures as JSON (``/api/statestore/v1/insights/...``): the statistics snapshots over
time, the latest one's expiry and size histograms and top lists, and the GC runs; ``stats.insights`` holds
the rules (who sees what), the same as the page's."""

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from statestore_admin import gc
from statestore_admin.access import permissions, policies
from statestore_admin.access.scopes import scope_of
from statestore_admin.api import shapes
from statestore_admin.api.airflow_v2 import ERRORS, iso
from statestore_admin.api.errors import ErrorBody
from statestore_admin.api.ours import READ_ERRORS, OwnView, ViewsAnyStore, query_errors
from statestore_admin.core.errors import Invalid
from statestore_admin.stats import insights

RULES = """Figures as of the latest statistics snapshot (`manage.py state_store_stats`); `snapshot` is null
until one has been taken. Open to users who may view either store; each store's figures only with view on it
(null or empty otherwise). A user with a scope gets their DAGs' sums and the snapshot's lists filtered to their
scope; figures of the whole store that cannot be split by DAG or asset (the expiry and size histograms, asset
totals for an asset scope) are null for them."""

DAYS = OpenApiParameter(
    "days", {"type": "integer", "enum": list(insights.DAYS), "default": insights.DEFAULT_DAYS}, description="Range"
)
ERRORS_ANY_STORE = {401: ERRORS[401], 403: ERRORS[403], 429: ErrorBody}


def snapshot_meta(figures: insights.Latest | None, now) -> dict | None:
    if figures is None:
        return None
    s = figures.snapshot
    return {
        "id": s.pk,
        "taken_at": iso(s.taken_at),
        "finished_at": iso(s.finished_at),
        "duration_seconds": s.duration_seconds,
        "age_seconds": round(figures.age_seconds(now), 3),
        "trigger": s.trigger,
    }


def latest_dict(figures: insights.Latest | None) -> dict | None:
    if figures is None:
        return None
    names = ("task_keys", "task_bytes", "expired", "expiring", "never", "live", "dags", "asset_keys", "asset_bytes")
    return {name: getattr(figures, name) for name in (*names, "assets")}


class InsightsView(OwnView):
    permission_classes = [ViewsAnyStore]

    def who(self, request):
        return scope_of(request.user), tuple(policies.viewable_stores(request.user))

    def days(self, request) -> int:
        try:
            return insights.parse_days(request.query_params.get("days"))
        except Invalid as exc:
            raise query_errors(exc, request.query_params) from None


class InsightsSeries(InsightsView):
    @extend_schema(
        operation_id="insights_series",
        tags=["statestore-admin"],
        description=RULES
        + """

`points`: one per snapshot in the range, oldest first (at most 120: the last snapshot of each period),
with `task_keys`, `task_bytes`, `asset_keys`, `asset_bytes` (null: hidden). `dags`: the top 5 DAGs of the
latest snapshot in the range (in the user's scope) by keys, with `keys` and `bytes` lists aligned with
`points` (0: no state then). `latest`: the latest snapshot's totals.""",
        parameters=[DAYS],
        responses={200: shapes.InsightsSeries, **ERRORS_ANY_STORE, 422: READ_ERRORS[422]},
    )
    def get(self, request):
        """Keys and bytes over time, per store and for the top DAGs."""
        now, days = timezone.now(), self.days(request)
        scope, stores = self.who(request)
        figures = insights.latest(scope=scope, stores=stores)
        series = insights.series(days, now, scope=scope, stores=stores)
        return Response(
            {
                "days": days,
                "since": iso(series.since),
                "snapshot": snapshot_meta(figures, now),
                "latest": latest_dict(figures),
                "points": [
                    {
                        "taken_at": iso(p.taken_at),
                        "task_keys": p.task_keys,
                        "task_bytes": p.task_bytes,
                        "asset_keys": p.asset_keys,
                        "asset_bytes": p.asset_bytes,
                    }
                    for p in series.points
                ],
                "dags": [{"dag_id": d.dag_id, "keys": d.keys, "bytes": d.bytes} for d in series.dags],
            }
        )


class InsightsExpiry(InsightsView):
    @extend_schema(
        operation_id="insights_expiry",
        tags=["statestore-admin"],
        description=RULES
        + """

`days`: task keys and bytes expiring on each of the next 30 days (UTC), what GC will delete then (null for
a DAG scope or without view on task state). `by_status`: the user's task keys `expired` (awaiting GC),
`expiring` (within 24 h), `later` and `never` (null without view on task state).""",
        responses={200: shapes.InsightsExpiry, **ERRORS_ANY_STORE},
    )
    def get(self, request):
        """What GC will delete in the next days: the latest snapshot's expiry histogram."""
        now = timezone.now()
        scope, stores = self.who(request)
        figures = insights.latest(scope=scope, stores=stores)
        expiry = insights.expiry(scope=scope, stores=stores, figures=figures)
        days = None
        if expiry is not None and expiry.days is not None:
            days = [{"day": d.day, "keys": d.keys, "bytes": d.bytes} for d in expiry.days]
        return Response(
            {
                "snapshot": snapshot_meta(figures, now),
                "days": days,
                "by_status": expiry.by_status if expiry is not None else None,
            }
        )


class InsightsSizes(InsightsView):
    @extend_schema(
        operation_id="insights_sizes",
        tags=["statestore-admin"],
        description=RULES
        + """

`buckets`: `{"store": "task"|"asset", "up_to": bytes (null: larger than the previous bucket), "keys": n}`,
of the stores whose whole figures the user may see.""",
        responses={200: shapes.InsightsSizes, **ERRORS_ANY_STORE},
    )
    def get(self, request):
        """The latest snapshot's value size distribution."""
        now = timezone.now()
        scope, stores = self.who(request)
        figures = insights.latest(scope=scope, stores=stores)
        buckets = insights.sizes(scope=scope, stores=stores, figures=figures)
        return Response(
            {
                "snapshot": snapshot_meta(figures, now),
                "buckets": [{"store": b.store, "up_to": b.up_to, "keys": b.keys} for b in buckets],
            }
        )


class InsightsTop(InsightsView):
    @extend_schema(
        operation_id="insights_top",
        tags=["statestore-admin"],
        description=RULES
        + """

The latest snapshot's largest consumers, each list 10 long at most: `dags_by_keys`, `dags_by_bytes`
(`dag_id`, `keys`, `bytes`) and `tasks_by_keys`, `tasks_by_bytes` (`dag_id`, `task_id`, `keys`, `bytes`)
with view on task state; `assets_by_keys`, `assets_by_bytes` (`asset_id`, `name`, `uri`, `keys`, `bytes`)
with view on asset state; `largest`: the largest values' keys and sizes (never a value) of the stores the
user may view. Tasks and assets are those of the user's scope among the snapshot's 50 largest.""",
        responses={200: shapes.InsightsTop, **ERRORS_ANY_STORE},
    )
    def get(self, request):
        """Top DAGs, tasks and assets by keys and by bytes, and the largest values."""
        now = timezone.now()
        scope, stores = self.who(request)
        figures = insights.latest(scope=scope, stores=stores)
        top = insights.top(scope=scope, stores=stores, figures=figures)
        names = ("dags_by_keys", "dags_by_bytes", "tasks_by_keys", "tasks_by_bytes", "assets_by_keys")
        lists = {name: getattr(top, name) if top else [] for name in (*names, "assets_by_bytes", "largest")}
        return Response({"snapshot": snapshot_meta(figures, now), **lists})


class InsightsGc(OwnView):
    @extend_schema(
        operation_id="insights_gc",
        tags=["statestore-admin"],
        description="""The real runs of `state_store_clean` started in the range, oldest first (at most 200, the
latest). Needs view on task state; GC runs span every DAG, so a user with a scope is refused (403).""",
        parameters=[DAYS],
        responses={200: shapes.InsightsGc, **ERRORS_ANY_STORE, 422: READ_ERRORS[422]},
    )
    def get(self, request):
        """GC history: rows deleted per run, duration, outcome."""
        scope = scope_of(request.user)
        if not policies.sees_store_wide(request.user):
            raise PermissionDenied("GC runs span every DAG and asset: a user with a scope may not see them.")
        try:
            days = insights.parse_days(request.query_params.get("days"))
        except Invalid as exc:
            raise query_errors(exc, request.query_params) from None
        runs = insights.gc_history(days, timezone.now(), scope=scope, stores=(permissions.TASK,)) or []
        return Response(
            {
                "days": days,
                "runs": [gc.run_as_dict(r) for r in runs],
            }
        )
