"""Restore: an audit event's keys to their state before it (``restore_event``), or an export's keys to the
state in the file (``restore_document``). A restore plans with the rows locked (``plan``: what to write and
the conflicts), then applies each store's plan in one audited change.

A task key is restored onto its exact coordinates: its run, task, region and index. A key recorded outside
any region (every key on Airflow 3.3) goes to the sentinel region, where Airflow's migration to 3.4 keeps
the rows of 3.3 with their map_index as region_index: what was recorded before the upgrade restores onto
the same key after it. A region that does not exist, or belongs to another run, is ``Invalid`` before
anything changes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from statestore_admin.access import permissions, policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import Scope, scope_of
from statestore_admin.airflow import rest
from statestore_admin.airflow.models import AssetStateStore, DagRun, DynamicRegion, TaskStateStore, column_of
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.versions import schema_of
from statestore_admin.audit import events as audit
from statestore_admin.core import formatting
from statestore_admin.core.errors import Conflict, Forbidden, Invalid
from statestore_admin.core.values import stored_surrogate
from statestore_admin.exports.documents import Target, parse_document
from statestore_admin.objects import store as objects
from statestore_admin.records.models import AuditEvent
from statestore_admin.state import selectors, sources
from statestore_admin.state.addresses import TaskAddress
from statestore_admin.state.services.outcomes import Action
from statestore_admin.state.services.rows import insert_if_absent, state_of

KEEP, OVERWRITE = "keep", "overwrite"
RUNS_A_QUERY = 100  # (dag_id, run_id) pairs looked up in one query


@dataclass
class RestoreOutcome:
    restored: int = 0
    unchanged: int = 0
    kept: list[dict] = field(default_factory=list)  # conflicts the operator chose to keep
    missing: list[dict] = field(default_factory=list)  # DAG run or asset gone: nothing restored for them
    events: list[AuditEvent] = field(default_factory=list)
    dangling: list[str] = field(default_factory=list)  # restored references whose objects no longer exist

    def as_dict(self) -> dict:
        """The outcome as every face answers it (the API's documented shape, docs/api.md): ``events`` are
        the ids of the restore's own audit events, one per store."""
        return {
            "restored": self.restored,
            "unchanged": self.unchanged,
            "kept": self.kept,
            "missing": self.missing,
            "events": [event.pk for event in self.events],
        }

    def describe(self) -> str:
        restored = ngettext("Restored %(count)s key", "Restored %(count)s keys", self.restored)
        parts = [restored % {"count": self.restored}]
        if self.unchanged:
            parts.append(_("%(count)s already as recorded") % {"count": self.unchanged})
        if self.kept:
            parts.append(_("%(count)s kept as they are now") % {"count": len(self.kept)})
        if self.missing:
            missing = {"count": len(self.missing), "reason": self.missing[0]["reason"]}
            parts.append(_("%(count)s not restored: %(reason)s") % missing)
        if self.dangling:
            parts.append(self._dangling())
        return "; ".join(parts) + "."

    def _dangling(self) -> str:
        n = len(self.dangling)
        words = {"count": n, "ref": self.dangling[0]}
        if n >= objects.FAILED_NAMED:  # only the first ones were looked for
            return (
                ngettext(
                    "%(count)s or more restored reference points at a worker-side object that no longer exists "
                    "(deleted after its row), e.g. %(ref)s: tasks read no value there",
                    "%(count)s or more restored references point at a worker-side object that no longer exists "
                    "(deleted after its row), e.g. %(ref)s: tasks read no value there",
                    n,
                )
                % words
            )
        return (
            ngettext(
                "%(count)s restored reference points at a worker-side object that no longer exists (deleted after its "
                "row), e.g. %(ref)s: tasks read no value there",
                "%(count)s restored references point at a worker-side object that no longer exists (deleted after its "
                "row), e.g. %(ref)s: tasks read no value there",
                n,
            )
            % words
        )


def restore_event(
    *, actor: Actor, event_id: int, overwrite: bool = False, resolutions: dict[str, str] | None = None
) -> RestoreOutcome:
    """Bring the event's keys back to their state before it (value and ``expires_at``).

    A key written again after the event is a conflict: nothing is restored and ``Conflict`` lists both
    values, unless ``overwrite`` or ``resolutions`` (AuditKey id → KEEP / OVERWRITE) decide. Keys whose
    DAG run or asset no longer exists are reported in ``missing`` and not restored.
    """
    event = selectors.get_audit_event(event_id, scope=scope_of(actor))
    if not event.restorable:
        reason = {
            Action.GC: _("Garbage collection follows Airflow's rules and is not restorable."),
            Action.ORPHANS: _("Deleted orphans were objects without rows: there is nothing to restore."),
            Action.PRUNE: _("Pruned audit events are not restored: the prune only records its counts."),
            Action.TOKEN: _("An issued API token is not a key: revoke it instead."),
            Action.REVOKE: _("A revoked API token stays revoked: create a new one instead."),
            Action.GRANT: _("A granted access scope is not a key: revoke it instead."),
            Action.UNGRANT: _("A revoked access scope is not a key: grant it again instead."),
        }.get(event.action, _("This change failed and changed nothing: there is nothing to restore."))
        raise Invalid({"event": reason})
    _require_few_enough(actor, event.key_count, "event", f"--event {event.pk}")
    targets = []
    for key in event.keys.all().iterator(chunk_size=audit.CHUNK):
        if key.truncated:
            message = _("The recorded value of %(key)r is truncated; it cannot be restored.")
            raise Invalid({"event": message % {"key": key.key}})
        surrogate = stored_surrogate(key.before_value) if key.before_value is not None else None
        if surrogate:  # restored, it would be a value that no write of the dashboard may make
            message = _("The recorded value of %(key)r holds %(surrogate)s; lone surrogates cannot be restored.")
            raise Invalid({"event": message % {"key": key.key, "surrogate": surrogate}})
        targets.append(
            Target(
                store=event.store,
                key=key.key,
                state=(key.before_value, key.before_expires_at) if key.before_value is not None else None,
                expected=(key.after_value, key.after_expires_at) if key.after_value is not None else None,
                dag_id=key.dag_id,
                run_id=key.run_id,
                task_id=key.task_id,
                map_index=key.map_index,
                region_id=audit.airflow_region(key.region_id),
                asset_id=key.asset_id,
                ident=str(key.pk),
                updated_at=key.before_updated_at,
                writer=key.before_writer,
            )
        )
    return _restore(actor, targets, overwrite, resolutions or {}, restored_from=event)


def restore_document(*, actor: Actor, document, overwrite: bool = False) -> RestoreOutcome:
    """Restore the keys of an export (``exports.parse_document``): each key gets the value and expiry in
    the file. A key that exists with another value is a conflict unless ``overwrite``."""
    targets = parse_document(document)
    _require_few_enough(actor, len(targets), "file", "FILE")
    return _restore(actor, targets, overwrite, {}, restored_from=None)


PREVIEW_LISTED = 20  # keys a file's preview lists, each with what the restore would do to it


@dataclass
class RestorePreview:
    """What restoring a file would do, planned as the restore plans (rows locked, nothing written): the
    number of keys per store, the first keys with what would happen to each (``will``: "restore", "unchanged",
    "conflict" or "missing"), and the counts of each."""

    total: int
    stores: dict[str, int]
    listed: list[dict]
    counts: dict[str, int]
    conflicts: list[dict]


def preview_document(*, actor: Actor, document, overwrite: bool = False) -> RestorePreview:
    """``restore_document`` planned, not applied: the same refusals (permissions, scope, regions, limits)."""
    targets = parse_document(document)
    _require_few_enough(actor, len(targets), "file", "FILE")
    groups, scope = _checked_groups(actor, targets, "file")
    result, planned, conflicts = RestoreOutcome(), set(), []
    with _planning():
        for store, group in groups.items():
            plan, found = _plan(store, group, overwrite, {}, scope, result)
            planned.update(id(target) for target, _, _ in plan)
            conflicts.extend(found)
    conflicting = {c["id"] for c in conflicts}
    missing = {m["id"]: m["reason"] for m in result.missing}
    listed = []
    for target in targets[:PREVIEW_LISTED]:
        will = (
            "restore"
            if id(target) in planned
            else "conflict"
            if target.ident in conflicting
            else "missing"
            if target.ident in missing
            else "unchanged"
        )
        entry = {**target.describe(), "will": will, "reason": missing.get(target.ident, "")}
        entry["value"] = target.state[0] if target.state else None
        listed.append(entry)
    counts = {"restore": len(planned), "unchanged": result.unchanged, "conflict": len(conflicts)}
    counts["missing"] = len(result.missing)
    stores = {store: len(group) for store, group in groups.items()}
    return RestorePreview(len(targets), stores, listed, counts, conflicts)


def _require_few_enough(actor: Actor, count: int, field: str, argument: str) -> None:
    """A page or an API request restores at most ``RESTORE_MAX_KEYS`` keys, so that one request holds a
    worker (and the rows it locks) for seconds, not minutes; ``state_store_restore``, which no request
    waits for, has no limit."""
    limit = settings.RESTORE_MAX_KEYS
    if actor.is_system or count <= limit:
        return
    message = _(
        "This restore holds %(count)s keys; a restore from a page or the API holds at most %(limit)s "
        "(RESTORE_MAX_KEYS). Nothing was restored: run `manage.py state_store_restore %(argument)s` on the "
        "server, which has no limit."
    )
    raise Invalid({field: message % {"count": count, "limit": limit, "argument": argument}})


def _same(current: audit.KeyState | None, wanted: audit.KeyState | None, store: str) -> bool:
    if current is None or wanted is None:
        return current is wanted
    return current[0] == wanted[0] and (store == permissions.ASSET or current[1] == wanted[1])


def _checked_groups(actor, targets: list[Target], field: str) -> tuple[dict[str, list[Target]], Scope]:
    """The targets by store, once the actor may restore them all (permissions, scope, regions; refusals
    named ``field``, as the restore's others are: the event, or the file), and the actor's scope."""
    groups = {store: [t for t in targets if t.store == store] for store in (permissions.TASK, permissions.ASSET)}
    groups = {store: group for store, group in groups.items() if group}
    for store in groups:
        policies.require(actor, store, "restore")
    scope = scope_of(actor)
    _require_in_scope(scope, targets)
    _require_regions([t for t in groups.get(permissions.TASK, ()) if t.in_region], field)
    return groups, scope


def _restore(actor, targets: list[Target], overwrite: bool, resolutions: dict, restored_from) -> RestoreOutcome:
    groups, scope = _checked_groups(actor, targets, "event" if restored_from else "file")
    # Every store is checked before any is changed: a conflict anywhere restores nothing anywhere.
    with _planning():
        conflicts = [
            c for store, group in groups.items() for c in _plan(store, group, overwrite, resolutions, scope)[1]
        ]
    _raise_conflicts(conflicts)
    result = RestoreOutcome()
    for store, group in groups.items():
        _restore_store(actor, store, group, overwrite, resolutions, restored_from, scope, result)
    if result.restored:
        result.dangling = objects.missing_objects(t.state[0] for t in targets if t.state is not None)
    return result


def _planning():
    """Where a restore plans: inside Airflow's transaction, its rows locked; over Airflow's REST API there is none
    (each key is read, then written, as the API allows)."""
    return nullcontext() if rest.api_mode() else transaction.atomic(using=airflow_alias())


def _require_in_scope(allowed: Scope, targets: list[Target]) -> None:
    """Every task key to restore is of a DAG in scope: otherwise nothing is restored. (A DAG is in scope by
    its id, whether it exists or not; an asset out of scope is not restored as if it were missing, so that
    no answer tells it from one that does not exist: ``_reachable_assets``.)"""
    if not allowed.restricted:
        return
    outside = sorted({t.dag_id for t in targets if t.store == permissions.TASK and not allowed.allows_dag(t.dag_id)})
    if outside:
        message = _("Nothing was restored: you do not have access to %(dags)s.")
        raise Forbidden(message % {"dags": ", ".join(map(str, outside[:5]))})


def _require_regions(targets: list[Target], field: str) -> None:
    """Every region the targets name exists, in the targets' own DAG run: ``Invalid`` naming the first that
    does not (nothing is restored). Airflow 3.3 has no regions at all."""
    if not targets or rest.api_mode():  # over Airflow's API, its PUT answers 404 for a region that is gone
        return
    schema = schema_of(connections[airflow_alias()])
    first = targets[0]
    if not schema.regions:
        message = _(
            "Nothing was restored: %(key)r belongs to region %(region)s of %(dag_id)r / %(run_id)r, and %(airflow)s "
            "has no regions."
        )
        words = {"key": first.key, "region": first.region_id, "dag_id": first.dag_id, "run_id": first.run_id}
        raise Invalid({field: message % {**words, "airflow": schema.name}})
    wanted = sorted({t.region_id for t in targets})
    runs = {}
    for start in range(0, len(wanted), audit.CHUNK):
        chunk = wanted[start : start + audit.CHUNK]
        runs.update(
            (r, (d, run))
            for r, d, run in DynamicRegion.objects.filter(pk__in=chunk).values_list("pk", "dag_id", "run_id")
        )
    for target in targets:
        found = runs.get(target.region_id)
        words = {"region": target.region_id, "key": target.key, "dag_id": target.dag_id, "run_id": target.run_id}
        if found is None:
            message = _(
                "Nothing was restored: region %(region)s of %(key)r does not exist (any more) in %(dag_id)r / "
                "%(run_id)r."
            )
            raise Invalid({field: message % words})
        if found != (target.dag_id, target.run_id):
            message = _(
                "Nothing was restored: region %(region)s of %(key)r belongs to %(other_dag_id)r / "
                "%(other_run_id)r, not to %(dag_id)r / %(run_id)r."
            )
            raise Invalid({field: message % {**words, "other_dag_id": found[0], "other_run_id": found[1]}})


def _reachable_assets(allowed: Scope, targets: list[Target]) -> set[int]:
    """The ids of the targets' assets that exist and are in scope; the others are reported as missing."""
    wanted = sorted({t.asset_id for t in targets if t.store == permissions.ASSET})
    if rest.api_mode():
        return sources.current().reachable_assets(allowed, wanted)
    found: set[int] = set()
    for start in range(0, len(wanted), audit.CHUNK):
        ids = wanted[start : start + audit.CHUNK]
        found.update(selectors.scoped_assets(allowed).filter(pk__in=ids).values_list("pk", flat=True))
    return found


def _raise_conflicts(conflicts: list[dict]) -> None:
    if conflicts:
        message = ngettext(
            "%(count)s key was written again since; nothing was restored. Choose per key, or overwrite.",
            "%(count)s keys were written again since; nothing was restored. Choose per key, or overwrite.",
            len(conflicts),
        )
        raise Conflict(message % {"count": len(conflicts)}, conflicts)


def _plan(store, targets, overwrite, resolutions, scope: Scope, result: RestoreOutcome | None = None):
    """What a restore would do, with the rows locked (inside Airflow's transaction): the (target, row, current
    state) to write, and the conflicts; missing, unchanged and kept keys are counted in ``result``."""
    result = result or RestoreOutcome()
    conflicts, plan = [], []
    assets = _reachable_assets(scope, targets) if store == permissions.ASSET else set()
    for target, (row, missing) in zip(targets, _locate(store, targets, assets), strict=True):
        if missing:
            result.missing.append({**target.describe(), "reason": missing})
            continue
        current = state_of(row) if row is not None else None
        if _same(current, target.state, store):
            result.unchanged += 1
            continue
        if not _same(current, target.expected, store):
            choice = OVERWRITE if overwrite else resolutions.get(target.ident)
            if choice == KEEP:
                result.kept.append(target.describe())
                continue
            if choice != OVERWRITE:
                conflicts.append(
                    {**target.describe(), "current": _state_dict(current), "restore": _state_dict(target.state)}
                )
                continue
        plan.append((target, row, current))
    return plan, conflicts


def _restore_store(
    actor, store, targets, overwrite, resolutions, restored_from, scope: Scope, result: RestoreOutcome
) -> None:
    with audit.change(actor, Action.RESTORE, store, restored_from=restored_from) as recorder:
        plan, conflicts = _plan(store, targets, overwrite, resolutions, scope, result)
        _raise_conflicts(conflicts)  # written between the check and now
        for start in range(0, len(plan), audit.CHUNK):
            chunk = plan[start : start + audit.CHUNK]
            recorder.record([_restore_change(t, row, current, recorder.limit) for t, row, current in chunk])
            for target, row, _ in chunk:
                _apply(target, row)
    result.restored += recorder.count
    if recorder.event is not None:
        result.events.append(recorder.event)


def _state_dict(state: audit.KeyState | None) -> dict | None:
    if state is None:
        return None
    return {"value": state[0], "expires_at": formatting.iso(state[1])}


def _locate(store: str, targets: list[Target], assets: set[int]) -> Iterator[tuple[object, str]]:
    """Each target's current row (locked) or None, and why it cannot be restored ("" when it can), in the
    targets' order. ``assets``: the asset ids that exist in the actor's scope; any other reads as no longer
    existing. A few queries a chunk of targets, not one a target."""
    if rest.api_mode():  # a read a key: Airflow's API has no lookup of many keys, nor a lock
        yield from sources.current().locate(store, targets, assets)
        return
    for start in range(0, len(targets), audit.CHUNK):
        chunk = targets[start : start + audit.CHUNK]
        yield from (_locate_tasks(chunk) if store == permissions.TASK else _locate_assets(chunk, assets))


def _locate_tasks(targets: list[Target]) -> list[tuple[object, str]]:
    pairs = sorted({(t.dag_id, t.run_id) for t in targets})
    runs = {}
    for start in range(0, len(pairs), RUNS_A_QUERY):
        wanted = Q()
        for dag_id, run_id in pairs[start : start + RUNS_A_QUERY]:
            wanted |= Q(dag_id=dag_id, run_id=run_id)
        runs.update(((d, r), pk) for d, r, pk in DagRun.objects.filter(wanted).values_list("dag_id", "run_id", "pk"))
    rows = {}
    by_run: dict[int, list[Target]] = {}
    for target in targets:
        target.run_pk = runs.get((target.dag_id, target.run_id))
        if target.run_pk is not None:
            by_run.setdefault(target.run_pk, []).append(target)
    for run_pk, group in by_run.items():
        found = TaskStateStore.objects.select_for_update().filter(
            dag_run_id=run_pk, task_id__in={t.task_id for t in group}, key__in={t.key for t in group}
        )
        rows.update(((run_pk, r.task_id, r.region_id, r.map_index, r.key), r) for r in found.order_by("pk"))
    located = []
    for target in targets:
        if target.run_pk is None:
            message = _("the DAG run %(run_id)r of %(dag_id)r no longer exists")
            located.append((None, message % {"run_id": target.run_id, "dag_id": target.dag_id}))
        else:
            coordinates = (target.run_pk, target.task_id, target.region_id, target.map_index, target.key)
            located.append((rows.get(coordinates), ""))
    return located


def _locate_assets(targets: list[Target], assets: set[int]) -> list[tuple[object, str]]:
    reachable = [t for t in targets if t.asset_id in assets]
    rows = {}
    if reachable:
        found = AssetStateStore.objects.select_for_update().filter(
            asset_id__in={t.asset_id for t in reachable}, key__in={t.key for t in reachable}
        )
        rows = {(r.asset_id, r.key): r for r in found.order_by("asset_id", "key")}
    return [
        (rows.get((t.asset_id, t.key)), "")
        if t.asset_id in assets
        else (None, _("the asset with id %(id)s no longer exists") % {"id": t.asset_id})
        for t in targets
    ]


def _restore_change(target: Target, row, current, limit):
    """The restore's own record of a key: what it replaces (with who wrote that, so that the restore can be
    undone in turn) and what it puts back."""
    if target.store == permissions.TASK:
        return audit.task_change(target, before=current, after=target.state, limit=limit, before_row=row)
    return audit.asset_change(
        target.asset_id, target.key, before=current, after=target.state, limit=limit, before_row=row
    )


# An asset key whose writer is not known (a file holds none, an event recorded before writers were kept): no
# writer, which Airflow reads as unknown; the pages say who restored it (``selectors.restorers``). Never the
# API's kind: the restore was not Airflow's API writing.
UNKNOWN_WRITER = {name: None for name in audit.WRITER_FIELDS}


def written_fields(target: Target, schema, now) -> dict:
    """The rule of what a restore writes besides the value: the key's own ``updated_at`` and, for an asset key,
    its writer, as recorded; what was not recorded is ``now`` and no writer (``UNKNOWN_WRITER``). A writer
    recorded on Airflow 3.4 restored onto 3.3 loses the columns 3.3 does not have; one recorded on 3.3 restored
    onto 3.4 has none of 3.4's task identity (None, as Airflow's migration leaves older rows)."""
    fields = {"updated_at": target.updated_at or now}
    if target.store == permissions.TASK:
        return fields
    writer = {**UNKNOWN_WRITER, **{k: v for k, v in (target.writer or {}).items() if k in UNKNOWN_WRITER}}
    absent = {f.attname for f in AssetStateStore._meta.concrete_fields if column_of(f, schema) is None}
    return fields | {name: value for name, value in writer.items() if name not in absent}


def _apply(target: Target, row) -> None:
    if rest.api_mode():  # Airflow's routes write the time of the restore, and an asset key's writer as the API
        sources.current().put_back(target)
        return
    written = written_fields(target, schema_of(connections[airflow_alias()]), timezone.now())
    if target.store == permissions.TASK:
        if target.state is None:
            TaskStateStore.objects.filter(pk=row.pk).delete()
        elif row is None:
            _insert_restored(
                target,
                TaskStateStore(
                    dag_run_id=target.run_pk,
                    **TaskAddress.of(target).fields(),
                    key=target.key,
                    value=target.state[0],
                    expires_at=target.state[1],
                    **written,
                ),
            )
        else:
            rows = TaskStateStore.objects.filter(pk=row.pk)
            rows.update(value=target.state[0], expires_at=target.state[1], **written)
        return
    rows = AssetStateStore.objects.filter(asset_id=target.asset_id, key=target.key)
    if target.state is None:
        rows.delete()
    elif row is None:
        _insert_restored(
            target,
            AssetStateStore(asset_id=target.asset_id, key=target.key, value=target.state[0], **written),
        )
    else:
        rows.update(value=target.state[0], **written)


def _insert_restored(target: Target, new) -> None:
    """Bring back a key that was not there when the restore locked its keys: one that another writer created
    since is a conflict (nothing is restored, the event fails), never overwritten unseen."""
    if not insert_if_absent(new):
        # the restore reaches this key (it got this far), so its asset counts as existing for the lookup
        ((row, _),) = _locate(target.store, [target], {target.asset_id})
        current = state_of(row) if row is not None else None
        _raise_conflicts([{**target.describe(), "current": _state_dict(current), "restore": _state_dict(target.state)}])
