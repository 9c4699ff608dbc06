"""Confirmed actions on many keys as the pages take them: ``preview_task_keys`` lists the task keys an
expire, delete or expiry change would take (for its confirmation), ``apply_task_keys`` acts on exactly the keys
that listing listed (a selection of key ids, a task instance's keys, or a run's keys matching its page's filter,
within ``LISTED_MAX``); ``preview_asset_keys`` and ``apply_asset_keys`` do the same for an asset's delete or clear.
Each checks the permission, the actor's scope and the selection itself, so that a face parses its input,
makes one call and renders the answer."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.core.exceptions import NON_FIELD_ERRORS
from django.utils.translation import gettext as _

from statestore_admin.access import policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import Scope, scope_of
from statestore_admin.airflow.models import Asset, DagRun
from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.core.errors import Invalid, NotFound
from statestore_admin.core.values import Expiry
from statestore_admin.state import selectors
from statestore_admin.state.addresses import TaskAddress
from statestore_admin.state.services.assets import asset_selection, clear_asset, delete_asset_keys
from statestore_admin.state.services.confirmations import Listing, list_keys
from statestore_admin.state.services.outcomes import Outcome
from statestore_admin.state.services.tasks import (
    RunMatch,
    TaskSelection,
    clear_task_instance,
    delete_task_keys,
    expire_task_keys,
    set_task_keys_expiry,
)

# What each action on task keys needs, and does to a selection of key ids.
TASK_KEY_ACTIONS = {
    "delete": ("delete", delete_task_keys),
    "expire": ("expire", expire_task_keys),
    "expiry": ("expire", set_task_keys_expiry),
}


@dataclass(frozen=True)
class Preview:
    """What a confirmation shows: the keys listed (``Listing``, its ``sample`` in the order shown), the
    selection they were listed from, and the DAG run of a task instance's or a run's keys (None for key ids)."""

    listing: Listing
    selection: TaskSelection
    run: DagRun | None = None


def task_selection(
    *,
    scope: Scope,
    run_pk: int | None = None,
    task_id: str = "",
    map_index: int | None = -1,
    ids: tuple[int, ...] = (),
    region_id: UUID = SENTINEL_REGION_ID,
    in_run: int | None = None,
    in_task: str = "",
    key_prefix: str = "",
) -> tuple[TaskSelection, DagRun | None]:
    """A task instance's keys (``run_pk``, ``task_id``; ``map_index`` None: every map index), a run's keys
    (``in_run``: of ``in_task`` or every task, starting with ``key_prefix``) or key ids, and the DAG run of a
    task instance or a run: what a confirmation lists, acts on and downloads. An unknown DAG run, or one out of
    ``scope``, is NotFound."""
    if in_run is not None:
        run = selectors.get_run(in_run, scope=scope)
        return TaskSelection(run_match=RunMatch(run.dag_id, run.run_id, in_task, key_prefix)), run
    if run_pk is None:
        return TaskSelection(ids=ids), None
    run = selectors.get_run(run_pk, scope=scope)
    every = map_index is None
    address = TaskAddress(run.dag_id, run.run_id, task_id, -1 if every else map_index, region_id)
    return TaskSelection.of_instance(address, all_map_indices=every), run


def _task_selection(actor: Actor, action: str, **target) -> tuple[TaskSelection, DagRun | None]:
    """``task_selection`` for ``action``, which the actor must be allowed."""
    if action not in TASK_KEY_ACTIONS:
        raise NotFound(_("No action %(action)r on task keys.") % {"action": action})
    policies.require(actor, policies.TASK, TASK_KEY_ACTIONS[action][0])
    return task_selection(scope=scope_of(actor), **target)


def _instance_gone(exc: NotFound) -> Invalid:
    """A task instance that is not there (or went away) is the confirmation's error, not a missing page."""
    return Invalid({NON_FIELD_ERRORS: str(exc)})


def preview_task_keys(*, actor: Actor, action: str, sample: int = 0, **target) -> Preview:
    """List the task keys ``action`` ("expire", "delete" or "expiry") would take of the ``target``
    (``task_selection``'s arguments), by task, map index and key, the first ``sample`` with previews
    (``list_keys``). A DAG run not found is NotFound; a task instance not found, no key ids, or no key there,
    is Invalid."""
    selection, run = _task_selection(actor, action, **target)
    try:
        rows = selection.queryset(scope_of(actor))
    except NotFound as exc:
        raise _instance_gone(exc) from None
    listing = list_keys(rows.order_by("task_id", "map_index", "key"), sample=sample)
    if not listing.count:
        raise nothing_to(action)
    return Preview(listing, selection, run)


def apply_task_keys(*, actor: Actor, action: str, token: str, expiry: Expiry | None = None, **target) -> Outcome:
    """Expire, delete or set the ``expiry`` of exactly the keys the confirmation listed (``preview_task_keys``;
    ``token``: its ``Listing.token``), as it listed them. A delete of a task instance's keys is its clear.
    Errors as ``preview_task_keys``; a damaged token, or none of the listed keys changed, kept or gone, is
    Invalid."""
    selection, _ = _task_selection(actor, action, **target)
    try:
        listed = Listing.from_token(token)
    except Invalid as exc:
        raise Invalid({NON_FIELD_ERRORS: exc.message_dict["listed"]}) from None
    try:
        if action == "delete" and selection.address is not None:
            outcome = clear_task_instance(
                actor=actor, address=selection.address, all_map_indices=selection.all_map_indices, listed=listed
            )
        elif action == "expiry":
            outcome = set_task_keys_expiry(actor=actor, selection=selection, expiry=expiry, listed=listed)
        else:
            outcome = TASK_KEY_ACTIONS[action][1](actor=actor, selection=selection, listed=listed)
    except NotFound as exc:
        raise _instance_gone(exc) from None
    if outcome.empty:
        raise nothing_to(action)
    return outcome


@dataclass(frozen=True)
class AssetPreview:
    """What an asset's delete (chosen keys) or clear (every key) confirmation shows: the keys it would take
    and the asset."""

    listing: Listing
    asset: Asset


def _asset_to_delete_from(actor: Actor, asset_id: int) -> Asset:
    policies.require(actor, policies.ASSET, "delete")
    return selectors.get_asset(asset_id, scope=scope_of(actor))


def nothing_to(action: str) -> Invalid:
    """An action on no keys is refused (the pages disable it): the confirmation, and a POST that found none.
    An expiry set on no key changes nothing."""
    message = {
        "expire": _("There are no keys to expire: nothing was changed."),
        "delete": _("There are no keys to delete: nothing was changed."),
    }.get(action, _("There are no keys to change: nothing was changed."))
    return Invalid({NON_FIELD_ERRORS: message})


def preview_asset_keys(*, actor: Actor, asset_id: int, keys: list[str] | None, sample: int = 0) -> AssetPreview:
    """List the keys of the asset that deleting ``keys`` (None: clearing every key) would take, the first
    ``sample`` with previews. No key chosen, or none there, is Invalid; an asset out of scope is NotFound."""
    asset = _asset_to_delete_from(actor, asset_id)
    if keys == []:
        raise Invalid({"keys": _("Select at least one key.")})
    listing = list_keys(asset_selection(asset.pk, keys), sample=sample)
    if not listing.count:
        raise nothing_to("delete")
    return AssetPreview(listing, asset)


def apply_asset_keys(*, actor: Actor, asset_id: int, keys: list[str] | None, token: str) -> tuple[Outcome, Asset]:
    """Delete exactly the keys the confirmation listed (``token``: its ``Listing.token``), as it listed them;
    ``keys`` None clears the asset. A damaged token, or nothing left to delete, is Invalid."""
    asset = _asset_to_delete_from(actor, asset_id)
    try:
        listed = Listing.from_token(token)
    except Invalid as exc:
        raise Invalid({NON_FIELD_ERRORS: exc.message_dict["listed"]}) from None
    if keys is None:
        outcome = clear_asset(actor=actor, asset_id=asset.pk, listed=listed)
    else:
        outcome = delete_asset_keys(actor=actor, asset_id=asset.pk, keys=keys, listed=listed)
    if outcome.empty:
        raise nothing_to("delete")
    return outcome, asset
