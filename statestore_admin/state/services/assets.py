"""Writes to asset keys: set (recorded as written by the API, as Airflow's PUT does), delete of named
keys, and clear of an asset."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.access import policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import scope_of
from statestore_admin.airflow.models import Asset, AssetStateStore
from statestore_admin.audit import events as audit
from statestore_admin.core.errors import Conflict, Invalid, NotFound
from statestore_admin.core.values import clean_key, encode_value, same_value
from statestore_admin.state import selectors
from statestore_admin.state.services.confirmations import Listing, listed_chunks, outcome_of
from statestore_admin.state.services.outcomes import CREATE, UPDATE, UPSERT, Action, Outcome
from statestore_admin.state.services.rows import (
    API_WRITER_FIELDS,
    check_unchanged,
    delete_objects_of,
    deleted_chunks,
    holds_ref,
    locked_or_created,
    require_object_delete,
    state_of,
    unwritten,
)


def _asset_location(asset: Asset) -> dict:
    return {"asset_id": asset.pk, "asset_name": asset.name, "asset_uri": asset.uri}


def set_asset_key(
    *,
    actor: Actor,
    asset_id: int,
    key: str,
    value,
    mode: str = UPSERT,
    seen_updated_at: datetime | None = None,
    delete_object: bool = False,
) -> AssetStateStore:
    """Write an asset key, recorded as written by the API (as Airflow's PUT does). ``mode``: CREATE (add;
    an existing key is a Conflict), UPSERT (Airflow's PUT) or UPDATE (edit; a missing key is NotFound).
    The same value is not written (``written`` False): by an edit, whoever wrote it last; by a PUT, when
    the API wrote it last (otherwise the PUT records the API as its writer). ``delete_object`` (an edit): the
    worker-side object of the reference the value replaces is deleted after the row, as a delete does."""
    policies.require(actor, policies.ASSET, {CREATE: "add", UPDATE: "edit"}.get(mode, policies.SET))
    key = clean_key(key)
    text = encode_value(value)
    if delete_object:
        require_object_delete(actor, policies.ASSET, text)
    asset = selectors.get_asset(asset_id, scope=scope_of(actor))
    now = timezone.now()
    rows = AssetStateStore.objects.filter(asset_id=asset_id, key=key)
    action = Action.ADD if mode == CREATE else Action.PATCH if mode == UPDATE else Action.SET
    new = AssetStateStore(asset_id=asset_id, key=key, value=text, updated_at=now, **API_WRITER_FIELDS)
    may_add = mode != UPDATE and policies.allows(actor, policies.ASSET, "add")
    gone = NotFound(_("Asset with id %(id)s not found") % {"id": asset_id})
    with audit.change(actor, action, policies.ASSET, location=_asset_location(asset)) as recorder:
        row, created = locked_or_created(rows, new if may_add else None, gone)
        if row is not None and not created and mode == CREATE:
            raise Conflict(_("The key %(key)r already exists on this asset; edit it instead.") % {"key": key})
        if row is None and mode == UPDATE:
            message = _("Asset %(id)s has no key %(key)r: it may have been deleted.")
            raise NotFound(message % {"id": asset_id, "key": key})
        policies.require_write(actor, policies.ASSET, created=row is None or created)
        if created:
            before = None
        else:
            check_unchanged(row, seen_updated_at)
            by_api = all(getattr(row, name) == wanted for name, wanted in API_WRITER_FIELDS.items())
            if same_value(row.value, text) and (mode == UPDATE or by_api):
                return unwritten(row)
            before = state_of(row)
        change = audit.asset_change(
            asset_id, key, before=before, after=(text, None), limit=recorder.limit, before_row=None if created else row
        )
        recorder.record([change])
        if not created:
            rows.update(value=text, updated_at=now, **API_WRITER_FIELDS)
    row = selectors.get_asset_key(asset_id, key, scope=scope_of(actor))
    row.written = True
    row.objects = delete_objects_of(recorder) if delete_object else None
    return row


def asset_selection(asset_id: int, keys: list[str] | None = None) -> QuerySet:
    """An asset's keys, all or those named, by key: what a delete or clear acts on, and its confirmation
    lists."""
    rows = AssetStateStore.objects.filter(asset_id=asset_id)
    return (rows if keys is None else rows.filter(key__in=keys)).order_by("key")


def delete_asset_keys(*, actor: Actor, asset_id: int, keys: list[str], listed: Listing | None = None) -> Outcome:
    """Delete the named keys of an asset (absent ones are not an error, as in Airflow); after a
    confirmation, only the keys it ``listed``, as it listed them."""
    if not keys:
        raise Invalid({"keys": _("Select at least one key.")})
    return _delete_asset_rows(actor, asset_id, keys, listed, Action.DELETE)


def clear_asset(*, actor: Actor, asset_id: int, listed: Listing | None = None) -> Outcome:
    """Delete every key of an asset (clear its state); after a confirmation, only the keys it ``listed``,
    as it listed them."""
    return _delete_asset_rows(actor, asset_id, None, listed, Action.CLEAR)


def _delete_asset_rows(actor, asset_id: int, keys: list[str] | None, listed: Listing | None, action) -> Outcome:
    policies.require(actor, policies.ASSET, "clear" if action == Action.CLEAR else "delete")
    asset = selectors.get_asset(asset_id, scope=scope_of(actor))
    rows, others = asset_selection(asset_id, keys), []
    identity = ("asset_id", "key")
    holds_refs = False
    with audit.change(actor, action, policies.ASSET, location=_asset_location(asset)) as recorder:
        if listed is None:
            deleted = deleted_chunks(AssetStateStore, rows, identity)
        else:
            deleted = (
                part
                for chunk in listed_chunks(rows, "key", listed, others)
                for part in deleted_chunks(AssetStateStore, rows.filter(key__in=[r.key for r in chunk]), identity)
            )
        for chunk in deleted:
            recorder.record(
                [
                    audit.asset_change(
                        asset_id, r.key, before=state_of(r), after=None, limit=recorder.limit, before_row=r
                    )
                    for r in chunk
                ]
            )
            holds_refs = holds_refs or holds_ref(chunk)
    return outcome_of(recorder, listed, others, delete_objects_of(recorder) if holds_refs else None)
