from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group

from .models import AccessScope, GcRun, StatsSnapshot
from .scopes import scope_of


class StoreWideRecordAdmin(admin.ModelAdmin):
    """Records written by the commands only, spanning every DAG and asset: read-only, and not shown to a
    user with a scope (as on the overview)."""

    def has_view_permission(self, request, obj=None):
        return super().has_view_permission(request, obj) and not scope_of(request.user).restricted

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


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


@admin.register(AccessScope)
class AccessScopeAdmin(admin.ModelAdmin):
    """Every pattern of every group and user; also editable on each group's and user's page."""

    list_display = ("__str__", "group", "user", "kind", "pattern", "created_at")
    list_filter = ("kind", "group")
    search_fields = ("pattern", "group__name", "user__username")
    autocomplete_fields = ("group", "user")
    readonly_fields = ("created_at",)  # set when granted, not typed in


class AccessScopeInline(admin.TabularInline):
    model = AccessScope
    fields = ("kind", "pattern")
    extra = 1
    verbose_name_plural = (
        "State store scope: DAG id and asset name/URI patterns (none: every DAG and asset; DAG patterns only: no asset)"
    )


def _with_scopes(model, model_admin_class):
    """Re-register ``model``'s admin with the scope patterns inline."""
    admin.site.unregister(model)
    admin.site.register(
        model,
        type(
            model_admin_class.__name__,
            (model_admin_class,),
            {"inlines": [*model_admin_class.inlines, AccessScopeInline]},
        ),
    )


_with_scopes(Group, GroupAdmin)
_with_scopes(get_user_model(), UserAdmin)
