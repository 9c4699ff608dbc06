from django.urls import path, register_converter
from django.views.decorators.http import require_safe

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


def page(view):
    """A read page, which Airflow's UI may frame (``framable``; STATESTORE_FRAME_ANCESTORS,
    statestore_admin/framing.py): those the plugin links to and those their links lead to."""
    return framable(read(view))


def read(view):
    """GET and HEAD only: any other method is 405 with ``Allow``, where a read view would answer it as a GET
    (a whole page rendered for a DELETE)."""
    return require_safe(view)


# page(): the read pages, framable. Everything else, the actions' pages without JavaScript and the downloads
# (read()) included, refuses every frame.
urlpatterns = [
    path("", page(browse.over_api("browse-dags")(overview.home)), name="home"),
    path("overview/largest/", page(overview.largest_values), name="largest-values"),
    path("insights/", page(insights.insights_page), name="insights"),
    path("insights/snapshot/", insights.take_snapshot, name="insights-snapshot"),
    path("gc/", page(gc.gc_page), name="gc"),
    path("gc/run/", gc.gc_run, name="gc-run"),
    path("orphans/", page(orphans.orphans_page), name="orphans"),
    path("dags/", page(browse.over_api("browse-dags")(tasks.dag_list)), name="dag-list"),
    path("dags/<str:dag_id>/", page(browse.over_api("browse-runs", "dag_id")(tasks.dag_runs)), name="dag-runs"),
    path(
        "dags/<str:dag_id>/compare/",
        page(browse.over_api("browse-compare", "dag_id")(story.run_compare)),
        name="run-compare",
    ),
    path("runs/<int:run_pk>/", page(tasks.run_detail), name="run-detail"),
    path("runs/<int:run_pk>/iterations/", page(tasks.run_iterations), name="run-iterations"),
    path("runs/<int:run_pk>/tasks/<str:task_id>/", page(tasks.task_instance), name="task-instance"),
    path("task-instance/", page(tasks.task_instance_lookup), name="task-instance-lookup"),
    path("airflow/<str:destination>/", page(from_airflow.from_airflow), name="from-airflow"),
    path("runs/<int:run_pk>/tasks/<str:task_id>/add/", task_keys.task_key_add, name="task-key-add"),
    path("assets/", page(browse.over_api("browse-assets")(assets.asset_list)), name="asset-list"),
    path(
        "assets/<int:asset_id>/",
        page(browse.over_api("browse-asset", "asset_id")(assets.asset_detail)),
        name="asset-detail",
    ),
    path("assets/<int:asset_id>/key/", page(assets.asset_key), name="asset-key"),
    path("assets/<int:asset_id>/key/value/", read(assets.asset_key_value), name="asset-key-value"),
    path("assets/<int:asset_id>/key/edit/", asset_keys.asset_key_edit, name="asset-key-edit"),
    path("assets/<int:asset_id>/add/", asset_keys.asset_key_add, name="asset-key-add"),
    path("assets/<int:asset_id>/delete/", asset_keys.asset_keys_delete, name="asset-keys-delete"),
    path("search/", page(search.search), name="search"),
    path("account/tokens/", tokens.api_tokens, name="api-tokens"),
    path("account/tokens/<int:pk>/revoke/", tokens.revoke_api_token, name="api-token-revoke"),
    path("keys/task/<int:key_id>/", page(tasks.task_key), name="task-key"),
    path("keys/task/<int:key_id>/value/", read(tasks.task_key_value), name="task-key-value"),
    path("keys/task/<int:key_id>/actions/", read(tasks.task_key_actions), name="task-key-actions"),
    path("keys/task/<int:key_id>/story/", page(story.key_story), name="key-story"),
    path("keys/task/<int:key_id>/edit/", task_keys.task_key_edit, name="task-key-edit"),
    path("keys/task/<int:key_id>/expiry/", task_keys.task_key_expiry, name="task-key-expiry"),
    path("keys/task/export/", read(exports.task_keys_export), name="task-keys-export"),
    path("keys/task/bulk-expiry/", task_keys.task_keys_expiry, name="task-keys-expiry"),
    path("keys/task/<action>/", task_keys.task_keys_action, name="task-keys-action"),
    path("assets/<int:asset_id>/export/", read(exports.asset_keys_export), name="asset-keys-export"),
    path("audit/", page(audit.audit_list), name="audit"),
    # Downloads of the lists (?format=json|csv): views.exports
    path("runs/<int:run_pk>/export/", read(exports.run_keys_export), name="run-keys-export"),
    path(
        "runs/<int:run_pk>/tasks/<str:task_id>/export/",
        read(exports.task_instance_keys_export),
        name="task-instance-keys-export",
    ),
    path("assets/<int:asset_id>/keys/export/", read(exports.asset_keys_list_export), name="asset-keys-list-export"),
    path("search/export/", read(exports.search_export), name="search-export"),
    path("audit/export/", read(exports.audit_export), name="audit-export"),
    path("audit/restore-file/", restore.audit_restore_file, name="audit-restore-file"),
    path("audit/run/", page(audit.run_lookup), name="run-lookup"),
    path("audit/<int:event_id>/", page(audit.audit_event), name="audit-event"),
    path("audit/<int:event_id>/restore/", restore.audit_restore, name="audit-restore"),
    # By Airflow's names, from whichever source serves the deployment (views.browse): managed Airflow's pages.
    path("browse/dags/", page(browse.dags), name="browse-dags"),
    path("browse/dags/<str:dag_id>/", page(browse.runs), name="browse-runs"),
    path("browse/dags/<str:dag_id>/compare/", page(browse.compare), name="browse-compare"),
    path("browse/run/", page(browse.run), name="browse-run"),
    path("browse/run/export/", read(browse.run_export), name="browse-run-export"),
    path("browse/story/", page(browse.story), name="browse-story"),
    path("browse/task/", page(browse.task), name="browse-task"),
    path("browse/task/export/", read(browse.task_export), name="browse-task-export"),
    path("browse/task/<str:op>/", browse_actions.task_action, name="browse-task-action"),
    path("browse/assets/", page(browse.assets), name="browse-assets"),
    path("browse/assets/<int:asset_id>/", page(browse.asset), name="browse-asset"),
    path("browse/assets/<int:asset_id>/export/", read(browse.asset_export), name="browse-asset-export"),
    path("browse/assets/<int:asset_id>/<str:op>/", browse_actions.asset_action, name="browse-asset-action"),
]
