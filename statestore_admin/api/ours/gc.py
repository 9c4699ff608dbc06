"""What garbage collection would delete (``/api/statestore/v1/gc/dry-run``)."""

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from statestore_admin import gc
from statestore_admin.access.scopes import scope_of
from statestore_admin.api.base import OwnView, integer
from statestore_admin.api.parsing import MAX_INT, parsed_query, query_int
from statestore_admin.api.serializers import gc as shapes
from statestore_admin.api.serializers.errors import READ_ERRORS


class GcDryRun(OwnView):
    @extend_schema(
        operation_id="gc_dry_run",
        tags=["statestore-admin"],
        responses={200: shapes.GcDryRun, **READ_ERRORS},
        parameters=[
            OpenApiParameter(
                "before",
                {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "string", "enum": [""]}]},
                description="Timezone-aware cutoff in the past (empty or absent: now)",
            ),
            OpenApiParameter(
                "dag_id", {"type": "string", "minLength": 1}, description="Only this DAG; repeat for several DAGs."
            ),
            OpenApiParameter("top", integer(1, MAX_INT, 10), description="Larger values give 100"),
        ],
    )
    def get(self, request):
        """What `state_store_clean` would delete now: the same summary as its --dry-run --json.

        Answers in about the same time whatever the table size. Up to 10,000 expired rows every figure is
        exact (`rows_more_than` null, `by_dag_source` "exact"). Past that, when the table's statistics are
        stale PostgreSQL first counts them exactly within `COUNT_BUDGET_SECONDS` (then `rows` is exact and
        `rows_more_than` null); otherwise the count stops at the cap: `rows_more_than` is the cap, and
        `rows` is the planner's estimate (`rows_estimated` true; null where there is none); `by_dag` and
        `dags` come from the latest statistics snapshot (`by_dag_source` "snapshot": its expired rows by
        DAG as of `snapshot_taken_at`, `snapshot_age_seconds` old) or are unknown (`by_dag_source` null:
        `by_dag` empty, `dags` null). `oldest_expiry`, `newest_expiry` and `sample` (the oldest expired
        rows) are always exact. With a backend other than the metastore's (`backend_is_metastore` false)
        nothing would be deleted and nothing is counted.
        """

        def plan(params) -> gc.GcPlan:
            cutoff = gc.parse_cutoff(params.get("before"), timezone.now())
            return gc.GcPlan(cutoff=cutoff, dag_ids=tuple(params.getlist("dag_id")))

        chosen = parsed_query(request.query_params, plan, {"dag_ids": "dag_id", "cutoff": "before"})
        summary = gc.dry_run(chosen, top=min(query_int(request, "top", 10, 1), 100), scope=scope_of(request.user))
        # The summary's dict is the one ``state_store_clean --dry-run --json`` prints.
        return Response(shapes.GcDryRun(summary.as_dict()).data)
