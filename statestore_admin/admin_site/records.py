"""Django admin's view of the dashboard's own store-wide records, GC runs and statistics snapshots:
read-only, and not for a user with a scope."""

from django.contrib import admin

from statestore_admin.access import policies
from statestore_admin.admin_site.read_only import ReadOnlyAdmin
from statestore_admin.records.models import GcRun, StatsSnapshot


class StoreWideRecordAdmin(ReadOnlyAdmin):
    """Records written by the commands only, spanning every DAG and asset: read-only, and not shown to a
    user with a scope (as on the overview)."""

    def has_view_permission(self, request, obj=None):
        return super().has_view_permission(request, obj) and policies.sees_store_wide_records(request.user)


@admin.register(GcRun)
class GcRunAdmin(StoreWideRecordAdmin):
    """GC runs, written by state_store_clean."""

    list_display = ("started_at", "outcome", "rows_deleted", "batches", "batch_size", "cutoff", "host")
    list_filter = ("outcome", "host")
    date_hierarchy = "started_at"


@admin.register(StatsSnapshot)
class StatsSnapshotAdmin(StoreWideRecordAdmin):
    """Statistics snapshots, written by state_store_stats (and state_store_clean)."""

    list_display = ("taken_at", "status", "trigger", "task_keys", "task_bytes", "expired", "asset_keys", "dags")
    list_filter = ("status", "trigger")
    date_hierarchy = "taken_at"
