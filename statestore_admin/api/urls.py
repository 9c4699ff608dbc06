from django.contrib.auth.decorators import login_not_required
from django.urls import path, register_converter
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from statestore_admin.api import schema  # noqa: F401  (the Bearer scheme)
from statestore_admin.api.ours import audit, gc, insights, orphans, search, stats
from statestore_admin.api.v2 import assets, tasks


class KeyConverter:
    """A key: any characters, newlines and '/' included (Django's ``path`` stops at a newline)."""

    regex = r"[\s\S]+"

    def to_python(self, value):
        return value

    def to_url(self, value):
        return value


class PathSegmentConverter(KeyConverter):
    """One path segment, validated by the view (``asset_id``: not an integer is Airflow's 422, not a 404)."""

    regex = "[^/]+"

    def to_url(self, value):
        return str(value)


register_converter(KeyConverter, "key")
register_converter(PathSegmentConverter, "segment")

TASK = "api/v2/dags/<str:dag_id>/dagRuns/<str:dag_run_id>/taskInstances/<str:task_id>/state-store"
ASSET = "api/v2/assets/<segment:asset_id>/state-store"


def api(view_class):
    """DRF authenticates API calls itself (bearer token or session): no login redirect for them."""
    return login_not_required(view_class.as_view())


urlpatterns = [
    path(TASK, api(tasks.TaskStateStoreCollection), name="task-state-store"),
    path(f"{TASK}/<key:key>", api(tasks.TaskStateStoreItem), name="task-state-store-key"),
    path(ASSET, api(assets.AssetStateStoreCollection), name="asset-state-store"),
    path(f"{ASSET}/<key:key>", api(assets.AssetStateStoreItem), name="asset-state-store-key"),
    path("api/statestore/v1/search/task-keys", api(search.SearchTaskKeys), name="api-search-task-keys"),
    path("api/statestore/v1/search/asset-keys", api(search.SearchAssetKeys), name="api-search-asset-keys"),
    path("api/statestore/v1/stats", api(stats.Stats), name="api-stats"),
    path("api/statestore/v1/gc/dry-run", api(gc.GcDryRun), name="api-gc-dry-run"),
    path("api/statestore/v1/orphans", api(orphans.Orphans), name="api-orphans"),
    path("api/statestore/v1/insights/series", api(insights.InsightsSeries), name="api-insights-series"),
    path("api/statestore/v1/insights/expiry", api(insights.InsightsExpiry), name="api-insights-expiry"),
    path("api/statestore/v1/insights/sizes", api(insights.InsightsSizes), name="api-insights-sizes"),
    path("api/statestore/v1/insights/top", api(insights.InsightsTop), name="api-insights-top"),
    path("api/statestore/v1/insights/gc", api(insights.InsightsGc), name="api-insights-gc"),
    path("api/statestore/v1/audit-events", api(audit.AuditEvents), name="api-audit-events"),
    path("api/statestore/v1/audit-events/<int:id>", api(audit.AuditEventDetail), name="api-audit-event"),
    path("api/statestore/v1/audit-events/<int:id>/restore", api(audit.RestoreEvent), name="api-audit-event-restore"),
    path("api/statestore/v1/restore", api(audit.RestoreDocument), name="api-restore"),
    path("api/schema/", api(SpectacularAPIView), name="api-schema"),
    # A page to read, GET only: its HTML renderer has no template for OPTIONS' metadata (a 500).
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", http_method_names=["get", "head"]),
        name="api-docs",
    ),
]
