"""The actions on task keys: a GET shows a form or a confirmation (a dialog for htmx, a page without
JavaScript), a POST calls one service. Success answers htmx with 204 and events (toast, refresh, close); bad
input answers 422 with the form and its messages; nothing is changed then.

Values are shown only to users who may ``view`` their store, whatever else they may do (task and asset keys
alike, ``actions.asset_keys`` too):

- The value editors (task and asset) need ``view`` as well as ``change``, on GET and POST: one cannot
  edit a value one may not read, and the dialog would show it. Without ``view`` they answer 403.
- The expiry editor needs ``change`` only: it shows the key's name and expiry, never its value.
- The confirmations (expire, delete, clear) need the action's permission only. With ``view`` they list
  the keys with a preview of their values; without it, the keys' names and where they live, no preview
  (and no download link). The number of keys acted on, and how many are worker-side references (whose
  objects a delete removes after the rows, or leaves behind without a configured object storage), are shown
  to everyone who may act: they describe the action, not a value.
- Toasts and messages name keys and counts, never values. A delete whose worker-side objects could not all be
  deleted (after the rows, in Airflow's order) is a warning toast naming the orphaned references.
"""

from functools import partial

from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from statestore_admin.access import permissions, policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import scope_of
from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.core.errors import Invalid, NotFound
from statestore_admin.dashboard.actions import dialogs
from statestore_admin.dashboard.actions.forms import AddTaskKeyForm, ExpiryForm, expiry_text
from statestore_admin.dashboard.http import params
from statestore_admin.dashboard.http.fragments import fragment
from statestore_admin.dashboard.http.htmx import dialog, done, error_messages
from statestore_admin.dashboard.http.pages import invalid_page
from statestore_admin.dashboard.templatetags.page_links import coordinate_query
from statestore_admin.state import selectors, services
from statestore_admin.state.selectors import TaskAddress

# action: (button, toast verb); what each does is said in people's words by actions/_effect.html
TASK_ACTIONS = {"delete": "deleted", "expire": "expired"}  # the URL's action: what Outcome.describe says was done


@require_http_methods(["GET", "POST"])
@fragment(gettext_lazy("Edit value"))
def task_key_edit(request, key_id):
    return dialogs.edit_value(
        request,
        permissions.TASK,
        "actions/_task_value.html",
        lambda: selectors.get_task_key(key_id, scope=scope_of(request.user)),
        partial(services.patch_task_key, ref=services.TaskKeyRef(id=key_id)),
        reverse("task-key", args=[key_id]),
    )


@require_http_methods(["GET", "POST"])
@fragment(gettext_lazy("Set expiry"))
def task_key_expiry(request, key_id):
    policies.require(request.user, permissions.TASK, "expire")
    key = selectors.get_task_key(key_id, scope=scope_of(request.user))
    form = ExpiryForm(request.POST or None, initial={"seen_updated_at": key.updated_at})
    form.show_expiry(key.expires_at)

    def save():
        row = services.set_task_expiry(
            actor=Actor.from_request(request),
            ref=services.TaskKeyRef(id=key.id),
            expiry=form.chosen_expiry(),
            seen_updated_at=form.cleaned_data.get("seen_updated_at"),
        )
        when = expiry_text(row.expires_at, timezone.now())
        # Translators: a key's name, then what its expiry means ("never expires", "expires on …").
        message = _("%(key)s %(when)s.") % {"key": repr(key.key), "when": when}
        return message, reverse("task-key", args=[key.id])

    context = {"key": key, "now": timezone.now()}
    return dialogs.form_action(request, form, "actions/_task_expiry.html", context, save)


@require_http_methods(["GET", "POST"])
@fragment(gettext_lazy("Add key"))
def task_key_add(request, run_pk, task_id):
    policies.require(request.user, permissions.TASK, "add")
    try:  # Airflow 3.4: the key goes to this region's task instance (the form's address keeps it)
        region_id = params.region_id(request.GET) or SENTINEL_REGION_ID
    except Invalid as exc:
        return invalid_page(request, exc)
    run = selectors.get_run(run_pk, scope=scope_of(request.user))
    map_indexes = selectors.task_map_indexes(TaskAddress(run.dag_id, run.run_id, task_id, region_id=region_id))
    form = AddTaskKeyForm(
        request.POST or None,
        initial={"map_index": request.GET.get("map_index", -1)},
        task_id=task_id,
        map_indexes=map_indexes,
    )

    def add():
        address = TaskAddress(run.dag_id, run.run_id, task_id, form.cleaned_data["map_index"], region_id)
        actor = Actor.from_request(request)
        try:
            row = dialogs.add_key(
                form, services.set_task_key, actor=actor, address=address, expiry=form.chosen_expiry()
            )
        except NotFound:  # the task instance went away since the form was shown
            raise Invalid(
                {
                    "map_index": _("The task instance %(task_id)s [%(map_index)s] no longer exists.")
                    % {"task_id": task_id, "map_index": address.map_index}
                }
            ) from None
        url = reverse("task-instance", args=[run.pk, task_id])
        return _("Added %(key)s.") % {"key": repr(row.key)}, f"{url}?{coordinate_query(row.map_index, region_id)}"

    context = {"run": run, "task_id": task_id, "region_id": region_id if region_id != SENTINEL_REGION_ID else None}
    return dialogs.form_action(request, form, "actions/_task_add.html", context, add)


@require_http_methods(["GET", "POST"])
@fragment(gettext_lazy("Confirm"))
def task_keys_action(request, action):
    """Expire or delete task keys (a selection or a task instance's). The confirmation (GET) lists the
    keys, their value previews only for users who may view task state (see the module's docstring); the
    POST acts on exactly the keys it listed. A refusal shows the confirmation with why (422)."""
    if action not in TASK_ACTIONS:
        raise NotFound(_("No action %(action)s on task keys.") % {"action": repr(action)})
    actor = Actor.from_request(request)
    try:
        if request.method == "POST":
            outcome = _apply(request, actor, action)
            message = outcome.describe(TASK_ACTIONS[action])
            return done(request, message, reverse("home"), dialogs.level_of(outcome), undo=outcome.event)
        preview = _preview(request.GET, actor, action)
    except ValidationError as exc:
        return _confirm(request, action, None, error_messages(exc))
    return _confirm(request, action, preview, [])


@require_http_methods(["GET", "POST"])
@fragment(gettext_lazy("Set expiry"))
def task_keys_expiry(request):
    """Set the expiry of several task keys at once: the selected ones, or a run's keys matching its filter. The
    dialog lists them as the expire and delete confirmations do, with the expiry's fields; the POST sets that
    expiry on exactly the keys it listed, in one audited change that the audit trail can undo. A form with a
    mistake (a time that has passed, not confirmed) is shown again with a fresh list (422); nothing changes."""
    actor = Actor.from_request(request)
    form = ExpiryForm(request.POST or None)
    try:
        if request.method == "POST" and form.is_valid():
            outcome = _apply(request, actor, "expiry", expiry=form.chosen_expiry())
            when = expiry_text(form.chosen_expiry().resolve(timezone.now()), timezone.now())
            message = outcome.describe("expiry", when=when)
            return done(request, message, reverse("home"), dialogs.level_of(outcome))
        preview = _preview(request.POST if request.method == "POST" else request.GET, actor, "expiry")
    except ValidationError as exc:
        return _confirm(request, "expiry", None, error_messages(exc), form)
    return _confirm(request, "expiry", preview, [], form, status=422 if request.method == "POST" else 200)


def _preview(query, actor: Actor, action: str) -> services.Preview:
    """What a confirmation lists (listing nothing is refused)."""
    return services.preview_task_keys(actor=actor, action=action, sample=dialogs.SAMPLE, **params.task_target(query))


def _apply(request, actor: Actor, action: str, **options) -> services.Outcome:
    """``action`` on exactly the keys the confirmation listed (a change of none of them is refused)."""
    token = request.POST.get("listed", "")
    return services.apply_task_keys(
        actor=actor, action=action, token=token, **options, **params.task_target(request.POST)
    )


def _confirm(request, action: str, preview: services.Preview | None, errors: list[str], form=None, status: int = 200):
    """The confirmation of an action on several task keys; ``form``: the expiry's fields (``expiry``)."""
    refs = preview.listing.refs if preview and action == "delete" else 0
    context = {
        "run": preview.run if preview else None,
        "action": action,
        "errors": errors,
        **dialogs.confirmation_context(request, permissions.TASK, preview.listing if preview else None, refs),
        "selection": preview.selection if preview else None,
        "danger": action == "delete",
        "match": preview.selection.run_match if preview else None,
        "form": form,
        "now": timezone.now(),
    }
    return dialog(request, "actions/_task_confirm.html", context, status=422 if errors else status)
