"""Django admin's view of Airflow's task state: browse and search, read-only; two actions, "Expire now" and
"Delete", which go through the same services as the dashboard (permissions and audit apply, via "admin").

The model lives in Airflow's database: the router sends its queries there. No filters and no full count: the
paginator counts at most ``COUNT_CAP`` rows (``SELECT COUNT(*) FROM (… LIMIT n)``) and says "more than" beyond.
"""

from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.utils.functional import cached_property

from statestore_admin.state import permissions, selectors, services
from statestore_admin.state.actors import ADMIN, Actor
from statestore_admin.state.errors import Conflict, Forbidden, Invalid, NotFound
from statestore_admin.state.scopes import scope_of

from .models import TaskStateStore

MAX_SELECTION = 10_000  # keys per action: one audited change, one bounded list of ids
COUNT_CAP = 10_000


class CappedCountPaginator(Paginator):
    """Counts at most ``COUNT_CAP`` rows, so that a list of a 10M-row table never counts them all; pages past
    the cap are still reachable by search."""

    @cached_property
    def count(self) -> int:
        return self.object_list[:COUNT_CAP].count()


@admin.register(TaskStateStore)
class TaskStateStoreAdmin(admin.ModelAdmin):
    list_display = ("dag_id", "run_id", "task_id", "map_index", "key", "updated_at", "expires_at")
    search_fields = ("key", "dag_id", "run_id", "task_id")
    show_full_result_count = False
    paginator = CappedCountPaginator
    list_per_page = 100
    actions = ["expire_now", "delete_keys"]
    fields = readonly_fields = (
        "dag_id",
        "run_id",
        "task_id",
        "map_index",
        "key",
        "value",
        "updated_at",
        "expires_at",
    )

    def get_queryset(self, request):
        queryset = selectors.scoped_task_keys(scope_of(request.user), super().get_queryset(request))
        if request.resolver_match and (request.resolver_match.url_name or "").endswith("_changelist"):
            queryset = queryset.defer("value")  # a list never loads values, which may be large
        return queryset

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # read-only: values are changed in the dashboard, with its checks

    def has_delete_permission(self, request, obj=None):
        return False  # no per-object delete view: the "Delete" action goes through the service

    def has_expire_permission(self, request):
        return permissions.can(request.user, permissions.TASK, "change")

    def has_delete_keys_permission(self, request):
        return permissions.can(request.user, permissions.TASK, "delete")

    @admin.action(description="Expire now (the next GC removes them)", permissions=["expire"])
    def expire_now(self, request, queryset):
        self._act(request, queryset, services.expire_task_keys, "Expired")

    @admin.action(description="Delete", permissions=["delete_keys"])
    def delete_keys(self, request, queryset):
        self._act(request, queryset, services.delete_task_keys, "Deleted")

    def _act(self, request, queryset, service, verb: str) -> None:
        ids = tuple(queryset.values_list("pk", flat=True)[: MAX_SELECTION + 1])
        if len(ids) > MAX_SELECTION:
            self.message_user(
                request,
                f"Select at most {MAX_SELECTION:,} keys at a time; nothing was changed.",
                messages.ERROR,
            )
            return
        try:
            outcome = service(actor=Actor.from_request(request, via=ADMIN), selection=services.TaskSelection(ids=ids))
        except (Forbidden, NotFound, Conflict) as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        except Invalid as exc:
            self.message_user(request, " ".join(exc.messages), messages.ERROR)
            return
        self.message_user(request, outcome.describe(verb), messages.SUCCESS)
