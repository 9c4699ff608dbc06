"""The actions of the browsing pages (``views.browse``): add, edit, expire and delete a key, and clear a task
instance or an asset, addressed by Airflow's names. Each goes through ``state.sources.current()``, so it is the
same change, with the same checks and audit trail, whether Airflow's database or its REST API serves the
deployment. A GET shows the form or the confirmation (a dialog to htmx, a page otherwise), a POST does it.

An edit or an expiry carries the version of the key it was opened on (``seen_updated_at``): when the key changed
since, nothing is written and the form says so, since writing would lose the other change.
"""

from django import forms
from django.core.exceptions import ValidationError
from django.http import Http404
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from statestore_admin.access import permissions, policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import scope_of
from statestore_admin.core.errors import Invalid, NotFound
from statestore_admin.core.values import decode_json_text, pretty
from statestore_admin.dashboard.actions import dialogs
from statestore_admin.dashboard.actions.forms import (
    AddAssetKeyForm,
    ExpiryFields,
    ExpiryForm,
    NewKeyFields,
    ValueForm,
    apply_errors,
    expiry_text,
)
from statestore_admin.dashboard.http.addresses import address_of, address_query, task_url
from statestore_admin.dashboard.http.fragments import fragment
from statestore_admin.dashboard.http.htmx import dialog, done
from statestore_admin.state import sources

TASK_OPS = ("add", "edit", "expire", "delete", "clear")  # each is also its permission (policies.STORE_ACTIONS)
ASSET_OPS = ("add", "edit", "delete", "clear")


class AddTaskKeyForm(NewKeyFields, ExpiryFields):
    field_order = ["key", "keep_blanks", "value", "expiry", "expires_at", "confirm_past"]


class ConfirmForm(forms.Form):
    pass


def _unchanged(form, row) -> None:
    """Invalid when the key changed since the form was opened on it."""
    seen = form.cleaned_data.get("seen_updated_at")
    if seen is not None and row.updated_at is not None and seen != row.updated_at:
        raise Invalid({"value": _("The key changed since you opened it: reload to see its new value.")})


def _form(op: str, data, row, *, task: bool):
    if op == "add":
        return (AddTaskKeyForm if task else AddAssetKeyForm)(data)
    initial = {"seen_updated_at": row.updated_at} if row is not None else {}
    if op == "edit":
        return ValueForm(data, initial={**initial, "value": pretty(row.value)})
    if op == "expire":
        form = ExpiryForm(data, initial=initial)
        form.show_expiry(row.expires_at)
        return form
    return ConfirmForm(data)


@require_http_methods(["GET", "POST"])
@fragment(gettext_lazy("Task key"))
def task_action(request, op):
    if op not in TASK_OPS:
        raise Http404(op)
    policies.require(request.user, permissions.TASK, op)
    try:
        address = address_of(request)
    except Invalid as exc:
        raise NotFound(" ".join(m for ms in exc.message_dict.values() for m in ms)) from None
    source, scope, actor = sources.current(), scope_of(request.user), Actor.from_request(request)
    name = request.GET.get("key", "")
    source.find_task_instance(address, scope=scope)  # the scope first: out of it, not this user's to know
    row = source.task_key(address, name, scope=scope) if op in ("edit", "expire", "delete") else None
    form = _form(op, request.POST if request.method == "POST" else None, row, task=True)

    def act():
        if op == "add":
            key = form.cleaned_data["key"]
            expiry = form.chosen_expiry()
            value = decode_json_text(form.cleaned_data["value"])
            source.set_task_key(actor=actor, address=address, key=key, value=value, expiry=expiry)
            return _("Added %(key)s.") % {"key": repr(key)}, task_url(address), None
        if op in ("edit", "expire"):
            current = source.task_key(address, name, scope=scope)
            _unchanged(form, current)
        if op == "edit":
            value = decode_json_text(form.cleaned_data["value"])
            source.patch_task_key(actor=actor, address=address, key=name, value=value)
            return _("Saved %(key)s.") % {"key": repr(name)}, task_url(address), None
        if op == "expire":
            expiry = form.chosen_expiry()
            value = decode_json_text(current.value)
            source.set_task_key(actor=actor, address=address, key=name, value=value, expiry=expiry)
            at = expiry.resolve(timezone.now())
            return f"{name!r} {expiry_text(at, timezone.now())}.", task_url(address), None
        if op == "delete":
            outcome = source.delete_task_key(actor=actor, address=address, key=name)
        else:
            outcome = source.clear_task_instance(actor=actor, address=address, all_map_indices=False)
        return outcome.describe("deleted"), task_url(address), outcome

    context = {
        "op": op,
        "address": address,
        "row": row,
        "action": f"{reverse('browse-task-action', args=[op])}?{address_query(address, **_key(name))}",
    }
    return _act(request, form, context, act)


@require_http_methods(["GET", "POST"])
@fragment(gettext_lazy("Asset key"))
def asset_action(request, asset_id, op):
    if op not in ASSET_OPS:
        raise Http404(op)
    policies.require(request.user, permissions.ASSET, op)
    source, scope, actor = sources.current(), scope_of(request.user), Actor.from_request(request)
    asset = source.asset(asset_id, scope=scope)
    name = request.GET.get("key", "")
    row = source.asset_key(asset_id, name, scope=scope) if op in ("edit", "delete") else None
    form = _form(op, request.POST if request.method == "POST" else None, row, task=False)
    back = reverse("browse-asset", args=[asset_id])

    def act():
        if op in ("add", "edit"):
            key = form.cleaned_data["key"] if op == "add" else name
            if op == "edit":
                _unchanged(form, source.asset_key(asset_id, name, scope=scope))
            value = decode_json_text(form.cleaned_data["value"])
            source.set_asset_key(actor=actor, asset_id=asset_id, key=key, value=value)
            done_text = _("Added %(key)s.") if op == "add" else _("Saved %(key)s.")
            return done_text % {"key": repr(key)}, back, None
        if op == "delete":
            outcome = source.delete_asset_key(actor=actor, asset_id=asset_id, key=name)
            return outcome.describe("deleted"), back, outcome
        outcome = source.clear_asset(actor=actor, asset_id=asset_id)
        return outcome.describe("cleared", asset=asset.name), back, outcome

    query = f"?{urlencode(_key(name))}" if name else ""
    context = {
        "op": op,
        "asset": asset,
        "row": row,
        "action": reverse("browse-asset-action", args=[asset_id, op]) + query,
    }
    return _act(request, form, context, act)


def _act(request, form, context, act):
    """``dialogs.form_action`` for these actions. ``act`` returns its message, where to go back to, and the
    outcome of a delete or a clear (None for the others), which answers with its level and its undo."""
    if request.method == "POST" and form.is_valid():
        try:
            message, fallback, outcome = act()
        except ValidationError as exc:
            apply_errors(form, exc)
        except NotFound as exc:
            form.add_error(None, str(exc))
        else:
            if outcome is None:
                return done(request, message, fallback)
            return done(request, message, fallback, dialogs.level_of(outcome), undo=outcome.event)
    status = 422 if request.method == "POST" else 200
    return dialog(request, "browse/_action.html", {**context, "form": form}, status=status)


def _key(name: str) -> dict:
    return {"key": name} if name else {}
