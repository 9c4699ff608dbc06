from django.urls import path, register_converter

from statestore_admin.dashboard.actions import asset_keys, restore, task_keys
from statestore_admin.dashboard.actions import browse as browse_actions
from statestore_admin.dashboard.http.framed import framable
from statestore_admin.dashboard.views import (
    assets,
    audit,
    browse,
    exports,
    from_airflow,
    gc,
    insights,
    orphans,
    overview,
    search,
    story,
    tasks,
)
from statestore_admin.tokens import views as tokens


class TaskActionConverter:
    regex = "|".join(task_keys.TASK_ACTIONS)

    def to_python(self, value):
        return value

    def to_url(self, value):
        return value


register_converter(TaskActionConverter, "action")

# framable(): the read pages, which Airflow's UI may frame (STATESTORE_FRAME_ANCESTORS, statestore_admin/framing.py):
# those the plugin links to and those their links lead to. Everything else, the actions' pages without JavaScript
# and the downloads included, refuses every frame.
urlpatterns = [
    path("", framable(browse.over_api("browse-dags")(overview.home)), name="home"),
    path("overview/largest/", framable(overview.largest_values), name="largest-values"),
    path("insights/", framable(insights.insights_page), name="insights"),
    path("insights/snapshot/", insights.take_snapshot, name="insights-snapshot"),
    path("gc/", framable(gc.gc_page), name="gc"),
    path("gc/run/", gc.gc_run, name="gc-run"),
    path("orphans/", framable(orphans.orphans_page), name="orphans"),
    path("dags/", framable(browse.over_api("browse-dags")(tasks.dag_list)), name="dag-list"),
    path("dags/<str:dag_id>/", framable(browse.over_api("browse-runs", "dag_id")(tasks.dag_runs)), name="dag-runs"),
    path(
        "dags/<str:dag_id>/compare/",
        framable(browse.over_api("browse-compare", "dag_id")(story.run_compare)),
        name="run-compare",
    ),
    path("runs/<int:run_pk>/", framable(tasks.run_detail), name="run-detail"),
    path("runs/<int:run_pk>/iterations/", framable(tasks.run_iterations), name="run-iterations"),
    path("runs/<int:run_pk>/tasks/<str:task_id>/", framable(tasks.task_instance), name="task-instance"),
    path("task-instance/", framable(tasks.task_instance_lookup), name="task-instance-lookup"),
    path("airflow/<str:destination>/", framable(from_airflow.from_airflow), name="from-airflow"),
    path("runs/<int:run_pk>/tasks/<str:task_id>/add/", task_keys.task_key_add, name="task-key-add"),
    path("assets/", framable(browse.over_api("browse-assets")(assets.asset_list)), name="asset-list"),
    path(
        "assets/<int:asset_id>/",
        framable(browse.over_api("browse-asset", "asset_id")(assets.asset_detail)),
        name="asset-detail",
    ),
    path("assets/<int:asset_id>/key/", framable(assets.asset_key), name="asset-key"),
    path("assets/<int:asset_id>/key/value/", assets.asset_key_value, name="asset-key-value"),
    path("assets/<int:asset_id>/key/edit/", asset_keys.asset_key_edit, name="asset-key-edit"),
    path("assets/<int:asset_id>/add/", asset_keys.asset_key_add, name="asset-key-add"),
    path("assets/<int:asset_id>/delete/", asset_keys.asset_keys_delete, name="asset-keys-delete"),
    path("search/", framable(search.search), name="search"),
    path("account/tokens/", tokens.api_tokens, name="api-tokens"),
    path("account/tokens/<int:pk>/revoke/", tokens.revoke_api_token, name="api-token-revoke"),
    path("keys/task/<int:key_id>/", framable(tasks.task_key), name="task-key"),
    path("keys/task/<int:key_id>/value/", tasks.task_key_value, name="task-key-value"),
    path("keys/task/<int:key_id>/actions/", tasks.task_key_actions, name="task-key-actions"),
    path("keys/task/<int:key_id>/story/", framable(story.key_story), name="key-story"),
    path("keys/task/<int:key_id>/edit/", task_keys.task_key_edit, name="task-key-edit"),
    path("keys/task/<int:key_id>/expiry/", task_keys.task_key_expiry, name="task-key-expiry"),
    path("keys/task/export/", exports.task_keys_export, name="task-keys-export"),
    path("keys/task/bulk-expiry/", task_keys.task_keys_expiry, name="task-keys-expiry"),
    path("keys/task/<action>/", task_keys.task_keys_action, name="task-keys-action"),
    path("assets/<int:asset_id>/export/", exports.asset_keys_export, name="asset-keys-export"),
    path("audit/", framable(audit.audit_list), name="audit"),
    # Downloads of the lists (?format=json|csv): views.exports
    path("runs/<int:run_pk>/export/", exports.run_keys_export, name="run-keys-export"),
    path(
        "runs/<int:run_pk>/tasks/<str:task_id>/export/",
        exports.task_instance_keys_export,
        name="task-instance-keys-export",
    ),
    path("assets/<int:asset_id>/keys/export/", exports.asset_keys_list_export, name="asset-keys-list-export"),
    path("search/export/", exports.search_export, name="search-export"),
    path("audit/export/", exports.audit_export, name="audit-export"),
    path("audit/restore-file/", restore.audit_restore_file, name="audit-restore-file"),
    path("audit/run/", framable(audit.run_lookup), name="run-lookup"),
    path("audit/<int:event_id>/", framable(audit.audit_event), name="audit-event"),
    path("audit/<int:event_id>/restore/", restore.audit_restore, name="audit-restore"),
    # By Airflow's names, from whichever source serves the deployment (views.browse): managed Airflow's pages.
    path("browse/dags/", framable(browse.dags), name="browse-dags"),
    path("browse/dags/<str:dag_id>/", framable(browse.runs), name="browse-runs"),
    path("browse/dags/<str:dag_id>/compare/", framable(browse.compare), name="browse-compare"),
    path("browse/run/", framable(browse.run), name="browse-run"),
    path("browse/run/export/", browse.run_export, name="browse-run-export"),
    path("browse/story/", framable(browse.story), name="browse-story"),
    path("browse/task/", framable(browse.task), name="browse-task"),
    path("browse/task/export/", browse.task_export, name="browse-task-export"),
    path("browse/task/<str:op>/", browse_actions.task_action, name="browse-task-action"),
    path("browse/assets/", framable(browse.assets), name="browse-assets"),
    path("browse/assets/<int:asset_id>/", framable(browse.asset), name="browse-asset"),
    path("browse/assets/<int:asset_id>/export/", browse.asset_export, name="browse-asset-export"),
    path("browse/assets/<int:asset_id>/<str:op>/", browse_actions.asset_action, name="browse-asset-action"),
]
