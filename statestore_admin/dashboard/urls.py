from django.urls import path, register_converter

from statestore_admin.dashboard import (
    actions,
    airflow_views,
    audit_views,
    export_views,
    gc_views,
    insights_views,
    orphans_views,
    search_views,
    story_views,
    views,
)
from statestore_admin.dashboard.framed import framable
from statestore_admin.tokens import views as tokens


class TaskActionConverter:
    regex = "|".join(actions.TASK_ACTIONS)

    def to_python(self, value):
        return value

    def to_url(self, value):
        return value


register_converter(TaskActionConverter, "action")

# framable(): the read pages, which Airflow's UI may frame (STATESTORE_FRAME_ANCESTORS, statestore_admin/framing.py):
# those the plugin links to and those their links lead to. Everything else, the actions' pages without JavaScript
# and the downloads included, refuses every frame.
urlpatterns = [
    path("", framable(views.home), name="home"),
    path("overview/largest/", framable(views.largest_values), name="largest-values"),
    path("insights/", framable(insights_views.insights_page), name="insights"),
    path("insights/snapshot/", insights_views.take_snapshot, name="insights-snapshot"),
    path("gc/", framable(gc_views.gc_page), name="gc"),
    path("gc/run/", gc_views.gc_run, name="gc-run"),
    path("orphans/", framable(orphans_views.orphans_page), name="orphans"),
    path("dags/", framable(views.dag_list), name="dag-list"),
    path("dags/<str:dag_id>/", framable(views.dag_runs), name="dag-runs"),
    path("dags/<str:dag_id>/compare/", framable(story_views.run_compare), name="run-compare"),
    path("runs/<int:run_pk>/", framable(views.run_detail), name="run-detail"),
    path("runs/<int:run_pk>/tasks/<str:task_id>/", framable(views.task_instance), name="task-instance"),
    path("task-instance/", framable(views.task_instance_lookup), name="task-instance-lookup"),
    path("airflow/<str:destination>/", framable(airflow_views.from_airflow), name="from-airflow"),
    path("runs/<int:run_pk>/tasks/<str:task_id>/add/", actions.task_key_add, name="task-key-add"),
    path("assets/", framable(views.asset_list), name="asset-list"),
    path("assets/<int:asset_id>/", framable(views.asset_detail), name="asset-detail"),
    path("assets/<int:asset_id>/key/", framable(views.asset_key), name="asset-key"),
    path("assets/<int:asset_id>/key/edit/", actions.asset_key_edit, name="asset-key-edit"),
    path("assets/<int:asset_id>/add/", actions.asset_key_add, name="asset-key-add"),
    path("assets/<int:asset_id>/delete/", actions.asset_keys_delete, name="asset-keys-delete"),
    path("search/", framable(search_views.search), name="search"),
    path("account/tokens/", tokens.api_tokens, name="api-tokens"),
    path("account/tokens/<int:pk>/revoke/", tokens.revoke_api_token, name="api-token-revoke"),
    path("keys/task/<int:key_id>/", framable(views.task_key), name="task-key"),
    path("keys/task/<int:key_id>/story/", framable(story_views.key_story), name="key-story"),
    path("keys/task/<int:key_id>/edit/", actions.task_key_edit, name="task-key-edit"),
    path("keys/task/<int:key_id>/expiry/", actions.task_key_expiry, name="task-key-expiry"),
    path("keys/task/export/", audit_views.task_keys_export, name="task-keys-export"),
    path("keys/task/bulk-expiry/", actions.task_keys_expiry, name="task-keys-expiry"),
    path("keys/task/<action>/", actions.task_keys_action, name="task-keys-action"),
    path("assets/<int:asset_id>/export/", audit_views.asset_keys_export, name="asset-keys-export"),
    path("audit/", framable(audit_views.audit_list), name="audit"),
    # Downloads of the lists (?format=json|csv): export_views
    path("runs/<int:run_pk>/export/", export_views.run_keys_export, name="run-keys-export"),
    path(
        "runs/<int:run_pk>/tasks/<str:task_id>/export/",
        export_views.task_instance_keys_export,
        name="task-instance-keys-export",
    ),
    path("assets/<int:asset_id>/keys/export/", export_views.asset_keys_list_export, name="asset-keys-list-export"),
    path("search/export/", export_views.search_export, name="search-export"),
    path("audit/export/", export_views.audit_export, name="audit-export"),
    path("audit/restore-file/", audit_views.audit_restore_file, name="audit-restore-file"),
    path("audit/run/", framable(audit_views.run_lookup), name="run-lookup"),
    path("audit/<int:event_id>/", framable(audit_views.audit_event), name="audit-event"),
    path("audit/<int:event_id>/restore/", audit_views.audit_restore, name="audit-restore"),
]
