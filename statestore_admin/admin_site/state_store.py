"""Django admin's view of Airflow's state store.

Task state (``TaskStateStore``): a list (values never loaded; their size computed in SQL), filters by expiry
status and by DAG, search, two actions ("Expire now", "Delete") and a change form that edits the value and the
expiry. Every change goes through the same services as the dashboard: permissions, the user's scope and the
audit apply, recorded via "admin", and only what the form changed is written (the value as the API's PATCH,
keeping the expiry; the expiry, keeping the value). The rows are those of the user's scope
(``selectors.scoped_task_keys``); a key out of scope is a 404, as a missing one. Every permission is the access
policy's (``access.policies``), as on the other faces: browsing the list and reading values need ``view`` on task
state, editing a value ``change`` and ``view`` (the editor shows it), the expiry ``change``; a user with
``change`` only sets a key's expiry by its page, without seeing its value.

Asset state (``AssetStateStore``) has a composite primary key, which Django 5.2's admin cannot register. The
admin lists assets instead (``Asset``, one integer key): each with its number of keys and a link to the
dashboard's asset page, where the keys are read and changed.

The models live in Airflow's database: the router sends their queries there. No full count: the paginator
counts at most ``COUNT_CAP`` rows (``SELECT COUNT(*) FROM (… LIMIT n)``) and says "more than" beyond.
"""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import csrf_protect_m
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Exists, OuterRef
from django.db.models.functions import Length
from django.http import Http404, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from statestore_admin.access import policies
from statestore_admin.access.actors import ADMIN, Actor
from statestore_admin.access.scopes import scope_of
from statestore_admin.admin_site.read_only import ReadOnlyAdmin
from statestore_admin.airflow.models import Asset, AssetStateStore, TaskStateStore
from statestore_admin.core import counting, formatting
from statestore_admin.core.counting import COUNT_CAP
from statestore_admin.core.errors import Conflict, Forbidden, Invalid, NotFound
from statestore_admin.core.values import (
    decode_json_text,
    encode_value,
    expiry_choices,
    expiry_from_form,
    parse_datetime_aware,
    pretty,
)
from statestore_admin.state import selectors, services

MAX_SELECTION = 10_000  # keys per action: one audited change, one bounded list of ids
DAG_CHOICES = 200  # DAGs offered by the DAG filter; others are found by search (or ?dag_id=… in the URL)


class CappedCountPaginator(Paginator):
    """Counts at most ``COUNT_CAP`` rows, so that a list of a 10M-row table never counts them all; pages past
    the cap are still reachable by search."""

    @cached_property
    def count(self) -> int:
        # Only the ids: the list's computed columns (a value's size, an asset's key count) are not counted.
        return counting.capped_count(self.object_list.order_by(), COUNT_CAP).value


def _may(request, action: str, store: str = policies.TASK) -> bool:
    return policies.allows(request.user, store, action)


def _raise_404_if_none(obj):
    """A key or asset that is missing and one out of the user's scope answer the same 404."""
    if obj is None:
        raise Http404(gettext("No such object: it may have been deleted."))
    return obj


# Task state: filters ------------------------------------------------------------------------------------
class StatusFilter(admin.SimpleListFilter):
    """The dashboard's expiry statuses (``selectors.status_filter``): each a range of the expires_at index."""

    title = _("expiry status")
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return list(selectors.STATUSES.items())

    def queryset(self, request, queryset):
        status = self.value()
        if status in selectors.STATUSES:
            return queryset.filter(selectors.status_filter(status, timezone.now()))
        return queryset


class DagFilter(admin.SimpleListFilter):
    """The DAGs with task state in the user's scope, found by the loose index scan of the dashboard's DAG list
    (one index probe per DAG, never a DISTINCT over the table). At most ``DAG_CHOICES`` are offered, by
    dag_id, so that the sidebar stays short whatever the number of DAGs; the others are reached by search."""

    title = _("DAG")
    parameter_name = "dag_id"

    def __init__(self, request, params, model, model_admin):
        self._dag_ids = _dag_ids(request)
        super().__init__(request, params, model, model_admin)
        if len(self._dag_ids) > DAG_CHOICES:
            self.title = gettext("DAG (the first %(shown)s of %(count)s; search finds the others)") % {
                "shown": DAG_CHOICES,
                "count": f"{len(self._dag_ids):,}",
            }

    def lookups(self, request, model_admin):
        choices = self._dag_ids[:DAG_CHOICES]
        selected = self.value()
        if selected and selected not in choices and selected in self._dag_ids:
            choices = [*choices, selected]  # chosen beyond the cap (a link, a search): shown as selected
        return [(dag_id, dag_id) for dag_id in choices]

    def queryset(self, request, queryset):
        return queryset.filter(dag_id=self.value()) if self.value() else queryset


def _dag_ids(request) -> list[str]:
    """The dag_ids with task state that the user's scope allows, once per request."""
    if not hasattr(request, "_statestore_admin_dag_ids"):
        allowed = selectors.scoped_dag_ids(scope_of(request.user))
        request._statestore_admin_dag_ids = selectors.all_dag_ids_with_state() if allowed is None else allowed
    return request._statestore_admin_dag_ids


# Task state: the change form ----------------------------------------------------------------------------
KEEP = "keep"
REFUSED = "_statestore_admin_refused"  # on the request: what the services refused in ``save_model``, and what was done
FORM_FIELDS = {"value": "new_value", "expiry": "expiry", "expires_at": "expires_at_text"}  # service → form


class TaskKeyForm(forms.ModelForm):
    """Edits a key's value and expiry. ``clean`` only validates, as the services would (the JSON, the expiry, and
    the policy of each change asked); ``TaskStateStoreAdmin.save_model`` writes, through the services, what the
    form changed: ``value`` if ``changes_value``, ``expiry`` unless None, each on ``seen`` (the version the form
    was opened on). What the services refuse then (a write since, a key gone) is shown by this form again
    (``REFUSED``); ``done`` lists what changed. ``request`` and ``may_edit`` are set by the admin."""

    request = None
    may_edit = False

    new_value = forms.CharField(
        label=_("Value"),
        required=False,
        strip=False,
        help_text=_('JSON: a string needs quotes ("text"); null, NaN and Infinity are refused.'),
        widget=forms.Textarea(attrs={"rows": 12, "cols": 80, "spellcheck": "false"}),
    )
    expiry = forms.ChoiceField(label=_("Expiry"), choices=(), widget=forms.RadioSelect, initial=KEEP)
    expires_at_text = forms.CharField(
        label=_("New expiry"),
        required=False,
        help_text=_("With “At a date and time”: ISO 8601 with a time zone, e.g. 2026-12-01T00:00:00+00:00"),
        widget=forms.TextInput(attrs={"placeholder": "2026-12-01T00:00:00+00:00", "autocomplete": "off"}),
    )
    # The version the form was opened on, exact and in UTC: Django's DateTimeField writes it in the reader's zone,
    # which has no wall time for 9999-12-31 in UTC+14.
    seen_updated_at = forms.CharField(widget=forms.HiddenInput, required=False)

    class Meta:
        model = TaskStateStore
        fields = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        key = self.instance
        self.done: list[str] = []
        self.changes_value, self.value, self.expiry, self.seen = False, None, None, None
        self.initial_value = pretty(key.value) if self.may_edit else ""
        self.fields["new_value"].initial = self.initial_value
        current = key.expires_at.isoformat() if key.expires_at else gettext("never expires")
        unchanged = gettext("Unchanged (%(current)s)") % {"current": current}
        self.fields["expiry"].choices = [(KEEP, unchanged), *expiry_choices()]
        self.fields["seen_updated_at"].initial = formatting.iso(key.updated_at)

    def _changes_value(self, text: str) -> bool:
        if not self.may_edit:  # the field is not shown: any value sent is an edit, which the policy refuses
            return text.strip() != ""
        return text.replace("\r\n", "\n").strip() != self.initial_value.replace("\r\n", "\n").strip()

    def clean(self):
        cleaned = super().clean()
        refused = getattr(self.request, REFUSED, None)
        if refused is not None:  # the services refused this very form (``save_model``): shown again, with why
            self._refused(*refused)
            return cleaned
        if self.errors:
            return cleaned
        text = cleaned.get("new_value") or ""
        actor = Actor.from_request(self.request, via=ADMIN)
        try:
            seen_text = cleaned.get("seen_updated_at")
            self.seen = parse_datetime_aware(seen_text, "seen_updated_at") if seen_text else None
            # Every input is checked before the first write: a bad expiry never leaves a new value behind.
            self.changes_value = self._changes_value(text)
            if self.changes_value:
                policies.require(actor, policies.TASK, "edit")
                self.value = decode_json_text(text)
                encode_value(self.value)  # null, NaN, too deep, too large: refused here as by the service
            if cleaned["expiry"] != KEEP:
                policies.require(actor, policies.TASK, "expire")
                self.expiry = expiry_from_form(cleaned["expiry"], cleaned["expires_at_text"])
        except (ValidationError, Forbidden) as exc:
            self._refused(exc, [])
        return cleaned

    def _refused(self, exc: Exception, done: list[str]) -> None:
        if done:  # the value was written, then the expiry refused (a write in between): say so
            self.add_error(None, gettext("The value was saved; the expiry was not changed:"))
        if isinstance(exc, ValidationError) and hasattr(exc, "error_dict"):
            for name, errors in exc.message_dict.items():
                field = FORM_FIELDS.get(name)
                self.add_error(field if field in self.fields else None, errors)
        elif isinstance(exc, ValidationError):
            self.add_error(None, exc.messages)
        else:
            self.add_error("new_value" if isinstance(exc, Conflict) and not done else None, str(exc))


# Task state: the admin ----------------------------------------------------------------------------------
IDENTITY = ("dag_id", "run_id", "task_id", "region", "map_index", "key")


@admin.register(TaskStateStore)
class TaskStateStoreAdmin(admin.ModelAdmin):
    list_display = (*IDENTITY, "size", "updated", "expiry_status")
    list_filter = (StatusFilter, DagFilter)
    search_fields = ("key", "dag_id", "run_id", "task_id")
    sortable_by = ("dag_id", "expiry_status")  # the columns an index orders (lookup index, expires_at index)
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER  # facets would count every choice over the whole table
    paginator = CappedCountPaginator
    list_per_page = 100
    actions = ["expire_now", "delete_keys"]
    form = TaskKeyForm

    def get_queryset(self, request):
        queryset = selectors.scoped_task_keys(scope_of(request.user), super().get_queryset(request))
        if request.resolver_match and (request.resolver_match.url_name or "").endswith("_changelist"):
            # A list never loads values, which may be large: their size is computed by the database.
            queryset = queryset.defer("value").annotate(size=Length("value"))
        return queryset

    def get_object(self, request, object_id, from_field=None):
        return _raise_404_if_none(super().get_object(request, object_id, from_field))

    # Columns --------------------------------------------------------------------------------------------
    @admin.display(description=_("region"))
    def region(self, obj) -> str:
        """Airflow 3.4's dynamic region of the key's task instance (a loop iteration, a mapped expansion); empty
        outside any region, which is every key on Airflow 3.3. ``map_index`` is then the index in it."""
        return str(obj.region_id) if obj.region_id.int else ""

    @admin.display(description=_("size (characters)"))
    def size(self, obj) -> int:
        size = getattr(obj, "size", None)
        return len(obj.value) if size is None else size

    @admin.display(description=_("updated at"))
    def updated(self, obj) -> str:
        return formatting.in_zone_text(obj.updated_at, timezone.get_current_timezone())

    @admin.display(description=_("expires at"))
    def expires(self, obj) -> str:
        return formatting.in_zone_text(obj.expires_at, timezone.get_current_timezone())

    @admin.display(description=_("expiry status"), ordering="expires_at")
    def expiry_status(self, obj) -> str:
        return selectors.STATUSES[selectors.status_of(obj.expires_at, timezone.now())]

    @admin.display(description=_("value"))
    def current_value(self, obj):
        return format_html('<pre class="statestore-value">{}</pre>', pretty(obj.value))

    # The change form ------------------------------------------------------------------------------------
    def get_fieldsets(self, request, obj=None):
        can_view = _may(request, "view")
        shown = [*IDENTITY, *(("current_value", "size") if can_view else ()), "updated", "expires"]
        shown.append("expiry_status")
        if not self.has_change_permission(request, obj):
            return [(None, {"fields": shown})]
        changes = ["expiry", "expires_at_text", "seen_updated_at"]
        if _may(request, "edit"):
            shown.remove("current_value")  # the value is in the text area
            changes.insert(0, "new_value")
        return [(None, {"fields": shown}), (pgettext_lazy("fieldset", "Change"), {"fields": changes})]

    def get_readonly_fields(self, request, obj=None):
        return (*IDENTITY, "current_value", "size", "updated", "expires", "expiry_status")

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        return type(form.__name__, (form,), {"request": request, "may_edit": _may(request, "edit")})

    @csrf_protect_m
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # Not in one transaction of Airflow's database, as Django's admin would: each service runs its own,
        # in the audit's order (the event committed before the change, confirmed after it commits).
        return self._changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj, form, change):
        """Writes what the form changed, and only that, through the state services as the pages and the API do:
        a new value as the API's PATCH (the expiry kept), a new expiry (the value kept), audited via admin. The
        row ``obj`` itself is never saved."""
        actor, ref, seen = Actor.from_request(request, via=ADMIN), services.TaskKeyRef(id=obj.pk), form.seen
        try:
            if form.changes_value:
                row = services.patch_task_key(actor=actor, ref=ref, value=form.value, seen_updated_at=seen)
                if row.written:  # the same value spelled otherwise is not written
                    form.done.append("value")
                seen = row.updated_at
            if form.expiry is not None:
                services.set_task_expiry(actor=actor, ref=ref, expiry=form.expiry, seen_updated_at=seen)
                form.done.append("expiry")
        except (ValidationError, Conflict, NotFound, Forbidden) as exc:
            setattr(request, REFUSED, (exc, form.done))

    def construct_change_message(self, request, form, formsets, add=False):
        return [{"changed": {"fields": form.done}}] if form.done else []

    def log_change(self, request, obj, message):
        if message or getattr(request, REFUSED, None) is None:  # a refused change that wrote nothing is no change
            super().log_change(request, obj, message)

    def response_change(self, request, obj):
        if getattr(request, REFUSED, None) is not None:
            # The services refused what the form asked (a write since it was opened, the key or its task instance
            # gone): the change form again, bound to what was sent, says why (``TaskKeyForm.clean``).
            return self._changeform_view(request, str(obj.pk), "", None)
        return super().response_change(request, obj)

    def response_post_save_change(self, request, obj):
        if not _may(request, "view"):  # the list is theirs only with view
            return HttpResponseRedirect(request.path)
        return super().response_post_save_change(request, obj)

    # Permissions ----------------------------------------------------------------------------------------
    def has_view_permission(self, request, obj=None):
        return _may(request, "view")

    def has_change_permission(self, request, obj=None):
        """The change form, for its expiry (``expire``); its value only for those who may ``edit`` it
        (``get_fieldsets``, and ``TaskKeyForm.clean`` refuses a value sent by anyone else)."""
        return _may(request, "expire")

    def has_add_permission(self, request):
        return False  # keys are written by tasks, or added in the dashboard on a task instance's page

    def has_delete_permission(self, request, obj=None):
        return False  # no per-object delete view: the "Delete" action goes through the service

    def get_model_perms(self, request):
        """Without ``view`` the store is not listed on the index: its list and counts are not for them."""
        perms = super().get_model_perms(request)
        return perms if perms["view"] else dict.fromkeys(perms, False)

    def changelist_view(self, request, extra_context=None):
        if not _may(request, "view"):
            raise PermissionDenied
        return super().changelist_view(request, extra_context)

    # Actions --------------------------------------------------------------------------------------------
    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_expire_permission(self, request):
        return _may(request, "expire")

    def has_delete_keys_permission(self, request):
        return _may(request, "delete")

    @admin.action(description=_("Expire now (the next GC removes them)"), permissions=["expire"])
    def expire_now(self, request, queryset):
        self._act(request, queryset, services.expire_task_keys, "expired")

    @admin.action(description=pgettext_lazy("action", "Delete"), permissions=["delete_keys"])
    def delete_keys(self, request, queryset):
        self._act(request, queryset, services.delete_task_keys, "deleted")

    def _act(self, request, queryset, service, done: str) -> None:
        ids = tuple(queryset.values_list("pk", flat=True)[: MAX_SELECTION + 1])
        if len(ids) > MAX_SELECTION:
            self.message_user(
                request,
                gettext("Select at most %(count)s keys at a time; nothing was changed.")
                % {"count": f"{MAX_SELECTION:,}"},
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
        level = messages.WARNING if outcome.objects_failed else messages.SUCCESS
        self.message_user(request, outcome.describe(done), level)


# Asset state --------------------------------------------------------------------------------------------
class WithStateFilter(admin.SimpleListFilter):
    title = pgettext_lazy("filter", "state")
    parameter_name = "with_state"

    def lookups(self, request, model_admin):
        return [("yes", _("with keys")), ("no", _("without keys"))]

    def queryset(self, request, queryset):
        has_keys = Exists(AssetStateStore.objects.filter(asset=OuterRef("pk")))
        return {"yes": queryset.filter(has_keys), "no": queryset.exclude(has_keys)}.get(self.value(), queryset)


@admin.register(Asset)
class AssetAdmin(ReadOnlyAdmin):
    """Asset state keys are keyed by (asset_id, key), a composite primary key that Django 5.2's admin cannot
    register: this lists the assets of the user's scope with their number of keys, each linking to the
    dashboard's asset page, where its keys are read and changed (with the same services). Read-only; only for
    users with ``view`` on asset state."""

    list_display = ("name", "uri", "group", "key_count", "dashboard")
    list_display_links = None
    list_filter = (WithStateFilter,)
    search_fields = ("name", "uri")
    sortable_by = ()
    ordering = ("id",)
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = CappedCountPaginator
    list_per_page = 100
    actions = None

    def get_queryset(self, request):
        return selectors.assets_with_key_counts(scope_of(request.user))

    def get_object(self, request, object_id, from_field=None):
        return _raise_404_if_none(super().get_object(request, object_id, from_field))

    @admin.display(description=_("keys"))
    def key_count(self, obj) -> int:
        return obj.key_count or 0

    @admin.display(description=pgettext_lazy("column", "state"))
    def dashboard(self, obj):
        return format_html('<a href="{}">{}</a>', reverse("asset-detail", args=[obj.pk]), _("Keys in the dashboard"))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """An asset's page is the dashboard's (404 when missing or out of scope)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        asset = self.get_object(request, object_id)
        return HttpResponseRedirect(reverse("asset-detail", args=[asset.pk]))

    def has_view_permission(self, request, obj=None):
        return _may(request, "view", policies.ASSET)
