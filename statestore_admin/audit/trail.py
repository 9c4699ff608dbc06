"""The audit trail's reads: the audit query (filters of the Audit page and the API), which events an
access scope sees, an event's keys, a key's history, and the keys a confirmation listed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import (
    Exists,
    F,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Window,
)
from django.db.models.functions import RowNumber
from django.utils.translation import gettext as _

from statestore_admin.access import policies
from statestore_admin.access.permissions import ASSET, TASK
from statestore_admin.access.scopes import Scope, scope_of
from statestore_admin.airflow.models import Asset, AssetStateStore, TaskStateStore
from statestore_admin.audit.events import airflow_region, recorded_region
from statestore_admin.core.errors import Invalid, NotFound
from statestore_admin.core.pagination import Page, paginate
from statestore_admin.records.models import AuditEvent, AuditKey

AUDIT_FILTERS = ("actor", "action", "via", "dag_id", "run_id", "task_id", "asset_id", "key", "since", "until")


@dataclass(frozen=True)
class AuditQuery:
    """Filters of the audit trail, the same for the Audit page and the API (``from_params``)."""

    actor: str = ""
    action: str = ""
    via: str = ""
    dag_id: str = ""
    run_id: str = ""
    task_id: str = ""
    asset_id: int | None = None
    key: str = ""
    since: datetime | None = None
    until: datetime | None = None

    @classmethod
    def from_params(cls, params) -> AuditQuery:
        """From a query string; an unknown action or via, a non-integer asset id or a date without a time
        zone is ``Invalid`` naming the parameter."""
        from statestore_admin.core.values import parse_datetime_aware

        values = {name: (params.get(name) or "").strip() for name in AUDIT_FILTERS}
        errors = {}
        if values["action"] and values["action"] not in AuditEvent.Action.values:
            errors["action"] = _("One of %(choices)s.") % {"choices": ", ".join(AuditEvent.Action.values)}
        if values["via"] and values["via"] not in AuditEvent.Via.values:
            errors["via"] = _("One of %(choices)s.") % {"choices": ", ".join(AuditEvent.Via.values)}
        asset_id = None
        if values["asset_id"]:
            try:
                asset_id = int(values["asset_id"])
            except ValueError:
                asset_id = None
            if asset_id is None or not 1 <= asset_id < 2**31:
                errors["asset_id"] = _("An asset id is a whole number from 1 to 2147483647.")
        times = {}
        for name in ("since", "until"):
            raw = params.get(name) or ""  # empty: no bound; anything else must be a date and time as it is
            if raw:
                try:
                    if raw != raw.strip():
                        raise Invalid({name: _("A date and time without surrounding spaces.")})
                    times[name] = parse_datetime_aware(raw, name)
                except ValidationError as exc:
                    errors[name] = exc.message_dict[name][0]
        if errors:
            raise Invalid(errors)
        return cls(
            **{n: values[n] for n in ("actor", "action", "via", "dag_id", "run_id", "task_id", "key")},
            asset_id=asset_id,
            since=times.get("since"),
            until=times.get("until"),
        )

    @property
    def active(self) -> bool:
        return any(getattr(self, name) not in ("", None) for name in AUDIT_FILTERS)


def visible_events_q(scope: Scope) -> Q:
    """The events a scoped user may see: task events of one of their DAGs, asset events of one of their
    assets. Events spanning several DAGs or assets (no single dag_id or asset) and GC runs are not theirs."""
    if not scope.restricted:
        return Q()
    task = Q(store="task", dag_id__isnull=False) & scope.dag_q("dag_id") if scope.dags != () else Q(pk__in=[])
    asset = Q(store="asset", asset_id__isnull=False) & (scope.asset_q("asset_")) if scope.assets != () else Q(pk__in=[])
    return task | asset


def get_audit_event(event_id: int, *, scope: Scope) -> AuditEvent:
    try:
        event = AuditEvent.objects.select_related("restored_from").filter(visible_events_q(scope)).get(pk=event_id)
    except (AuditEvent.DoesNotExist, ValueError, TypeError):
        raise NotFound(_("Audit event %(id)s not found") % {"id": event_id}) from None
    return name_assets([event])[0]


def viewable_audit_event(event_id: int, *, user) -> AuditEvent:
    """The event as the Audit page and the API show it: in ``user``'s access scope (else ``NotFound``) and of
    stores they may view (else ``Forbidden``, naming the store)."""
    event = get_audit_event(event_id, scope=scope_of(user))
    policies.require_view_event(user, event)
    return event


def audit_keys(event: AuditEvent, cursor: str | None = None, size: int = 100) -> Page:
    return paginate(event.keys.all(), ["id"], cursor, size)


def task_key_history(key: TaskStateStore, limit: int = 50) -> list[AuditKey]:
    """Every audited change of this key (by its natural key: it outlives the row), newest first. A key
    outside any region has the changes recorded on Airflow 3.3 too (the migration keeps it there)."""
    rows = AuditKey.objects.filter(
        dag_id=key.dag_id,
        run_id=key.run_id,
        task_id=key.task_id,
        map_index=key.map_index,
        key=key.key,
        region_id=recorded_region(key.region_id),
    )
    return list(rows.select_related("event").order_by("-id")[:limit])


def asset_key_history(asset_id: int, key: str, limit: int = 50) -> list[AuditKey]:
    rows = AuditKey.objects.filter(asset_id=asset_id, key=key)
    return list(rows.select_related("event").order_by("-id")[:limit])


def name_assets(events) -> list:
    """Events of one asset recorded by its id alone (restores recorded so before their name was kept) get its
    name and URI as Airflow has them now, so that every face names the asset; ``asset_deleted`` says when it
    no longer exists (the event then keeps its id alone). One query for ``events``."""
    events = list(events)
    unnamed = {e.asset_id for e in events if e.asset_id is not None and not e.asset_name}
    found = {}
    if unnamed:
        assets = Asset.objects.filter(pk__in=unnamed).values_list("pk", "name", "uri")
        found = {pk: (name, uri) for pk, name, uri in assets}
    for event in events:
        event.asset_deleted = False
        if event.asset_id is not None and not event.asset_name:
            if event.asset_id in found:
                event.asset_name, event.asset_uri = found[event.asset_id]
            else:
                event.asset_deleted = True
    return events


# How long before its event a write of ours may have taken its ``updated_at`` (read before the event starts).
WRITE_LEAD = timedelta(minutes=1)


def name_writers(rows: list) -> list:
    """Who wrote asset keys that Airflow's writer columns cannot name, from the audit trail (one query per asset
    among ``rows``):

    - ``restored_by``: the actor of the restore that wrote a key without a writer (Airflow reads it as unknown;
      ``exports.restore.UNKNOWN_WRITER``);
    - ``edited_by`` and ``edited_via``: the actor and face (dashboard, Django admin, command) of the write of
      ours that recorded Airflow's kind ``api`` (as Airflow's PUT does, ``state.services.set_asset_key``): the
      kind alone would say "API" for a change made in the dashboard. Only when the key's ``updated_at`` is that
      write's (between its event's start and end): a later write by Airflow's own API is not ours to name.

    None where the trail does not say so."""
    asked: dict[int, list] = {}
    for row in rows:
        row.restored_by = row.edited_by = row.edited_via = None
        if row.last_updated_by_kind in (None, "api"):
            asked.setdefault(row.asset_id, []).append(row)
    for asset_id, group in asked.items():
        changes = AuditKey.objects.filter(
            asset_id=asset_id, key__in=[r.key for r in group], event__status=AuditEvent.Status.DONE
        )
        latest = changes.values("key").annotate(last=Max("id")).values("last")
        found = {k.key: k.event for k in AuditKey.objects.filter(pk__in=latest).select_related("event")}
        for row in group:
            event = found.get(row.key)
            if event is None:
                continue
            if row.last_updated_by_kind is None and event.action == AuditEvent.Action.RESTORE:
                row.restored_by = event.actor
            elif (
                row.last_updated_by_kind == "api"
                and event.via != AuditEvent.Via.API
                and event.action != AuditEvent.Action.RESTORE
                and event.finished_at is not None
                and event.at - WRITE_LEAD <= row.updated_at <= event.finished_at
            ):
                row.edited_by, row.edited_via = event.actor, event.get_via_display()
    return rows


def audit_event_rows(query: AuditQuery, stores: list[str], *, scope: Scope) -> QuerySet:
    """The events ``query`` matches among those of ``stores`` in ``scope``, unordered: what the Audit page pages
    through and its export downloads."""
    # Events without a store: GC runs are task state's; orphans runs (objects of both stores), prunes and API
    # tokens need both.
    no_store = Q(store="") if ASSET in stores else Q(store="") & ~Q(action__in=AuditEvent.BOTH_STORES)
    rows = AuditEvent.objects.filter(Q(store__in=stores) | (no_store if TASK in stores else Q(pk__in=[])))
    rows = rows.filter(visible_events_q(scope))
    for name in ("actor", "action", "via", "dag_id", "run_id", "task_id", "asset_id"):
        value = getattr(query, name)
        if value not in ("", None):
            rows = rows.filter(**{name: value})
    if query.key:
        rows = rows.filter(Exists(AuditKey.objects.filter(event=OuterRef("pk"), key=query.key)))
    if query.since:
        rows = rows.filter(at__gte=query.since)
    if query.until:
        rows = rows.filter(at__lt=query.until)
    return rows


def audit_events(
    query: AuditQuery, stores: list[str], cursor: str | None = None, size: int = 50, *, scope: Scope
) -> Page:
    """Events of ``stores`` (those a user may view; GC runs, which have no store, count as task state),
    newest first, keyset-paginated by id; each with ``restored_by`` (the restores made of it): two queries a
    page, each filter an index range or a key lookup."""
    page = paginate(audit_event_rows(query, stores, scope=scope), ["-id"], cursor, size)
    restored_by: dict[int, list[int]] = {}
    for event_id, restore_id in AuditEvent.objects.filter(restored_from__in=[e.pk for e in page.items]).values_list(
        "restored_from", "id"
    ):
        restored_by.setdefault(event_id, []).append(restore_id)
    for event in page.items:
        event.restored_by = sorted(restored_by.get(event.pk, []))
    name_assets(page.items)
    return page


def first_keys_of(events: list[AuditEvent], per_event: int) -> dict[int, list[AuditKey]]:
    """The first ``per_event`` keys of each event (one more tells that there are others), in one query."""
    numbered = AuditKey.objects.filter(event__in=[e.pk for e in events]).annotate(
        n=Window(RowNumber(), partition_by=[F("event_id")], order_by=F("id").asc())
    )
    found: dict[int, list[AuditKey]] = {e.pk: [] for e in events}
    for key in numbered.filter(n__lte=per_event + 1).order_by("event_id", "id"):
        found[key.event_id].append(key)
    return found


def current_task_key(recorded: AuditKey, *, scope: Scope) -> TaskStateStore | None:
    """The task key row that has ``recorded``'s natural key now (in ``scope``), or None: always over Airflow's REST
    API, whose keys have no row id to link to."""
    if recorded.asset_id is not None or not scope.allows_dag(recorded.dag_id) or settings.AIRFLOW_API_MODE:
        return None
    return (
        TaskStateStore.objects.filter(
            dag_id=recorded.dag_id,
            run_id=recorded.run_id,
            task_id=recorded.task_id,
            region_id=airflow_region(recorded.region_id),
            map_index=recorded.map_index,
            key=recorded.key,
        )
        .order_by("pk")
        .first()
    )


def successor_task_key(key_id: int, *, scope: Scope) -> TaskStateStore | None:
    """The row that holds the key once held by the row ``key_id`` (deleted, then restored as a new row), or
    None: the audit trail's latest record of that row names the key by its natural key."""
    recorded = AuditKey.objects.filter(row_id=key_id, asset_id__isnull=True).order_by("-id").first()
    return current_task_key(recorded, scope=scope) if recorded is not None else None


def confirmed_keys(
    rows: QuerySet | None = None, *, asset_id: int | None = None, keys: list[str] | None = None, confirmed_at
) -> QuerySet:
    """A confirmation's download: the rows written up to ``confirmed_at``, which the dialog sets to its
    latest listed ``updated_at`` (or its own time, if later), so that every key it lists is in, whatever
    the writers' clocks (confirming acts on the listed keys only: ``services.Listing``). ``rows`` is a
    task selection's queryset; without it, the asset's keys (all, or the ``keys`` named)."""
    if rows is None:
        rows = AssetStateStore.objects.filter(asset_id=asset_id)
        if keys is not None:
            rows = rows.filter(key__in=keys)
    return rows.filter(updated_at__lte=confirmed_at)
