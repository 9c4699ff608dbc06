"""Access-scope grants and revocations, audited as ``actor`` (actions ``grant`` and ``ungrant``), each event
written in the same transaction as the ``AccessScope`` rows it describes. Only those who manage scopes
(``policies.require_manage_scopes``: superusers, and commands acting as the system) may."""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.db import router, transaction
from django.db.models import Q
from django.utils.translation import gettext as _

from statestore_admin.access import policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import holder_filter
from statestore_admin.audit import events
from statestore_admin.core.errors import Invalid
from statestore_admin.core.patterns import validate_pattern
from statestore_admin.records.models import AccessScope, AuditEvent


def _holder(holder) -> dict:
    if isinstance(holder, Group):
        return {"group": holder.name}
    return {"user": holder.get_username()}


def _grants(pairs) -> list[dict]:
    return [{"kind": kind, "pattern": pattern} for kind, pattern in pairs]


def _record(actor: Actor, action: str, holder, *, added=(), removed=()) -> None:
    """One event per change; a change that changes nothing (patterns granted already, none to remove) is none."""
    if added or removed:
        details = {**_holder(holder), "added": _grants(added), "removed": _grants(removed)}
        events.recorded(actor, action, details)


def grant(holder, *, dags: list[str] = (), assets: list[str] = (), unscoped: bool = False, actor: Actor) -> int:
    """Add patterns to a group's or user's scope, or with ``unscoped`` grant every DAG and asset; returns how many
    grants were new. A holder's own grants are patterns or every DAG and asset, not both: granting one removes
    the other (patterns beside every DAG and asset would restrict nothing)."""
    policies.require_manage_scopes(actor)
    patterns = [(AccessScope.Kind.DAG, validate_pattern(p)) for p in dags]
    patterns += [(AccessScope.Kind.ASSET, validate_pattern(p)) for p in assets]
    if unscoped and patterns:
        raise Invalid(_("Give either patterns (--dags, --assets) or --unscoped, not both."))
    if unscoped:
        patterns = [(AccessScope.Kind.ALL, "*")]
    if not patterns:
        raise Invalid(_("Give at least one pattern with --dags or --assets, or --unscoped."))
    rows = AccessScope.objects.filter(**holder_filter(holder))
    added = []
    with transaction.atomic(using=router.db_for_write(AccessScope)):
        replaced = rows.exclude(kind=AccessScope.Kind.ALL) if unscoped else rows.filter(kind=AccessScope.Kind.ALL)
        removed = list(replaced.values_list("kind", "pattern"))
        replaced.delete()
        for kind, pattern in patterns:
            _scope, created = AccessScope.objects.get_or_create(**holder_filter(holder), kind=kind, pattern=pattern)
            if created:
                added.append((kind, pattern))
        _record(actor, AuditEvent.Action.GRANT, holder, added=added, removed=removed)
    return len(added)


def revoke(
    holder,
    *,
    dags: list[str] = (),
    assets: list[str] = (),
    unscoped: bool = False,
    everything: bool = False,
    actor: Actor,
) -> int:
    """Remove patterns and, with ``unscoped``, the grant of every DAG and asset (or, with ``everything``, every
    grant of the holder's own: a user then sees what their groups give, nothing without them); returns how many
    were removed."""
    policies.require_manage_scopes(actor)
    rows = AccessScope.objects.filter(**holder_filter(holder))
    if not everything:
        if not dags and not assets and not unscoped:
            raise Invalid(_("Give the patterns to remove with --dags or --assets, or --all."))
        rows = rows.filter(
            Q(kind=AccessScope.Kind.DAG, pattern__in=list(dags))
            | Q(kind=AccessScope.Kind.ASSET, pattern__in=list(assets))
            | (Q(kind=AccessScope.Kind.ALL) if unscoped else Q(pk__in=[]))
        )
    with transaction.atomic(using=router.db_for_write(AccessScope)):
        removed = list(rows.values_list("kind", "pattern"))
        rows.delete()
        _record(actor, AuditEvent.Action.UNGRANT, holder, removed=removed)
    return len(removed)
