"""Which DAGs and assets a user may see and act on: scopes of glob patterns granted to users and groups.

A user's scope is the union of the grants to them and to their groups (``AccessScope`` rows). A grant of
every DAG and asset (``Kind.ALL``, which an administrator chooses explicitly) makes them unscoped: every DAG
and asset, as far as their permissions go. Otherwise a DAG is visible only if its dag_id matches one of the
DAG patterns, and an asset only if its name or URI matches one of the asset patterns; a scope with DAG
patterns only sees no asset (grant ``--assets '*'`` for all of them). Without any grant a user sees nothing
(fail closed: losing a grant never widens what one sees); an account that single sign-on or the proxy
manages gets ``DEFAULT_SCOPE`` instead, nothing unless the deployment sets one. Superusers and management
commands are never scoped.

Patterns are globs: ``*`` any characters (none included), ``?`` exactly one; everything else is literal
and case-sensitive, as Airflow's ids are. The same pattern is matched in Python (``allows_dag``) and in
SQL (``dag_q``): the translation is one function, ``patterns.glob_regex``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Q
from django.utils.translation import gettext as _

from statestore_admin.core.errors import Forbidden, Invalid
from statestore_admin.core.patterns import glob_q, glob_regex, validate_pattern


@dataclass(frozen=True)
class Scope:
    """``dags``/``assets``: the patterns, or None for every DAG / every asset. ``memo`` keeps what
    selectors derive from the patterns (the matching dag_ids) for the life of this object: one request,
    as ``scope_of`` makes one per user object."""

    dags: tuple[str, ...] | None = None
    assets: tuple[str, ...] | None = None
    memo: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def restricted(self) -> bool:
        return self.dags is not None or self.assets is not None

    @property
    def sees_nothing(self) -> bool:
        """No DAG and no asset: an account without any grant (fail closed), until an administrator grants one."""
        return self.dags == () and self.assets == ()

    @property
    def all_dags(self) -> bool:
        return self.dags is None or "*" in self.dags

    @property
    def all_assets(self) -> bool:
        return self.assets is None or "*" in self.assets

    def allows_dag(self, dag_id: str | None) -> bool:
        if self.all_dags:
            return True
        return dag_id is not None and any(re.match(glob_regex(p), dag_id) for p in self.dags)

    def allows_asset(self, name: str | None, uri: str | None) -> bool:
        if self.all_assets:
            return True
        return any(value is not None and re.match(glob_regex(p), value) for p in self.assets for value in (name, uri))

    def dag_q(self, field: str = "dag_id") -> Q:
        """A filter on a column holding a dag_id (for small tables: the audit trail, ``dag``)."""
        return Q() if self.all_dags else glob_q(field, self.dags)

    def asset_q(self, prefix: str = "") -> Q:
        """A filter on an asset's name and URI (``prefix``: the path to the asset, e.g. ``asset__``)."""
        if self.all_assets:
            return Q()
        return glob_q(f"{prefix}name", self.assets) | glob_q(f"{prefix}uri", self.assets)

    def require_dag(self, dag_id: str) -> None:
        """Forbidden for a DAG named out of scope (as Airflow's auth manager answers, whether it exists or not)."""
        if not self.allows_dag(dag_id):
            raise Forbidden(_("You do not have access to DAG %(dag_id)r.") % {"dag_id": dag_id})

    def require_unrestricted(self, what: str) -> None:
        if self.restricted:
            message = _("%(what)s spans every DAG and asset: a user with a scope may not use it.")
            raise Forbidden(message % {"what": what})

    def describe(self) -> str:
        if not self.restricted:
            return _("every DAG and asset")
        if self.all_dags:
            dags = _("every DAG")
        else:
            dags = _("DAGs %(patterns)s") % {"patterns": ", ".join(self.dags)} if self.dags else _("no DAG")
        if self.all_assets:
            assets = _("every asset")
        else:
            assets = _("assets %(patterns)s") % {"patterns": ", ".join(self.assets)} if self.assets else _("no asset")
        return _("%(dags)s; %(assets)s") % {"dags": dags, "assets": assets}


EVERYTHING = Scope()
_CACHE = "_statestore_scope"


def nothing() -> Scope:
    """No DAG and no asset (a new object each time: its ``memo`` is per request)."""
    return Scope(dags=(), assets=())


def default_scope() -> Scope:
    """``DEFAULT_SCOPE``: what an account that single sign-on manages sees without any grant. Empty: nothing;
    ``*``: every DAG and asset, as an unscoped account; patterns: those, for DAG ids and asset names or URIs."""
    patterns = tuple(p.strip() for p in settings.DEFAULT_SCOPE if p.strip())
    if patterns == ("*",):
        return EVERYTHING
    return Scope(dags=patterns, assets=patterns)


def default_scope_problems() -> list[str]:
    """What is wrong with ``DEFAULT_SCOPE`` (a system check): patterns that are not valid."""
    from django.core.exceptions import ValidationError

    problems = []
    for pattern in (p.strip() for p in settings.DEFAULT_SCOPE if p.strip()):
        try:
            validate_pattern(pattern)
        except ValidationError as exc:
            problems.append(f"DEFAULT_SCOPE holds {pattern!r}: {' '.join(exc.messages)}")
    return problems


def scope_of(who) -> Scope:
    """The scope of a user or of an ``Actor`` (a command acting as the system is unscoped); cached on the
    user object for the request."""
    from statestore_admin.access.actors import Actor
    from statestore_admin.records.models import AccessScope

    if isinstance(who, Actor):
        if who.is_system:
            return EVERYTHING
        who = who.user
    if who is None or not who.is_authenticated:
        return nothing()
    if who.is_superuser:
        return EVERYTHING
    cached = getattr(who, _CACHE, None)
    if cached is not None:
        return cached
    grants = list(
        AccessScope.objects.filter(Q(user=who) | Q(group__in=who.groups.all()))
        .order_by("pattern")
        .values_list("kind", "pattern")
        .distinct()
    )
    if not grants:
        scope = default_scope() if _managed_from_outside(who) else nothing()
    else:
        scope = _granted(grants)
    setattr(who, _CACHE, scope)
    return scope


def _granted(grants) -> Scope:
    """The union of ``(kind, pattern)`` grants: every DAG and asset if one of them is ``ALL``."""
    from statestore_admin.records.models import AccessScope

    if any(kind == AccessScope.Kind.ALL for kind, _ in grants):
        return EVERYTHING
    return Scope(
        dags=tuple(p for kind, p in grants if kind == AccessScope.Kind.DAG),
        assets=tuple(p for kind, p in grants if kind == AccessScope.Kind.ASSET),
    )


def _managed_from_outside(user) -> bool:
    """Whether single sign-on or the authenticating proxy manages ``user`` (it has signed in through one)."""
    from statestore_admin.records.models import ExternalIdentity

    return ExternalIdentity.objects.filter(user=user).exists()


def rule_for(user) -> str:
    """Which rule gives ``user`` their scope, in words (Django's admin shows it on the user's page)."""
    if user.is_superuser:
        return _("Superuser: every DAG and asset, never scoped.")
    if _managed_from_outside(user):
        default = default_scope()
        if not default.restricted:
            fallback = _("every DAG and asset (DEFAULT_SCOPE=*)")
        elif default.dags:
            fallback = _("%(patterns)s (DEFAULT_SCOPE)") % {"patterns": default.describe()}
        else:
            fallback = _("nothing (no DEFAULT_SCOPE is set)")
        return _(
            "Managed by single sign-on or the authenticating proxy: the scopes of its groups (OIDC_GROUP_SCOPES, "
            "set at each sign-in) and of its own grants; without any, %(fallback)s."
        ) % {"fallback": fallback}
    return _(
        "Local account: the scopes of its groups and of its own grants; without any, nothing. Grant "
        "'every DAG and asset (unscoped)' below to let it see everything."
    )


# Holders of grants (granting and revoking, audited: ``grants.services``) ----------------------------------
def find_holder(name: str, kind: str | None = None):
    """The group or user called ``name`` (``kind``: "group" or "user" when both exist)."""
    from django.contrib.auth.models import Group

    from statestore_admin.core.errors import NotFound
    from statestore_admin.identity import usernames

    group = Group.objects.filter(name=name).first() if kind in (None, "group") else None
    user = usernames.find(name) if kind in (None, "user") else None
    if group and user:
        message = _("Both a group and a user are called %(name)r: say which with --group or --user.")
        raise Invalid(message % {"name": name})
    if not group and not user:
        missing = {
            "group": _("No group called %(name)r."),
            "user": _("No user called %(name)r."),
        }.get(kind, _("No group or user called %(name)r."))
        raise NotFound(missing % {"name": name})
    return group or user


def holder_filter(holder) -> dict:
    from django.contrib.auth.models import Group

    return {"group": holder} if isinstance(holder, Group) else {"user": holder}


def patterns_of(holder) -> Scope:
    """The grants made directly to a group or user (a user's groups not included): nothing without any."""
    from statestore_admin.records.models import AccessScope

    rows = list(AccessScope.objects.filter(**holder_filter(holder)).values_list("kind", "pattern"))
    return _granted(rows) if rows else nothing()
