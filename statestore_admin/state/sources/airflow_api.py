"""The state store through Airflow's REST API (managed Airflow: no database connection).

Airflow's own routes do the reading and writing; the dashboard keeps its rules around them:
- the actor's permissions and access scope are checked first, as in the database source; Airflow then applies the
  token's own permissions on top (its 403 is ``AirflowRefused``: the token, not the user, may not);
- each change is recorded in the audit trail before Airflow is asked to make it, with the value it replaces (read
  from Airflow just before), so that it can be undone; a call that fails fails the event (a clear of every map
  index that Airflow refuses leaves no event: Airflow changed nothing, as when the dashboard refuses coordinates);
- a clear lists the keys first and deletes them one by one, so that a key written after the list is kept rather
  than deleted unrecorded (Airflow's own clear would take it too);
- Airflow's answers become the domain's errors: 404 ``NotFound``, 400 ``Unaddressable``, 409 ``Ambiguous``,
  422 ``Invalid``; no answer, 5xx, 429 or a refused token ``AirflowApiUnavailable`` (503).

What the API does not say is not guessed: worker-side objects behind a deleted reference are Airflow's business
here (its routes delete rows only), so an outcome reports no object deletes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from statestore_admin.access import policies
from statestore_admin.access.scopes import scope_of
from statestore_admin.airflow import rest
from statestore_admin.airflow.models import Asset, AssetStateStore, TaskStateStore
from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.audit import events as audit
from statestore_admin.core.errors import Ambiguous, Invalid, NotFound, Unaddressable
from statestore_admin.core.values import AT, NEVER, clean_key, encode_value, same_value
from statestore_admin.records.models import AuditEvent, AuditKey
from statestore_admin.state import api_errors
from statestore_admin.state.addresses import TaskAddress, instance_not_found
from statestore_admin.state.api_errors import translated
from statestore_admin.state.listing import (
    MAX_INSTANCES,
    AssetItem,
    DagItem,
    InstanceItem,
    Listing,
    RunItem,
    instance_order,
    page_of,
)
from statestore_admin.state.services.outcomes import Action, Outcome

PAGE = 100  # Airflow's largest page
MAX_CLEAR = 10_000  # keys one clear may list and delete one by one
MAX_LISTED = 2_000  # DAGs or assets read to cut a page of those an actor's scope keeps


def _at(text):
    return parse_datetime(text) if text else None


def _text(value) -> str:
    return json.dumps(value)


class ApiSource:
    def __init__(self, api: rest.AirflowApi):
        self.api = api

    def _call(self, method: str, path: str, *, params=None, body=None, expect=(200,)):
        return api_errors.call(self.api, method, path, params=params, json_body=body, expect=expect)

    # Task keys ---------------------------------------------------------------------------------------
    @staticmethod
    def _task_path(address, key: str | None = None) -> str:
        path = (
            f"/dags/{rest.segment(address.dag_id)}/dagRuns/{rest.segment(address.run_id)}"
            f"/taskInstances/{rest.segment(address.task_id)}/state-store"
        )
        return path if key is None else f"{path}/{rest.segment(key)}"

    @staticmethod
    def _coordinates(address) -> dict:
        """The address as Airflow's query parameters: as the request named it when Airflow is to resolve it, else
        a region and its index on 3.4, else the map index."""
        if getattr(address, "requested", ()):
            return dict(address.requested)
        if address.in_region:
            return {"region_id": str(address.region_id), "region_index": address.map_index}
        return {"map_index": address.map_index}

    def _task_row(self, address, item: dict) -> TaskStateStore:
        return TaskStateStore(
            **address.fields(),
            key=item["key"],
            value=_text(item["value"]),
            updated_at=_at(item.get("updated_at")),
            expires_at=_at(item.get("expires_at")),
        )

    def require_task_instance(self, address):
        """NotFound unless the task instance exists: Airflow's DELETE of a key no task writes answers 204, or its
        404 for a missing task instance, and deletes nothing."""
        self._call("DELETE", self._task_path(address, _probe_key()), params=self._coordinates(address), expect=(204,))

    def find_task_instance(self, address, *, scope):
        """NotFound unless the task instance exists, read from Airflow's list of the task's instances (what a page
        asks: ``require_task_instance`` deletes a key no task writes, which a read-only token may not)."""
        scope.require_dag(address.dag_id)
        if address not in self._instances_of_task(address):
            raise instance_not_found(address)

    def task_keys_page(self, address, offset, limit, *, scope):
        scope.require_dag(address.dag_id)
        params = {**self._coordinates(address), "offset": offset, "limit": min(limit, PAGE)}
        body = self._call("GET", self._task_path(address), params=params)
        return [self._task_row(address, item) for item in body["task_state_store"]], body["total_entries"]

    def _key(self, path: str, params=None) -> dict | None:
        """One key as Airflow's state route answers it; None when the key does not exist (any other 404, of a task
        instance or an asset, is NotFound)."""
        try:
            return self.api.request("GET", path, params=params)
        except rest.AirflowApiError as exc:
            if exc.status == 404 and "state store key" in exc.detail.lower():
                return None
            raise translated(exc) from None

    def _current_task_key(self, address, key: str, where=None) -> TaskStateStore | None:
        """The key at ``address`` as Airflow reads it, as a row at ``where`` (the address it resolves to)."""
        item = self._key(self._task_path(address, key), self._coordinates(address))
        return None if item is None else self._task_row(where or address, item)

    def _resolved(self, address) -> TaskAddress:
        """The task instance Airflow 3.4 resolves coordinates that leave its region or index open to, read from
        Airflow's task instance route (the same resolution as its state routes), so that the audit trail records
        where a change was made and an undo goes back there. The address itself when nothing is left open, or
        when Airflow does not say (its state routes then answer for the coordinates)."""
        requested = dict(getattr(address, "requested", ()))
        if not requested or "region_index" in requested:
            return address
        base = (
            f"/dags/{rest.segment(address.dag_id)}/dagRuns/{rest.segment(address.run_id)}"
            f"/taskInstances/{rest.segment(address.task_id)}"
        )
        path = base if address.map_index == -1 else f"{base}/{address.map_index}"
        try:
            found = self.api.request("GET", path, params={k: v for k, v in requested.items() if k != "map_index"})
        except rest.AirflowApiError:
            return address
        if not found.get("region_id"):
            return TaskAddress(address.dag_id, address.run_id, address.task_id, found["map_index"])
        region = uuid.UUID(found["region_id"])
        return TaskAddress(address.dag_id, address.run_id, address.task_id, found["region_index"], region)

    def task_key(self, address, key, *, scope):
        scope.require_dag(address.dag_id)
        row = self._current_task_key(address, key)
        if row is None:
            raise NotFound(_("Task state store key %(key)r not found") % {"key": key})
        return row

    def set_task_key(self, *, actor, address, key, value, expiry):
        policies.require(actor, policies.TASK, policies.SET)
        scope_of(actor).require_dag(address.dag_id)
        key, text = clean_key(key), encode_value(value)
        where = self._resolved(address)
        before = self._current_task_key(address, key, where)
        if before is None:  # a new key needs its task instance: refused before anything is recorded
            self.require_task_instance(address)
        policies.require_write(actor, policies.TASK, created=before is None)
        expires_at = expiry.resolve(timezone.now())
        if expiry.mode == NEVER:
            wire = None
        elif expiry.mode == AT:
            wire = expiry.at.isoformat()
        else:
            wire = "default"  # Airflow computes it from its own retention, which the dashboard may not know
        with self._change(actor, Action.SET, location=where.event_location()) as recorder:
            target = before or TaskStateStore(**where.fields(), key=key)
            recorder.record(
                [
                    audit.task_change(
                        target,
                        before=None if before is None else (before.value, before.expires_at),
                        after=(text, expires_at),
                        limit=recorder.limit,
                        before_row=before,
                    )
                ]
            )
            body = {"value": json.loads(text), "expires_at": wire}
            params = self._coordinates(address)
            self._call("PUT", self._task_path(address, key), params=params, body=body, expect=(204, 200))
            if wire == "default":  # Airflow's clock and retention made the expiry: the record keeps Airflow's
                self._record_expiry(recorder, address, key, expires_at)

    def _record_expiry(self, recorder, address, key: str, guessed) -> None:
        written = self._current_task_key(address, key)
        if written is not None and written.expires_at != guessed and recorder.event is not None:
            AuditKey.objects.filter(event=recorder.event, key=key).update(after_expires_at=written.expires_at)

    def patch_task_key(self, *, actor, address, key, value):
        policies.require(actor, policies.TASK, "edit")
        scope_of(actor).require_dag(address.dag_id)
        text = encode_value(value)
        where = self._resolved(address)
        before = self._current_task_key(address, key, where)
        if before is None:
            raise NotFound(_("Task state store key %(key)r not found") % {"key": key})
        if same_value(before.value, text):
            return
        with self._change(actor, Action.PATCH, location=where.event_location()) as recorder:
            state = (before.value, before.expires_at)
            recorder.record(
                [audit.task_change(before, before=state, after=(text, before.expires_at), limit=recorder.limit)]
            )
            self._call(
                "PATCH",
                self._task_path(address, key),
                params=self._coordinates(address),
                body={"value": json.loads(text)},
            )

    def delete_task_key(self, *, actor, address, key):
        policies.require(actor, policies.TASK, "delete")
        scope_of(actor).require_dag(address.dag_id)
        where = self._resolved(address)
        before = self._current_task_key(address, key, where)
        if before is None:  # Airflow's 204, or its 404 for a missing task instance
            self.require_task_instance(address)
            return Outcome(0)
        with self._change(actor, Action.DELETE, location=where.event_location()) as recorder:
            recorder.record(
                [audit.task_change(before, before=(before.value, before.expires_at), after=None, limit=recorder.limit)]
            )
            self._call("DELETE", self._task_path(address, key), params=self._coordinates(address), expect=(204,))
        return Outcome(recorder.count, event=recorder.event)

    def clear_task_instance(self, *, actor, address, all_map_indices):
        """Every key of the task instance, deleted one by one after they are recorded (a key written after they
        were listed is kept). With ``all_map_indices``, Airflow decides which indexes its clear takes (one task's
        expansion, or only the addressed index in a loop or a mapped task group): the keys of every index of the
        task in the address's region are recorded, Airflow clears, and the keys it kept are taken out of the
        record again."""
        policies.require(actor, policies.TASK, "clear")
        scope_of(actor).require_dag(address.dag_id)
        if all_map_indices:
            return self._clear_expansion(actor, address)
        where = self._resolved(address)
        rows = self._all_task_keys(address, where)
        if not rows:  # Airflow's answer for the task instance: 204, or 404 when it does not exist
            self.require_task_instance(address)
            return Outcome(0)
        with self._change(actor, Action.CLEAR, location=where.event_location()) as recorder:
            recorder.record(
                [audit.task_change(r, before=(r.value, r.expires_at), after=None, limit=recorder.limit) for r in rows]
            )
            params = self._coordinates(address)
            for row in rows:
                self._call("DELETE", self._task_path(address, row.key), params=params, expect=(204,))
        return Outcome(recorder.count, event=recorder.event)

    def _clear_expansion(self, actor, address) -> Outcome:
        candidates = self._instances_of_task(address)
        before = {c: self._all_task_keys(c) for c in candidates}
        rows = [row for found in before.values() for row in found]
        location = {k: v for k, v in address.event_location().items() if k != "map_index"}
        clear = {**self._coordinates(address), "all_map_indices": "true"}
        recorded = None
        try:
            with self._change(actor, Action.CLEAR, location=location, details={"all_map_indices": True}) as recorder:
                recorder.record(
                    [
                        audit.task_change(r, before=(r.value, r.expires_at), after=None, limit=recorder.limit)
                        for r in rows
                    ]
                )
                recorded = recorder.event
                self._call("DELETE", self._task_path(address), params=clear, expect=(204,))
                kept = [
                    (c, key)
                    for c, found in before.items()
                    if found
                    for key in {r.key for r in self._all_task_keys(c)} & {r.key for r in found}
                ]
                self._unrecord(recorder, kept)
        except (NotFound, Unaddressable, Ambiguous) as exc:
            # Airflow refused the coordinates and changed nothing: no change to keep a record of, as when the
            # dashboard refuses them itself.
            if recorded is not None:
                AuditEvent.objects.filter(pk=recorded.pk).delete()
            if isinstance(exc, NotFound) and not address.in_region:  # Airflow's words for every map index
                raise instance_not_found(address, "all_map_indices=True") from None
            raise
        return Outcome(recorder.count, event=recorder.event)

    def _unrecord(self, recorder, kept) -> None:
        """Take keys that a clear left in place out of its record: it did not change them."""
        if not kept or recorder.event is None:
            return
        for address, key in kept:
            AuditKey.objects.filter(
                event=recorder.event,
                key=key,
                task_id=address.task_id,
                map_index=address.map_index,
                region_id=audit.recorded_region(address.region_id),
            ).delete()
        recorder.count -= len(kept)

    def _instances_of_task(self, address) -> list[TaskAddress]:
        """The task's task instances in the run, as Airflow lists them: in the address's region, or when it names
        none (Airflow resolves which), in every region."""
        path = f"/dags/{rest.segment(address.dag_id)}/dagRuns/{rest.segment(address.run_id)}/taskInstances"
        found, offset = [], 0
        while True:
            params = {"task_id": address.task_id, "limit": PAGE, "offset": offset}
            body = self._call("GET", path, params=params)
            page = body.get("task_instances", [])
            for item in page:
                region = item.get("region_id")
                region_id = uuid.UUID(region) if region else SENTINEL_REGION_ID
                if address.in_region and region_id != address.region_id:
                    continue
                index = item.get("region_index") if region else item.get("map_index")
                found.append(TaskAddress(address.dag_id, address.run_id, address.task_id, index, region_id))
            offset += len(page)
            if not page or offset >= body.get("total_entries", 0) or offset > MAX_CLEAR:
                return sorted(set(found), key=lambda a: a.map_index)

    def _all_task_keys(self, address, where=None) -> list[TaskStateStore]:
        rows: list[TaskStateStore] = []
        while True:
            params = {**self._coordinates(address), "offset": len(rows), "limit": PAGE}
            body = self._call("GET", self._task_path(address), params=params)
            page = [self._task_row(where or address, item) for item in body["task_state_store"]]
            rows += page
            if not page or len(rows) >= body["total_entries"]:
                return rows
            if len(rows) > MAX_CLEAR:
                raise Invalid({"keys": _("More than %(n)s keys: clear them in Airflow.") % {"n": MAX_CLEAR}})

    # Asset keys --------------------------------------------------------------------------------------
    def _asset(self, asset_id: int, scope) -> dict:
        return api_errors.api_asset(self.api, asset_id, scope)

    @staticmethod
    def _asset_path(asset_id: int, key: str | None = None) -> str:
        path = f"/assets/{int(asset_id)}/state-store"
        return path if key is None else f"{path}/{rest.segment(key)}"

    @staticmethod
    def _asset_row(asset: dict, item: dict) -> AssetStateStore:
        writer = item.get("last_updated_by") or {}
        row = AssetStateStore(
            asset=Asset(id=asset["id"], name=asset.get("name"), uri=asset.get("uri")),
            key=item["key"],
            value=_text(item["value"]),
            updated_at=_at(item.get("updated_at")),
            last_updated_by_kind=writer.get("kind"),
            last_updated_by_dag_id=writer.get("dag_id"),
            last_updated_by_run_id=writer.get("run_id"),
            last_updated_by_task_id=writer.get("task_id"),
            last_updated_by_map_index=writer.get("map_index"),
        )
        for name in ("task_instance_id", "region_id", "region_index", "try_number"):
            setattr(row, f"last_updated_by_{name}", writer.get(name))
        return row

    def asset_keys_page(self, asset_id, offset, limit, *, scope):
        asset = self._asset(asset_id, scope)
        body = self._call("GET", self._asset_path(asset_id), params={"offset": offset, "limit": min(limit, PAGE)})
        return [self._asset_row(asset, item) for item in body["asset_state_store"]], body["total_entries"]

    def _current_asset_key(self, asset: dict, key: str) -> AssetStateStore | None:
        item = self._key(self._asset_path(asset["id"], key))
        return None if item is None else self._asset_row(asset, item)

    def asset_key(self, asset_id, key, *, scope):
        asset = self._asset(asset_id, scope)
        row = self._current_asset_key(asset, key)
        if row is None:
            raise NotFound(_("Asset state store key %(key)r not found") % {"key": key})
        return row

    def _asset_location(self, asset: dict) -> dict:
        return {"asset_id": asset["id"], "asset_name": asset.get("name"), "asset_uri": asset.get("uri")}

    def set_asset_key(self, *, actor, asset_id, key, value):
        policies.require(actor, policies.ASSET, policies.SET)
        key, text = clean_key(key), encode_value(value)
        asset = self._asset(asset_id, scope_of(actor))
        before = self._current_asset_key(asset, key)
        policies.require_write(actor, policies.ASSET, created=before is None)
        with self._change(actor, Action.SET, store=policies.ASSET, location=self._asset_location(asset)) as recorder:
            recorder.record(
                [
                    audit.asset_change(
                        asset_id,
                        key,
                        before=None if before is None else (before.value, None),
                        after=(text, None),
                        limit=recorder.limit,
                        before_row=before,
                    )
                ]
            )
            self._call("PUT", self._asset_path(asset_id, key), body={"value": json.loads(text)}, expect=(204, 200))

    def delete_asset_key(self, *, actor, asset_id, key):
        policies.require(actor, policies.ASSET, "delete")
        asset = self._asset(asset_id, scope_of(actor))
        before = self._current_asset_key(asset, key)
        if before is None:
            return Outcome(0)
        with self._change(actor, Action.DELETE, store=policies.ASSET, location=self._asset_location(asset)) as recorder:
            recorder.record(
                [
                    audit.asset_change(
                        asset_id, key, before=(before.value, None), after=None, limit=recorder.limit, before_row=before
                    )
                ]
            )
            self._call("DELETE", self._asset_path(asset_id, key), expect=(204,))
        return Outcome(recorder.count, event=recorder.event)

    def clear_asset(self, *, actor, asset_id):
        policies.require(actor, policies.ASSET, "clear")
        asset = self._asset(asset_id, scope_of(actor))
        rows: list[AssetStateStore] = []
        while True:
            body = self._call("GET", self._asset_path(asset_id), params={"offset": len(rows), "limit": PAGE})
            page = [self._asset_row(asset, item) for item in body["asset_state_store"]]
            rows += page
            if not page or len(rows) >= body["total_entries"] or len(rows) > MAX_CLEAR:
                break
        if not rows:
            return Outcome(0)
        with self._change(actor, Action.CLEAR, store=policies.ASSET, location=self._asset_location(asset)) as recorder:
            recorder.record(
                [
                    audit.asset_change(
                        asset_id, r.key, before=(r.value, None), after=None, limit=recorder.limit, before_row=r
                    )
                    for r in rows
                ]
            )
            for row in rows:
                self._call("DELETE", self._asset_path(asset_id, row.key), expect=(204,))
        return Outcome(recorder.count, event=recorder.event)

    # Browsing ----------------------------------------------------------------------------------------
    def _everything(self, path: str, field: str, params: dict, limit: int = MAX_LISTED) -> list[dict]:
        """Every item of one of Airflow's lists (at most ``limit``), a page of ``PAGE`` at a time."""
        found: list[dict] = []
        while len(found) < limit:
            body = self._call("GET", path, params={**params, "offset": len(found), "limit": PAGE})
            found += body[field]
            if not body[field] or len(found) >= body["total_entries"]:
                break
        return found[:limit]

    def _listed(self, path, field, params, offset, limit, keep, item) -> Listing:
        """A page of one of Airflow's lists; when the actor's scope keeps only some of its items (``keep``),
        the page is cut from the whole list as kept (at most ``MAX_LISTED`` items read)."""
        if keep is None:
            body = self._call("GET", path, params={**params, "offset": offset, "limit": min(limit, PAGE)})
            return Listing([item(i) for i in body[field]], body["total_entries"], offset, limit)
        return page_of([item(i) for i in self._everything(path, field, params) if keep(i)], offset, limit)

    def dags(self, contains, offset, limit, *, scope):
        params = {"order_by": "dag_id", **({"dag_id_pattern": contains} if contains else {})}
        keep = None if scope.all_dags else lambda i: scope.allows_dag(i["dag_id"])
        return self._listed("/dags", "dags", params, offset, limit, keep, _dag_item)

    def dag_runs(self, dag_id, offset, limit, *, scope):
        scope.require_dag(dag_id)
        path = f"/dags/{rest.segment(dag_id)}/dagRuns"
        return self._listed(path, "dag_runs", {"order_by": ["-run_after", "-run_id"]}, offset, limit, None, _run_item)

    def dag_run(self, dag_id, run_id, *, scope):
        scope.require_dag(dag_id)
        return _run_item(self._call("GET", f"/dags/{rest.segment(dag_id)}/dagRuns/{rest.segment(run_id)}"))

    def run_instances(self, dag_id, run_id, *, scope):
        # No request for the run itself: Airflow's list answers 404 for a run that does not exist (NotFound), and
        # the callers (a run's page, a key's story across runs) have the run already.
        scope.require_dag(dag_id)
        path = f"/dags/{rest.segment(dag_id)}/dagRuns/{rest.segment(run_id)}/taskInstances"
        found = self._everything(path, "task_instances", {}, MAX_INSTANCES)
        return sorted((_instance_item(dag_id, run_id, i) for i in found), key=instance_order)

    def assets(self, contains, offset, limit, *, scope):
        params = {"order_by": "id", **({"name_pattern": contains} if contains else {})}
        keep = None if scope.all_assets else lambda i: scope.allows_asset(i.get("name"), i.get("uri"))
        return self._listed("/assets", "assets", params, offset, limit, keep, _asset_item)

    def asset(self, asset_id, *, scope):
        return _asset_item(self._asset(asset_id, scope))

    # Restore (exports.restore plans and records; these read and write each key) ----------------------------
    def reachable_assets(self, scope, asset_ids) -> set[int]:
        """The ids of the assets that exist in Airflow and that ``scope`` reaches."""
        found = set()
        for asset_id in asset_ids:
            try:
                self._asset(asset_id, scope)
            except NotFound:
                continue
            found.add(asset_id)
        return found

    def locate(self, store: str, targets, assets: set[int]):
        """Each target's current key (a row, or None) and why it cannot be restored ("" when it can)."""
        for target in targets:
            if store == policies.ASSET:
                if target.asset_id not in assets:
                    yield None, _("the asset with id %(id)s no longer exists") % {"id": target.asset_id}
                else:
                    yield self._current_asset_key({"id": target.asset_id}, target.key), ""
                continue
            address = _address_of(target)
            try:
                self.require_task_instance(address)
            except NotFound:
                message = _("the task instance of %(key)r in %(dag_id)r / %(run_id)r no longer exists")
                yield None, message % {"key": target.key, "dag_id": target.dag_id, "run_id": target.run_id}
                continue
            yield self._current_task_key(address, target.key), ""

    def put_back(self, target) -> None:
        """Write ``target.state`` (delete the key when it is None) through Airflow's routes."""
        if target.store == policies.ASSET:
            path = self._asset_path(target.asset_id, target.key)
            if target.state is None:
                self._call("DELETE", path, expect=(204,))
            else:
                self._call("PUT", path, body={"value": json.loads(target.state[0])}, expect=(204, 200))
            return
        address = _address_of(target)
        path, params = self._task_path(address, target.key), self._coordinates(address)
        if target.state is None:
            self._call("DELETE", path, params=params, expect=(204,))
            return
        value, expires_at = target.state
        body = {"value": json.loads(value), "expires_at": expires_at.isoformat() if expires_at else None}
        self._call("PUT", path, params=params, body=body, expect=(204, 200))

    @contextmanager
    def _change(self, actor, action, *, store=policies.TASK, location=None, details=None) -> Iterator:
        with audit.change(actor, action, store, location=location, details=details) as recorder:
            yield recorder


def _dag_item(item: dict) -> DagItem:
    return DagItem(item["dag_id"], bool(item.get("is_paused")))


def _run_item(item: dict) -> RunItem:
    return RunItem(
        item["dag_id"],
        item["dag_run_id"],
        item.get("state"),
        item.get("run_type") or "",
        _at(item.get("logical_date")),
        _at(item.get("run_after")),
    )


def _instance_item(dag_id: str, run_id: str, item: dict) -> InstanceItem:
    """A task instance as Airflow lists it: on 3.4, one in a region by its region and index there."""
    region = item.get("region_id")
    if region:
        address = TaskAddress(dag_id, run_id, item["task_id"], item["region_index"], uuid.UUID(region))
    else:
        address = TaskAddress(dag_id, run_id, item["task_id"], item["map_index"])
    return InstanceItem(address, item.get("state"), item.get("try_number") or 0)


def _asset_item(item: dict) -> AssetItem:
    return AssetItem(item["id"], item.get("name") or "", item.get("uri") or "", item.get("group") or "")


def _probe_key() -> str:
    """A key no task writes: deleting it asks Airflow only whether the task instance exists (204 or 404)."""
    return f"statestore-admin:probe:{uuid.uuid4()}"


def _address_of(target) -> TaskAddress:
    return TaskAddress(target.dag_id, target.run_id, target.task_id, target.map_index, target.region_id)
