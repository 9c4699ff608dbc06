"""The audit trail: every change to the state store, from every face, as an ``AuditEvent`` with its keys.

The change happens in Airflow's database, the event in the dashboard's: two databases, no shared
transaction. The order makes sure no change exists without its event (docs/audit.md):

1. inside Airflow's transaction, the rows to change are locked and read (their *before* state); a key that
   does not exist yet is inserted instead, which locks it (``services.rows.locked_or_created``);
2. the event and those keys are written to the dashboard's database and committed, status *pending*;
3. the rows are changed; with ``AUDIT_TO_AIRFLOW_LOG`` a row is added to Airflow's ``log`` table;
   Airflow's transaction commits;
4. the event is confirmed (*done*), or marked *failed* if Airflow's transaction rolled back.

A crash between 2 and 4 leaves a pending event, shown as "outcome unknown" after a minute: the change
may or may not have been applied, but it is never missing from the trail. Large changes go through
steps 1–3 in chunks of ``CHUNK`` rows, so memory stays bounded whatever the number of keys.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from uuid import UUID

from django.conf import settings
from django.db import connections, router, transaction
from django.db.models import F
from django.utils import timezone

from statestore_admin.access.actors import Actor
from statestore_admin.airflow import rest
from statestore_admin.airflow.config import airflow_config
from statestore_admin.airflow.models import Asset, AssetStateStore, Log, TaskStateStore
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.core import formatting
from statestore_admin.records.models import AuditEvent, AuditKey

CHUNK = 200  # rows read, recorded and changed at a time
LOCATION_FIELDS = ("dag_id", "run_id", "task_id", "map_index", "region_id", "asset_id")
KeyState = tuple[str, datetime | None]  # (value text, expires_at) of a row that exists


def recorded_region(region_id: UUID | None) -> UUID | None:
    """How the audit trail records a task instance's region: NULL outside any region (Airflow's all-zero
    sentinel, and every task instance on 3.3), so that events recorded before and after the upgrade to
    3.4 name the same key the same way."""
    return None if region_id is None or region_id == SENTINEL_REGION_ID else region_id


def airflow_region(recorded: UUID | None) -> UUID:
    """The ``region_id`` of Airflow's row for a recorded region (``recorded_region``'s inverse)."""
    return SENTINEL_REGION_ID if recorded is None else recorded


# Airflow's columns that say who wrote an asset key last (the 3.4 ones read as None on 3.3).
WRITER_FIELDS = tuple(
    f.attname for f in AssetStateStore._meta.concrete_fields if f.attname.startswith("last_updated_by_")
)


def provenance(row) -> tuple[datetime | None, dict | None]:
    """Who wrote ``row`` last and when, as the audit trail keeps it for a restore to put back: its
    ``updated_at`` and, for an asset key, its ``WRITER_FIELDS`` (UUIDs as text; None for a task key, whose
    table has no writer columns)."""
    updated_at = getattr(row, "updated_at", None)
    if not hasattr(row, "last_updated_by_kind"):
        return updated_at, None
    writer = {name: getattr(row, name, None) for name in WRITER_FIELDS}
    return updated_at, {name: str(v) if isinstance(v, UUID) else v for name, v in writer.items()}


def event_entry(event: AuditEvent) -> dict:
    """An event as the API answers it and the audit download writes it (docs/api.md): the API adds its keys;
    ``token`` is the API token used (``{id, name}``), or None; ``signed_in`` how the user's session signed in."""
    return {
        "id": event.pk,
        "at": formatting.iso(event.at),
        "finished_at": formatting.iso(event.finished_at),
        "outcome": event.outcome,
        "actor": event.actor,
        "token": {"id": event.token_id, "name": event.token_name} if event.token_id is not None else None,
        "signed_in": event.signed_in,
        "os_user": event.os_user,
        "host": event.host,
        "via": event.via,
        "action": event.action,
        "store": event.store,
        "dag_id": event.dag_id,
        "run_id": event.run_id,
        "task_id": event.task_id,
        "map_index": event.map_index,
        "region_id": str(event.region_id) if event.region_id is not None else None,
        "asset_id": event.asset_id,
        "asset_name": event.asset_name,
        "asset_uri": event.asset_uri,
        "key_count": event.key_count,
        "details": event.details,
        "error": event.error,
        "restored_from": event.restored_from_id,
    }


# Fault injection for the crash tests: STATESTORE_FAULT_PAUSE="<step>:<marker file>" makes the process
# create the marker file and wait at that step (after_pending or after_change), so that a test can kill it.
FAULT_PAUSE_ENV = "STATESTORE_FAULT_PAUSE"


def _pause_if_asked(step: str) -> None:
    spec = os.environ.get(FAULT_PAUSE_ENV, "")
    if spec.startswith(step + ":"):
        Path(spec.split(":", 1)[1]).write_text(str(os.getpid()))
        time.sleep(120)


def _value_limit() -> int:
    try:
        return airflow_config().max_value_storage_bytes
    except Exception:  # an invalid option must not stop the audit: keep values whole
        return 0


def _clip(text: str | None, limit: int) -> tuple[str | None, bool]:
    if text is None or not limit or len(text) <= limit // 4 or len(text.encode()) <= limit:
        return text, False
    return text.encode()[:limit].decode(errors="ignore"), True


def key_change(
    *,
    key: str,
    before: KeyState | None,
    after: KeyState | None,
    dag_id: str | None = None,
    run_id: str | None = None,
    task_id: str | None = None,
    map_index: int | None = None,
    region_id: UUID | None = None,
    asset_id: int | None = None,
    row_id: int | None = None,
    limit: int = 0,
    before_row=None,
) -> AuditKey:
    """An (unsaved) AuditKey. ``before``/``after`` are (value, expires_at), or None where no row exists;
    ``region_id`` as Airflow has it (the sentinel, outside any region, is recorded as NULL); ``before_row``:
    the row as it was before the change, whose writer and time are kept (``provenance``)."""
    written_at, writer = provenance(before_row) if before is not None and before_row is not None else (None, None)
    before_value, clipped_before = _clip(before[0] if before else None, limit)
    after_value, clipped_after = _clip(after[0] if after else None, limit)
    return AuditKey(
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
        map_index=map_index,
        region_id=recorded_region(region_id),
        asset_id=asset_id,
        row_id=row_id,
        key=key,
        before_value=before_value,
        before_expires_at=before[1] if before else None,
        after_value=after_value,
        after_expires_at=after[1] if after else None,
        before_updated_at=written_at,
        before_writer=writer,
        truncated=clipped_before or clipped_after,
    )


def task_change(row, *, before: KeyState | None, after: KeyState | None, limit: int, before_row=None) -> AuditKey:
    """The change of a task key ``row`` (a TaskStateStore, or anything with its address fields: a restore's
    target; one without ``region_id`` is outside any region). ``before_row``: the row before the change
    (``row`` itself when it is a TaskStateStore)."""
    if before_row is None and isinstance(row, TaskStateStore):
        before_row = row
    return key_change(
        key=row.key,
        before=before,
        after=after,
        dag_id=row.dag_id,
        run_id=row.run_id,
        task_id=row.task_id,
        map_index=row.map_index,
        region_id=getattr(row, "region_id", None),
        row_id=getattr(row, "pk", None),
        limit=limit,
        before_row=before_row,
    )


def asset_change(
    asset_id: int, key: str, *, before: KeyState | None, after: KeyState | None, limit: int, before_row=None
) -> AuditKey:
    """The change of an asset key; ``before_row``: its row before the change (its writer and time are kept)."""
    return key_change(key=key, before=before, after=after, asset_id=asset_id, limit=limit, before_row=before_row)


class Recorder:
    """Collects one change's keys into one event; the event is created with the first keys recorded."""

    def __init__(
        self,
        actor: Actor,
        action: str,
        store: str,
        location: dict | None = None,
        details: dict | None = None,
        restored_from: AuditEvent | None = None,
    ):
        self.actor, self.action, self.store = actor, action, store
        self.location = dict(location or {})
        if "region_id" in self.location:  # a task address's event_location(): Airflow's value
            self.location["region_id"] = recorded_region(self.location["region_id"])
        self.details = dict(details or {})
        self.restored_from = restored_from
        self.event: AuditEvent | None = None
        self.count = 0
        self.limit = _value_limit()
        self._common: dict | None = None
        self._asset_names: dict[int, dict] = {}
        self._alias = router.db_for_write(AuditEvent)

    def record(self, keys: list[AuditKey]) -> None:
        """Write these keys (and the event, the first time) to the dashboard's database, committed,
        before the caller changes them in Airflow's database."""
        if not keys:
            return
        self._refine_location(keys)
        if self.event is None and connections[self._alias].vendor == "postgresql":
            self.event = _insert_event_with_keys(self._alias, {**self._event_fields(), **self._location()}, keys)
            self.count += len(keys)
            _pause_if_asked("after_pending")
            return
        with transaction.atomic(using=self._alias):
            if self.event is None:
                self.event = AuditEvent.objects.create(**self._event_fields(), **self._location(), key_count=len(keys))
            else:  # a pending event says how many keys it holds so far
                AuditEvent.objects.filter(pk=self.event.pk).update(key_count=F("key_count") + len(keys))
            for key in keys:
                key.event = self.event
            AuditKey.objects.bulk_create(keys)
        self.count += len(keys)
        _pause_if_asked("after_pending")

    def _refine_location(self, keys: list[AuditKey]) -> None:
        """The fields every key shares (a DAG, a run, a task instance, an asset) become the event's location.
        A task instance is its region and its index together: keys of several regions share no index."""
        for key in keys:
            values = {name: getattr(key, name) for name in LOCATION_FIELDS}
            if self._common is None:
                self._common = values
            else:
                if values["region_id"] != self._common["region_id"]:
                    self._common["map_index"] = None
                self._common = {n: v if values[n] == v else None for n, v in self._common.items()}

    def _location(self) -> dict:
        location = {name: value for name, value in (self._common or {}).items()}
        location.update({name: value for name, value in self.location.items() if value is not None})
        if location.get("dag_id") is None:  # a run or task without its DAG is no location
            location.update(run_id=None, task_id=None, map_index=None, region_id=None)
        if location.get("asset_id") is None:  # a name without its asset (keys of several) is no location
            location.pop("asset_name", None)
            location.pop("asset_uri", None)
        elif not location.get("asset_name"):  # an asset is recorded by its name too (the trail is read so)
            location.update(self._asset_named(location["asset_id"]))
        return location

    def _asset_named(self, asset_id: int) -> dict:
        """The asset's name and URI as the event records them (none when it no longer exists), read once."""
        if self._asset_names.get(asset_id) is None:
            asset = _api_asset(asset_id) if settings.AIRFLOW_API_MODE else None
            if not settings.AIRFLOW_API_MODE:
                asset = Asset.objects.filter(pk=asset_id).values("name", "uri").first()
            self._asset_names[asset_id] = {"asset_name": asset["name"], "asset_uri": asset["uri"]} if asset else {}
        return self._asset_names[asset_id]

    def _event_fields(self) -> dict:
        actor = self.actor
        return {
            "actor": actor.name[:255],
            "user": actor.user if actor.user is not None and actor.user.is_authenticated else None,
            "token_id": actor.token_id,
            "token_name": actor.token_name[:100],
            "signed_in": actor.signed_in[:200],
            "os_user": actor.os_user[:150],
            "host": actor.host[:255],
            "via": actor.via,
            "action": self.action,
            "store": self.store,
            "details": self.details,
            "restored_from": self.restored_from,
        }

    def mirror_to_airflow_log(self) -> None:
        """One row in Airflow's ``log`` table, inside Airflow's transaction (so only if the change commits)."""
        if not settings.AUDIT_TO_AIRFLOW_LOG or self.event is None:
            return
        location = self._location()
        summary = {"audit_event_id": self.event.pk, "via": self.actor.via, "store": self.store, "keys": self.count}
        if location.get("asset_id") is not None:
            summary["asset_id"] = location["asset_id"]
        if location.get("region_id") is not None:  # Airflow's log has a map_index column, no region
            summary["region_id"] = str(location["region_id"])
        if location.get("asset_name"):
            summary["asset_name"] = location["asset_name"]
        Log.objects.create(
            dttm=timezone.now(),
            dag_id=location.get("dag_id"),
            run_id=location.get("run_id"),
            task_id=location.get("task_id"),
            map_index=location.get("map_index"),
            event=f"statestore.{self.action}"[:60],
            owner=self.actor.name[:500],
            owner_display_name=self.actor.name[:500],
            extra=json.dumps(summary),
        )

    def finish(self, error: BaseException | None = None) -> None:
        """Confirm (or fail) the event, writing only what changed since it was created: most confirmations
        touch no indexed column, a cheap in-place update."""
        if self.event is None:
            return
        fields = {
            "finished_at": timezone.now(),
            "status": AuditEvent.Status.FAILED if error else AuditEvent.Status.DONE,
        }
        if error:
            fields["error"] = f"{type(error).__name__}: {error}"[:2000]
        if self.count != self.event.key_count:
            fields["key_count"] = self.count
        fields.update({name: value for name, value in self._location().items() if getattr(self.event, name) != value})
        _update_event(self._alias, self.event.pk, fields)
        for name, value in fields.items():
            setattr(self.event, name, value)


def _api_asset(asset_id: int) -> dict | None:
    """An asset's name and URI as Airflow's API gives them (None when it cannot: the event keeps the id alone)."""
    try:
        return rest.asset(rest.client(), asset_id)
    except rest.AirflowApiError:
        return None


def _update_event(alias: str, pk: int, fields: dict) -> None:
    """``UPDATE`` of an event's fields as one plain statement: the confirmation every change pays for."""
    connection = connections[alias]
    quote = connection.ops.quote_name
    model_fields = [AuditEvent._meta.get_field(name) for name in fields]
    assignments = ", ".join(f"{quote(f.column)} = %s" for f in model_fields)
    params = [f.get_db_prep_save(fields[f.name], connection) for f in model_fields]
    _execute(connection, f"UPDATE {quote(AuditEvent._meta.db_table)} SET {assignments} WHERE id = %s", [*params, pk])


def _execute(connection, sql: str, params: list):
    """One of the audit's own statements, through a plain cursor (no ORM: every change pays for these)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else None


_INSERT_EVENT_FIELDS = [f for f in AuditEvent._meta.concrete_fields if not f.primary_key]
_INSERT_KEY_FIELDS = [f for f in AuditKey._meta.concrete_fields if not f.primary_key and f.name != "event"]
_insert_statements: dict[tuple[str, int], str] = {}


def _insert_statement(connection, keys: int) -> str:
    """``WITH e AS (INSERT event RETURNING id) INSERT keys``, built once per number of keys."""
    statement = _insert_statements.get((connection.alias, keys))
    if statement is None:
        quote = connection.ops.quote_name

        def placeholders(fields) -> str:
            return "(" + ", ".join(f"%s::{f.db_type(connection)}" for f in fields) + ")"

        statement = (
            f"WITH e AS (INSERT INTO {quote(AuditEvent._meta.db_table)} "
            f"({', '.join(quote(f.column) for f in _INSERT_EVENT_FIELDS)}) "
            f"VALUES {placeholders(_INSERT_EVENT_FIELDS)} RETURNING id) "
            f"INSERT INTO {quote(AuditKey._meta.db_table)} ({quote('event_id')}, "
            f"{', '.join(quote(f.column) for f in _INSERT_KEY_FIELDS)}) "
            f"SELECT e.id, v.* FROM e, (VALUES {', '.join([placeholders(_INSERT_KEY_FIELDS)] * keys)}) AS v "
            f"RETURNING {quote('event_id')}"
        )
        _insert_statements[(connection.alias, keys)] = statement
    return statement


def _insert_event_with_keys(alias: str, fields: dict, keys: list[AuditKey]) -> AuditEvent:
    """The pending event and its first keys in one statement (one round trip, committed on its own) on
    PostgreSQL, where every change pays for it."""
    connection = connections[alias]
    event = AuditEvent(**fields, key_count=len(keys))
    params = [f.get_db_prep_save(f.pre_save(event, add=True), connection) for f in _INSERT_EVENT_FIELDS]
    for key in keys:
        params += [f.get_db_prep_save(f.pre_save(key, add=True), connection) for f in _INSERT_KEY_FIELDS]
    event.pk = _execute(connection, _insert_statement(connection, len(keys)), params)[0][0]
    for key in keys:
        key.event = event
    return event


@contextmanager
def change(actor: Actor, action: str, store: str, **event) -> Iterator[Recorder]:
    """Airflow's transaction for one audited change (``event``: ``Recorder``'s location, details and
    restored_from). The body locks and reads rows, calls ``recorder.record(...)`` with their changes, then
    changes them; see the module docstring for the order. Over Airflow's REST API (``AIRFLOW_API_MODE``) there
    is no transaction: the body records, then calls the API; an error of the API fails the event."""
    recorder = Recorder(actor, action, store, **event)
    try:
        if settings.AIRFLOW_API_MODE:  # no transaction of Airflow's to join: each API call is its own
            yield recorder
        else:
            with transaction.atomic(using=airflow_alias()):
                yield recorder
                recorder.mirror_to_airflow_log()
        _pause_if_asked("after_change")
    except BaseException as exc:
        recorder.finish(error=exc)
        raise
    recorder.finish()


# GC runs -------------------------------------------------------------------------------------------
def gc_started(actor: Actor, details: dict, dag_ids: tuple[str, ...] = ()) -> AuditEvent:
    """A GC run's event, pending until ``gc_finished``: counts, cutoff, scope and outcome, not the rows."""
    recorder = Recorder(actor, AuditEvent.Action.GC, "", details=details)
    return AuditEvent.objects.create(**recorder._event_fields(), dag_id=dag_ids[0] if len(dag_ids) == 1 else None)


def gc_finished(event: AuditEvent, *, rows_deleted: int, outcome: str, details: dict) -> None:
    failed = outcome == "failed"
    AuditEvent.objects.filter(pk=event.pk).update(
        status=AuditEvent.Status.FAILED if failed and not rows_deleted else AuditEvent.Status.DONE,
        finished_at=timezone.now(),
        key_count=rows_deleted,
        details={**event.details, **details, "outcome": outcome, "rows_deleted": rows_deleted},
    )


# Changes without keys: runs (orphan deletes, audit pruning) and API tokens ---------------------------
def run_started(actor: Actor, action: str, details: dict) -> AuditEvent:
    """A run's event, without keys, pending before its first delete until ``run_finished``."""
    return AuditEvent.objects.create(**Recorder(actor, action, "", details=details)._event_fields())


def run_finished(event: AuditEvent, *, details: dict, changed: bool, error: BaseException | None = None) -> None:
    """The run's counts; failed only when it stopped on an error before it ``changed`` anything."""
    fields = {
        "status": AuditEvent.Status.FAILED if error and not changed else AuditEvent.Status.DONE,
        "finished_at": timezone.now(),
        "details": {**event.details, **details},
    }
    if error is not None:
        fields["error"] = f"{type(error).__name__}: {error}"[:2000]
    AuditEvent.objects.filter(pk=event.pk).update(**fields)


def recorded(actor: Actor, action: str, details: dict) -> AuditEvent:
    """A change of the dashboard's own rows (an API token issued or revoked), done at once: the caller
    writes it in the change's transaction, on the same database."""
    fields = Recorder(actor, action, "", details=details)._event_fields()
    return AuditEvent.objects.create(**fields, status=AuditEvent.Status.DONE, finished_at=timezone.now())


# Orphan deletes ------------------------------------------------------------------------------------
def orphans_started(actor: Actor, details: dict) -> AuditEvent:
    """A ``state_store_orphans --delete`` run's event (action ``orphans``), pending before its first object
    delete until ``orphans_finished``: worker-side objects, no keys."""
    return run_started(actor, AuditEvent.Action.ORPHANS, details)


def orphans_finished(
    event: AuditEvent, *, deletion: dict, deleted_refs: list[str], error: BaseException | None = None
) -> None:
    """The run's counts (``orphans.Deletion.as_dict``), the first deleted references and the failures; failed
    only when it stopped on an error before deleting anything."""
    details = {**deletion, "deleted_refs": deleted_refs}
    run_finished(event, details=details, changed=bool(deletion["deleted"]), error=error)
