"""What the actions' dialogs share: a form in a dialog (``form_action``), the value editor (``edit_value``) and
what a confirmation shows of the keys it lists (``confirmation_context``).

Values are shown only to users who may ``view`` their store (the rules: ``actions.task_keys``' docstring).
"""

import json
from functools import partial

from django.core.exceptions import ValidationError
from django.http import HttpResponseNotFound
from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.access import policies
from statestore_admin.access.actors import Actor
from statestore_admin.core import formatting
from statestore_admin.core.errors import Conflict, Invalid, NotFound
from statestore_admin.core.values import decode_json_text, pretty, stored_surrogate
from statestore_admin.dashboard.actions.forms import ValueForm, apply_errors
from statestore_admin.dashboard.http.htmx import dialog, done
from statestore_admin.objects import store as objects
from statestore_admin.state import services

SAMPLE = 50  # keys listed by a confirmation; the count covers them all


def level_of(outcome: services.Outcome) -> str:
    """A delete whose worker-side objects could not all be deleted is done, with a warning: the rows stay
    deleted and the objects are orphans (``Outcome.describe`` names them)."""
    return "warning" if outcome.objects_failed else "success"


def _object_storage(refs: int) -> bool | None:
    """For a confirmation listing worker-side references: whether the dashboard has the object storage
    configured (it then deletes each object after its row), None when nothing is a reference."""
    return objects.storage() is not None if refs else None


def form_action(request, form, template: str, context: dict, act):
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
            return done(request, message, fallback)
    return dialog(request, template, {**context, "form": form}, status=422 if request.method == "POST" else 200)


def add_key(form, set_key, **target):
    """Create the key an add dialog's valid ``form`` names with ``set_key`` (``services.set_task_key`` or
    ``set_asset_key``, given the actor and the key's task or asset); a key that exists already is an error of
    the form's key field."""
    try:
        return set_key(
            **target,
            key=form.cleaned_data["key"],
            value=decode_json_text(form.cleaned_data["value"]),
            mode=services.CREATE,
        )
    except Conflict as exc:
        raise Invalid({"key": str(exc)}) from None


def confirmation_context(request, store: str, listing: services.Listing | None, refs: int) -> dict:
    """What a confirmation shows of the keys it lists (``listing``; None when it is refused, saying why
    instead): the count, a sample, with values only to users who may view ``store``, and ``refs``, how many are
    worker-side references whose objects the action deletes too. The download link asks for the keys written
    up to the latest listed one (or now): every listed key, whatever the clock of its writer."""
    shown = {"count": 0, "sample": []}
    if listing is not None:
        latest = max(filter(None, [listing.latest, timezone.now()]))
        shown = {
            "count": listing.count,
            "sample": list(listing.sample),
            "listed": listing.token,
            # As text in UTC: the template would put a datetime in the reader's zone, which has no wall time for a
            # write at an end of the calendar (9999-12-31 23:59 UTC in UTC+14: OverflowError).
            "export_until": formatting.iso(latest),
        }
    return {
        **shown,
        "more": shown["count"] - len(shown["sample"]),
        "refs": refs,
        "object_storage": _object_storage(refs),
        "show_values": policies.allows(request.user, store, "view"),
    }


def _saved(key, row) -> tuple[str, str]:
    """The toast of a saved value, and its level: with what became of the replaced reference's object when
    the user asked to delete it (a failure is a warning: the object is an orphan)."""
    deletes, names = getattr(row, "objects", None), {"key": repr(key.key)}
    if deletes is None:
        return _("Saved the value of %(key)s.") % names, "success"
    if deletes.deleted:
        message = _("Saved the value of %(key)s. Its worker-side object was deleted.") % names
    elif deletes.missing:
        message = _("Saved the value of %(key)s. Its worker-side object was already gone.") % names
    else:
        message = _("Saved the value of %(key)s.") % names
    return message + deletes.describe(), "warning" if deletes.failed_count else "success"


def edit_value(request, store: str, template: str, fetch, save: partial, fallback: str):
    """The value editor of a key of ``store``, which ``fetch()`` reads; ``save`` is the service that writes it
    (with the key named), called with the actor, the value, the version the editor opened
    (``seen_updated_at``) and ``delete_object``. A key written since the editor opened is a conflict: the
    editor then shows its current value beside the user's, and offers to save the user's over that version or
    to keep it (no write). A key deleted meanwhile closes the dialog. A key holding a worker-side reference:
    the editor says that saving replaces it with an inline value and leaves its object behind, and offers (to
    who may delete) to delete that object too, after the row (``delete_object``)."""
    policies.require(request.user, store, "edit")
    try:
        key = fetch()
    except NotFound:
        if request.method == "POST":
            return _gone(request)
        raise
    form = ValueForm(request.POST or None, initial={"value": pretty(key.value), "seen_updated_at": key.updated_at})
    conflict = None
    if request.method == "POST" and request.POST.get("keep") == "current":
        return done(
            request, _("Kept the current value of %(key)s; nothing was written.") % {"key": repr(key.key)}, fallback
        )
    if request.method == "POST" and form.is_valid():
        try:
            row = save(
                actor=Actor.from_request(request),
                value=decode_json_text(form.cleaned_data["value"]),
                seen_updated_at=form.cleaned_data.get("seen_updated_at"),
                delete_object=request.POST.get("delete_object") == "1",
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
                return done(request, message, fallback, level)
            message = _("The value of %(key)s is unchanged: nothing was written.") % {"key": repr(key.key)}
            return done(request, message, fallback, "info")
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
    return dialog(request, template, context, status=status)


def _still_there(fetch) -> bool:
    try:
        fetch()
    except NotFound:
        return False
    return True


def _gone(request):
    """The key was deleted while its editor was open (or is not the user's to see: the same answer):
    nothing is saved, and the dialog closes with the message (a 404, as for any key that is not there)."""
    message = _("The key was deleted after you opened it: nothing was saved.")
    if not request.htmx:
        raise NotFound(message)
    response = HttpResponseNotFound(message, content_type="text/plain; charset=utf-8")
    response["HX-Trigger"] = json.dumps({"closeModal": True, "stateChanged": True})
    return response
