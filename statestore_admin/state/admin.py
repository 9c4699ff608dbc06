from django.contrib import admin

from .models import GcRun


@admin.register(GcRun)
class GcRunAdmin(admin.ModelAdmin):
    """GC runs are written by state_store_clean only: read-only here."""

    list_display = ("started_at", "outcome", "rows_deleted", "batches", "batch_size", "cutoff", "host")
    list_filter = ("outcome", "host")
    date_hierarchy = "started_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
