"""The actions: a GET shows a form or a confirmation (a dialog for htmx, a page without JavaScript),
a POST calls one service. Success answers htmx with 204 and events (toast, refresh, close); bad input
answers 422 with the form and its messages; nothing is changed then.

Values are shown only to users who may ``view`` their store, whatever else they may do:

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

import json

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.http import HttpResponseNotFound
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from statestore_admin.access import permissions, policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import scope_of
from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.core import formatting
from statestore_admin.core.errors import Conflict, Invalid, NotFound
from statestore_admin.core.values import decode_json_text, pretty, stored_surrogate
from statestore_admin.dashboard import params as params_
from statestore_admin.dashboard.forms import (
    AddAssetKeyForm,
    AddTaskKeyForm,
    ExpiryForm,
    ValueForm,
    apply_errors,
    expiry_text,
)
from statestore_admin.dashboard.htmx import dialog as _dialog
from statestore_admin.dashboard.htmx import done as _done
from statestore_admin.dashboard.htmx import error_messages as _error_messages
from statestore_admin.dashboard.pages import invalid_page
from statestore_admin.dashboard.templatetags.page_links import coordinate_query
from statestore_admin.objects import store as objects
from statestore_admin.state import selectors, services
from statestore_admin.state.selectors import TaskAddress

SAMPLE = 50  # keys listed by a confirmation; the count covers them all


def _level(outcome: services.Outcome) -> str:
    """A delete whose worker-side objects could not all be deleted is done, with a warning: the rows stay
    deleted and the objects are orphans (``Outcome.describe`` names them)."""
    return "warning" if outcome.objects_failed else "success"


def _object_storage(refs: int) -> bool | None:
    """For a confirmation listing worker-side references: whether the dashboard has the object storage
    configured (it then deletes each object after its row), None when nothing is a reference."""
    return objects.storage() is not None if refs else None


def _form_action(request, form, template: str, context: dict, act):
    """A form in a dialog. On a valid POST, ``act()`` calls one service and returns (message, fallback URL);
    the service's Invalid, Conflict or NotFound is shown with the form (422) and nothing is changed."""
    if request.method == "POST" and form.is_valid():
        try:
            message, fallback = act()
        except ValidationError as exc:
            apply_errors(form, exc)
        except (Conflict, NotFound) as exc:
            form.add_error("value" if isinstance(exc, Conflict) and "value" in form.fields else None, str(exc))
        else:
            return _done(request, message, fallback)
    return _dialog(request, template, {**context, "form": form}, status=422 if request.method == "POST" else 200)


def _listed(request) -> services.Listing:
    """The keys the confirmation listed, as its form posts them back."""
    try:
        return services.Listing.from_token(request.POST.get("listed", ""))
    except ValidationError as exc:
        raise Invalid({NON_FIELD_ERRORS: exc.message_dict["listed"]}) from None


def _listing_context(listing: services.Listing) -> dict:
    """What a confirmation shows of its listing. The download link asks for the keys written up to the
    latest listed one (or now): every listed key, whatever the clock of its writer."""
    latest = max(filter(None, [listing.latest, timezone.now()]))
    # As text in UTC: the template would put a datetime in the reader's zone, which has no wall time for a
    # write at an end of the calendar (9999-12-31 23:59 UTC in UTC+14: OverflowError).
    export_until = formatting.iso(latest)
    return {
        "count": listing.count,
        "sample": list(listing.sample),
        "listed": listing.token,
        "export_until": export_until,
    }


def _saved(key, row) -> tuple[str, str]:
    """The toast of a saved value, and its level: with what became of the replaced reference's object when
    the user asked to delete it (a failure is a warning: the object is an orphan)."""
    message, deletes = f"Saved the value of {key.key!r}.", getattr(row, "objects", None)
    if deletes is None:
        return message, "success"
    if deletes.deleted:
        message += " Its worker-side object was deleted."
    elif deletes.missing:
        message += " Its worker-side object was already gone."
    return message + deletes.describe(), "warning" if deletes.failed_count else "success"


def _edit_value(request, template: str, fetch, save, fallback: str, store: str):
    """A value editor of the key ``fetch()`` reads; ``save(value, seen_updated_at, delete_object)`` calls the
    service. A key written since the editor opened is a conflict: the editor then shows its current value
    beside the user's, and offers to save the user's over that version or to keep it (no write). A key
    deleted meanwhile closes the dialog. A key holding a worker-side reference: the editor says that saving
    replaces it with an inline value and leaves its object behind, and offers (to who may delete) to delete
    that object too, after the row (``delete_object``)."""
    try:
        key = fetch()
    except NotFound:
        if request.method == "POST":
            return _gone(request)
        raise
    form = ValueForm(request.POST or None, initial={"value": pretty(key.value), "seen_updated_at": key.updated_at})
    conflict = None
    if request.method == "POST" and request.POST.get("keep") == "current":
        return _done(request, f"Kept the current value of {key.key!r}; nothing was written.", fallback)
    if request.method == "POST" and form.is_valid():
        try:
            row = save(
                decode_json_text(form.cleaned_data["value"]),
                form.cleaned_data.get("seen_updated_at"),
                request.POST.get("delete_object") == "1",
            )
        except ValidationError as exc:
            apply_errors(form, exc)
        except NotFound as exc:
            if not _still_there(fetch):
                return _gone(request)
            form.add_error(None, str(exc))  # e.g. its task instance is gone
        except Conflict as exc:
            current = exc.details[0]
            form = ValueForm({**request.POST.dict(), "seen_updated_at": current["updated_at"].isoformat()})
            form.is_valid()
            conflict = {"value": pretty(current["current"]), "updated_at": current["updated_at"]}
        else:
            if row.written:
                message, level = _saved(key, row)
                return _done(request, message, fallback, level)
            return _done(request, f"The value of {key.key!r} is unchanged: nothing was written.", fallback, "info")
    status = 422 if request.method == "POST" else 200
    reference = objects.classify(key.worker_ref, objects.storage()) if isinstance(key.worker_ref, str) else None
    context = {
        "key": key,
        "form": form,
        "conflict": conflict,
        "surrogate": stored_surrogate(key.value),
        "reference": reference,
        "may_delete_object": policies.allows(request.user, store, "delete_object"),
        "delete_object": request.POST.get("delete_object") == "1",
    }
    return _dialog(request, template, context, status=status)


def _still_there(fetch) -> bool:
    try:
        fetch()
    except NotFound:
        return False
    return True


def _gone(request):
    """The key was deleted while its editor was open (or is not the user's to see: the same answer):
    nothing is saved, and the dialog closes with the message (a 404, as for any key that is not there)."""
    message = "The key was deleted after you opened it: nothing was saved."
    if not request.htmx:
        raise NotFound(message)
    response = HttpResponseNotFound(message, content_type="text/plain; charset=utf-8")
    response["HX-Trigger"] = json.dumps({"closeModal": True, "stateChanged": True})
    return response


# Task keys ----------------------------------------------------------------------------------------
@require_http_methods(["GET", "POST"])
def task_key_edit(request, key_id):
    policies.require(request.user, permissions.TASK, "edit")

    def fetch():
        return selectors.get_task_key(key_id, scope=scope_of(request.user))

    def save(value, seen_updated_at, delete_object):
        return services.patch_task_key(
            actor=Actor.from_request(request),
            ref=services.TaskKeyRef(id=key_id),
            value=value,
            seen_updated_at=seen_updated_at,
            delete_object=delete_object,
        )

    fallback = reverse("task-key", args=[key_id])
    return _edit_value(request, "actions/_task_value.html", fetch, save, fallback, permissions.TASK)


@require_http_methods(["GET", "POST"])
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
        return f"{key.key!r} {expiry_text(row.expires_at, timezone.now())}.", reverse("task-key", args=[key.id])

    context = {"key": key, "now": timezone.now()}
    return _form_action(request, form, "actions/_task_expiry.html", context, save)


@require_http_methods(["GET", "POST"])
def task_key_add(request, run_pk, task_id):
    policies.require(request.user, permissions.TASK, "add")
    try:  # Airflow 3.4: the key goes to this region's task instance (the form's address keeps it)
        region_id = params_.region_id(request.GET) or SENTINEL_REGION_ID
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
        scope = TaskAddress(run.dag_id, run.run_id, task_id, form.cleaned_data["map_index"], region_id)
        try:
            row = services.set_task_key(
                actor=Actor.from_request(request),
                address=scope,
                key=form.cleaned_data["key"],
                value=decode_json_text(form.cleaned_data["value"]),
                expiry=form.chosen_expiry(),
                mode=services.CREATE,
            )
        except NotFound:  # the task instance went away since the form was shown
            raise Invalid({"map_index": f"The task instance {task_id} [{scope.map_index}] no longer exists."}) from None
        except Conflict as exc:
            raise Invalid({"key": str(exc)}) from None
        url = reverse("task-instance", args=[run.pk, task_id])
        return f"Added {row.key!r}.", f"{url}?{coordinate_query(row.map_index, region_id)}"

    context = {"run": run, "task_id": task_id, "region_id": region_id if region_id != SENTINEL_REGION_ID else None}
    return _form_action(request, form, "actions/_task_add.html", context, add)


# action: (button, toast verb); what each does is said in people's words by actions/_effect.html
TASK_ACTIONS = {"delete": ("Delete", "Deleted"), "expire": ("Expire", "Expired")}
# The bulk expiry's confirmation (task_keys_expiry): a form as well as a list, so not one of TASK_ACTIONS' URLs.
EXPIRY_ACTION = ("Set the expiry of", "Set the expiry of")


def _task_target(params) -> dict:
    """The keys a confirmation shows and posts, as the services take them: a task instance (``run``,
    ``task_id``, ``map_index`` or ``all``), a run's keys matching its page's filter (``in_run``, ``in_task``,
    ``key_prefix``) or key ids. An unknown run is a 404 like any page of it (the service's lookup, so a run
    that is not a number is one too); a map index or id that is not a number is Invalid."""
    if params.get("in_run"):
        return _run_match(params)
    if params.get("run"):
        map_index = params.get("map_index", "-1")
        target = {
            "run_pk": params_.integer(params, "run", 0),
            "task_id": params.get("task_id", ""),
            "map_index": None if map_index == "all" else params_.whole_number(map_index, "map_index"),
        }
        region_id = params_.region_id(params)  # Airflow 3.4: one region's task instance, or its every index
        return {**target, "region_id": region_id} if region_id is not None else target
    return {"ids": tuple(params_.whole_number(v, "ids") for v in params.getlist("ids"))}


def _run_match(params) -> dict:
    return {
        "in_run": params_.whole_number(params.get("in_run"), "in_run"),
        "in_task": params.get("in_task", ""),
        "key_prefix": params.get("key_prefix", ""),
    }


def task_selection(params, user) -> tuple[services.TaskSelection, object]:
    """The selection a confirmation's download reads (``audit_views.task_keys_export``): what the confirmation
    listed (``_task_target``), and its DAG run, in the user's scope."""
    return services.task_selection(scope=scope_of(user), **_task_target(params))


@require_http_methods(["GET", "POST"])
def task_keys_action(request, action):
    """Expire or delete task keys (a selection or a task instance's). The confirmation (GET) lists the
    keys, their value previews only for users who may view task state (see the module's docstring); the
    POST acts on exactly the keys it listed. A refusal shows the confirmation with why (422)."""
    if action not in TASK_ACTIONS:
        raise NotFound(f"No action {action!r} on task keys.")
    actor = Actor.from_request(request)
    try:
        if request.method == "POST":
            return _task_keys_apply(request, actor, action)
        preview = services.preview_task_keys(actor=actor, action=action, sample=SAMPLE, **_task_target(request.GET))
        if not preview.listing.count:
            raise services.nothing_to(action)
    except ValidationError as exc:
        return _task_keys_confirm(request, action, None, _error_messages(exc))
    return _task_keys_confirm(request, action, preview, [])


@require_http_methods(["GET", "POST"])
def task_keys_expiry(request):
    """Set the expiry of several task keys at once: the selected ones, or a run's keys matching its filter. The
    dialog lists them as the expire and delete confirmations do, with the expiry's fields; the POST sets that
    expiry on exactly the keys it listed, in one audited change that the audit trail can undo. A form with a
    mistake (a time that has passed, not confirmed) is shown again with a fresh list (422); nothing changes."""
    actor = Actor.from_request(request)
    form = ExpiryForm(request.POST or None)
    params = request.POST if request.method == "POST" else request.GET
    try:
        if request.method == "POST" and form.is_valid():
            outcome = services.apply_task_keys(
                actor=actor,
                action="expiry",
                token=request.POST.get("listed", ""),
                expiry=form.chosen_expiry(),
                **_task_target(request.POST),
            )
            if outcome.empty:
                raise services.nothing_to("change")
            when = expiry_text(form.chosen_expiry().resolve(timezone.now()), timezone.now())
            message = outcome.describe("Set the expiry of").removesuffix(".") + f": each {when}."
            return _done(request, message, reverse("home"), _level(outcome))
        preview = services.preview_task_keys(actor=actor, action="expiry", sample=SAMPLE, **_task_target(params))
        if not preview.listing.count:
            raise services.nothing_to("change")
    except ValidationError as exc:
        return _task_keys_confirm(request, "expiry", None, _error_messages(exc), form)
    return _task_keys_confirm(request, "expiry", preview, [], form, status=422 if request.method == "POST" else 200)


def _task_keys_apply(request, actor: Actor, action: str):
    outcome = services.apply_task_keys(
        actor=actor, action=action, token=request.POST.get("listed", ""), **_task_target(request.POST)
    )
    if outcome.empty:
        raise services.nothing_to(action)
    message = outcome.describe(TASK_ACTIONS[action][1])
    return _done(request, message, reverse("home"), _level(outcome), undo=outcome.event)


def _task_keys_confirm(
    request, action: str, preview: services.Preview | None, errors: list[str], form=None, status: int = 200
):
    """The confirmation of an action on several task keys; ``form``: the expiry's fields (``expiry``)."""
    label, _ = TASK_ACTIONS.get(action, EXPIRY_ACTION)
    shown = _listing_context(preview.listing) if preview else {"count": 0, "sample": []}
    refs = preview.listing.refs if preview and action == "delete" else 0
    context = {
        "run": preview.run if preview else None,
        "label": label,
        "action": action,
        "errors": errors,
        **shown,
        "selection": preview.selection if preview else None,
        "danger": action == "delete",
        "more": shown["count"] - len(shown["sample"]),
        "refs": refs,
        "object_storage": _object_storage(refs),
        "show_values": policies.allows(request.user, permissions.TASK, "view"),
        "match": preview.selection.run_match if preview else None,
        "form": form,
        "now": timezone.now(),
    }
    return _dialog(request, "actions/_task_confirm.html", context, status=422 if errors else status)


# Asset keys ---------------------------------------------------------------------------------------
@require_http_methods(["GET", "POST"])
def asset_key_edit(request, asset_id):
    policies.require(request.user, permissions.ASSET, "edit")
    name = request.GET.get("key", request.POST.get("key", ""))

    def fetch():
        return selectors.get_asset_key(asset_id, name, scope=scope_of(request.user))

    def save(value, seen_updated_at, delete_object):
        return services.set_asset_key(
            actor=Actor.from_request(request),
            asset_id=asset_id,
            key=name,
            value=value,
            mode=services.UPDATE,
            seen_updated_at=seen_updated_at,
            delete_object=delete_object,
        )

    fallback = reverse("asset-detail", args=[asset_id])
    return _edit_value(request, "actions/_asset_value.html", fetch, save, fallback, permissions.ASSET)


@require_http_methods(["GET", "POST"])
def asset_key_add(request, asset_id):
    policies.require(request.user, permissions.ASSET, "add")
    asset = selectors.get_asset(asset_id, scope=scope_of(request.user))
    form = AddAssetKeyForm(request.POST or None)

    def add():
        try:
            row = services.set_asset_key(
                actor=Actor.from_request(request),
                asset_id=asset_id,
                key=form.cleaned_data["key"],
                value=decode_json_text(form.cleaned_data["value"]),
                mode=services.CREATE,
            )
        except Conflict as exc:
            raise Invalid({"key": str(exc)}) from None
        return f"Added {row.key!r}.", reverse("asset-detail", args=[asset_id])

    return _form_action(request, form, "actions/_asset_add.html", {"asset": asset}, add)


@require_http_methods(["GET", "POST"])
def asset_keys_delete(request, asset_id):
    """Delete chosen keys of an asset, or clear all of its state (``all=1``). The confirmation lists the
    keys; their value previews only for users who may view asset state (see the module's docstring)."""
    params = request.POST if request.method == "POST" else request.GET
    keys = None if params.get("all") == "1" else params.getlist("keys")
    actor, errors = Actor.from_request(request), []
    try:
        if request.method == "POST":
            token = request.POST.get("listed", "")
            outcome, asset = services.apply_asset_keys(actor=actor, asset_id=asset_id, keys=keys, token=token)
            verb = "Cleared the state of asset " + repr(asset.name) + ": deleted" if keys is None else "Deleted"
            fallback = reverse("asset-detail", args=[asset_id])
            return _done(request, outcome.describe(verb), fallback, _level(outcome), undo=outcome.event)
        preview = services.preview_asset_keys(actor=actor, asset_id=asset_id, keys=keys, sample=SAMPLE)
        asset, shown, refs = preview.asset, _listing_context(preview.listing), preview.listing.refs
    except ValidationError as exc:
        # The dialog shows what went wrong beside the asset: an asset out of scope was NotFound already.
        asset = selectors.get_asset(asset_id, scope=scope_of(request.user))
        errors = _error_messages(exc)
        shown, refs = {"count": 0, "sample": []}, 0
    context = {
        "asset": asset,
        "keys": keys,
        "errors": errors,
        **shown,
        "more": shown["count"] - len(shown["sample"]),
        "refs": refs,
        "object_storage": _object_storage(refs),
        "show_values": policies.allows(request.user, permissions.ASSET, "view"),
    }
    return _dialog(request, "actions/_asset_confirm.html", context, status=422 if errors else 200)
