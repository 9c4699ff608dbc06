"""Who a person signed in from outside becomes here: single sign-on (OpenID Connect) and the trusted
authenticating proxy both end in ``sign_in_identity``, which finds or creates the dashboard user linked
to that identity and sets their roles and scope groups from the provider's groups, at every sign-in:
a group gained grants, a group lost removes, and a person with no mapped group gets nothing
(``NoAccess``). The mapping is ``OIDC_GROUP_ROLES`` (provider group → Viewer, Operator, Admin or
``superuser``) and ``OIDC_GROUP_SCOPES`` (provider group → the Django group that holds access scopes).
Superuser status is never given by a claim unless a group is mapped to ``superuser``, and only then is it
also taken away by one. ``remember`` puts how the person signed in into their session; the audit trail
records it with every change they make (``Actor.signed_in``). What a sign-in set counts for ``TOKEN_IDP_MAX_AGE``:
after that, without a new sign-in, the account's API tokens and single sign-on sessions stop (``recheck``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import login, user_logged_in
from django.contrib.auth.models import Group
from django.db import connections, router, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.core import plain
from statestore_admin.core.errors import Invalid
from statestore_admin.identity import usernames
from statestore_admin.identity.roles import ADMIN, ROLES
from statestore_admin.records.models import ExternalIdentity

log = logging.getLogger(__name__)

PASSWORD, OIDC, PROXY, BREAK_GLASS = "password", "oidc", "proxy", "break-glass"
METHODS = {PASSWORD: "password", OIDC: "single sign-on", PROXY: "authenticating proxy", BREAK_GLASS: "break-glass"}
SUPERUSER = "superuser"
SESSION_KEY = "statestore_signed_in"
METHOD_KEY = "statestore_sign_in_method"  # PASSWORD, OIDC, PROXY or BREAK_GLASS: which rule ends the session
# The backend a session from outside is kept under: it only loads the session's user by id; the provider, the
# proxy or a break-glass link authenticated them.
SESSION_BACKEND = "django.contrib.auth.backends.ModelBackend"
USERNAME_MAX = 150  # Django's User.username


@dataclass(frozen=True)
class Identity:
    """A person as the provider (or proxy) vouched for them. ``provider`` and ``subject`` identify them for good
    (OIDC's issuer and ``sub``; the proxy, which sends no such id, vouches for the user name itself); ``label``
    is only the provider's name as people know it, free to change."""

    method: str
    username: str
    email: str = ""
    groups: tuple[str, ...] = ()
    provider: str = ""
    subject: str = ""
    label: str = ""

    @property
    def described(self) -> str:
        """How they signed in, as the audit trail shows it: 'single sign-on (Okta)'."""
        how = METHODS.get(self.method, self.method)
        name = self.label or self.provider
        return f"{how} ({name})" if name else how


class Refused(Exception):
    """This identity cannot sign in at all (not a missing group): the message is for the page."""


class NoAccess(Exception):
    """Signed in as far as the provider goes, but none of the person's groups is mapped."""

    def __init__(self, identity: Identity):
        self.identity = identity
        groups = ", ".join(identity.groups) or _("none")
        message = _(
            "%(name)s signed in through %(how)s, but none of their groups (%(groups)s) gives access to the state "
            "store dashboard. Ask its administrators to map one of them (OIDC_GROUP_ROLES)."
        )
        super().__init__(message % {"name": identity.username, "how": identity.described, "groups": groups})


@dataclass(frozen=True)
class GroupMapping:
    """Provider group → role names (``ROLES`` or ``superuser``), and → scope group names."""

    roles: dict[str, str] = field(default_factory=dict)
    scopes: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(cls) -> GroupMapping:
        return cls(roles=dict(settings.OIDC_GROUP_ROLES), scopes=dict(settings.OIDC_GROUP_SCOPES))

    def problems(self) -> list[str]:
        """What is wrong with the mapping itself (system check): roles that do not exist."""
        allowed = {*ROLES, SUPERUSER}
        return [
            f"OIDC_GROUP_ROLES maps {group!r} to {role!r}, which is not one of {', '.join(sorted(allowed))}."
            for group, role in self.roles.items()
            if role not in allowed
        ]

    @property
    def managed_groups(self) -> set[str]:
        """Every Django group that sign-in sets or removes; any other group a user has is left as it is."""
        return {role for role in self.roles.values() if role != SUPERUSER} | set(self.scopes.values())

    def grants(self, groups) -> tuple[set[str], bool]:
        """The Django groups and whether superuser, for a person in ``groups``."""
        mine = set(groups)
        granted = {django for provider, django in (*self.roles.items(), *self.scopes.items()) if provider in mine}
        superuser = SUPERUSER in granted
        granted.discard(SUPERUSER)
        return granted, superuser


def sign_in_identity(identity: Identity, mapping: GroupMapping | None = None, *, actor):
    """The user for ``identity``, created at first sign-in, with roles and scope groups set from its groups.
    ``actor``: the sign-in's request as an ``access.actors.Actor`` (identity sits below access, which defines
    it); its client address is kept on the identity's row (``ExternalIdentity.last_sign_in_from``).

    Raises ``Refused`` (nothing changed) when the identity cannot be used, and ``NoAccess`` when no group
    is mapped: that user then keeps none of the mapped groups (access lost with the last group).
    """
    mapping = mapping or GroupMapping.from_settings()
    username = (identity.username or "").strip()
    if not username:
        raise Refused(_("%(how)s did not say who you are (no user name in its answer).") % {"how": identity.described})
    if len(username) > USERNAME_MAX:
        message = _("The user name from %(how)s is longer than %(limit)s characters.")
        raise Refused(message % {"how": identity.described, "limit": USERNAME_MAX})
    if usernames.unsafe_characters(username + identity.email + "".join(identity.groups)):
        message = _("%(how)s sent control characters or invisible formatting in who you are or your groups.")
        raise Refused(message % {"how": identity.described})
    # The proxy vouches for the name itself: names that look alike are one person (identity.usernames).
    subject = identity.subject or usernames.canonical(username)
    granted, superuser = mapping.grants(identity.groups)
    with transaction.atomic():
        links = ExternalIdentity.objects.select_for_update().select_related("user")
        links = links.filter(method=identity.method, provider=identity.provider)
        link = links.filter(subject=subject).first()
        if link is None and not identity.subject:  # a proxy link made before names were compared canonically
            link = links.filter(subject=username).first()
        if link is None:
            taken = usernames.look_alikes(username)
            if taken:
                # Linking by name would let whoever controls that name at the provider take a local account.
                message = _(
                    "A dashboard account named %(name)r already exists and is not linked to %(how)s. An "
                    "administrator can rename or remove it in /admin/."
                )
                raise Refused(message % {"name": usernames.visible(taken[0].username), "how": identity.described})
            try:
                user = usernames.create(username, email=identity.email[:254])
            except Invalid as exc:  # made meanwhile by another sign-in
                raise Refused(" ".join(exc.messages)) from None
            link = ExternalIdentity(user=user, method=identity.method, provider=identity.provider, subject=subject)
        link.subject = subject
        user = link.user
        if not user.is_active:
            raise Refused(_("The dashboard account %(name)r is deactivated.") % {"name": user.username})
        link.groups = sorted(set(identity.groups))
        link.last_sign_in = timezone.now()
        link.last_sign_in_from = actor.host[:255]
        link.save()
        _apply(user, identity, mapping, granted, superuser)
    if not granted and not superuser and not user.is_superuser:
        log.warning("sign-in refused: %s has no mapped group (%s)", identity.username, ", ".join(identity.groups))
        raise NoAccess(identity)
    log.info("signed in: %s through %s", user.username, identity.described)
    return user


def _apply(user, identity: Identity, mapping: GroupMapping, granted: set[str], superuser: bool) -> None:
    managed = mapping.managed_groups
    current = set(user.groups.values_list("name", flat=True))
    kept = current - managed  # groups given by hand and not in the mapping stay
    wanted = kept | granted
    if wanted != current:
        for name in granted - current:
            Group.objects.get_or_create(name=name)
        user.groups.set(Group.objects.filter(name__in=wanted))
        log.info(
            "groups of %s from %s: +%s -%s",
            user.username,
            identity.described,
            sorted(wanted - current),
            sorted(current - wanted),
        )
    fields = []
    if SUPERUSER in mapping.roles.values() and user.is_superuser != superuser:
        user.is_superuser = superuser
        fields.append("is_superuser")
    staff = user.is_superuser or ADMIN in wanted  # /admin/ for those whose role has something there
    if user.is_staff != staff:
        user.is_staff = staff
        fields.append("is_staff")
    if identity.email and user.email != identity.email[:254]:
        user.email = identity.email[:254]
        fields.append("email")
    if fields:
        user.save(update_fields=fields)


def start_session(request, user, how: Identity | str) -> None:
    """Sign ``user`` in to this request's session, which remembers how (``remember``)."""
    login(request, user, backend=SESSION_BACKEND)
    remember(request, how)


def remember(request, how: Identity | str) -> None:
    """After ``login()``: how this session signed in, for the audit trail of its changes and for
    ``session_lapsed``."""
    request.session[SESSION_KEY] = how.described if isinstance(how, Identity) else METHODS.get(how, how)
    request.session[METHOD_KEY] = how.method if isinstance(how, Identity) else how


# Access that the provider vouches for lasts TOKEN_IDP_MAX_AGE after the last sign-in there -------------------
# Roles and scope groups are set at each sign-in; API tokens and sessions then read them at every request. Someone
# removed at the provider who never signs in again would keep them: so an account that single sign-on or the proxy
# manages acts, with a token or a single sign-on session, only while its last sign-in there is that recent, and with
# what that sign-in's groups map to.
def max_age() -> timedelta:
    return timedelta(seconds=settings.TOKEN_IDP_MAX_AGE)


def last_sign_in(user):
    """When ``user`` last signed in through single sign-on or the proxy; None for an account neither manages."""
    return ExternalIdentity.objects.filter(user=user).aggregate(last=Max("last_sign_in"))["last"]


def latest_link(user) -> ExternalIdentity | None:
    """``user``'s identity of the latest sign-in from outside (None: a local account). One plain statement
    (``core.plain``): every API request with a token asks it."""
    connection = connections[router.db_for_read(ExternalIdentity)]
    table = connection.ops.quote_name(ExternalIdentity._meta.db_table)
    sql = (
        f"SELECT {plain.columns(ExternalIdentity, connection, 'e')} FROM {table} e "
        "WHERE e.user_id = %s ORDER BY e.last_sign_in DESC LIMIT 1"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [user.pk])
        row = cursor.fetchone()
    return None if row is None else plain.instance(ExternalIdentity, connection, row)


def recheck(user) -> bool:
    """Whether ``user`` may act now (a token's or a single sign-on session's request). A local account may. One that
    single sign-on or the proxy manages may not once its last sign-in there is older than ``max_age()``; before that,
    its roles and scope groups are first put back in line with what its last sign-in's groups map to today (the
    mapping may have changed since, or a mapped group been given by hand), so that it acts with exactly that."""
    link = latest_link(user)
    if link is None:
        return True
    if timezone.now() - link.last_sign_in > max_age():
        return False
    _follow(user, link, link.groups)
    return True


def recheck_password_session(user) -> None:
    """A password session of an account that single sign-on or the proxy also manages (an administrator gave it a
    password) goes on, but the roles and scope groups the provider gave follow the provider as in ``recheck``: what
    the last sign-in's groups map to today, and none of them once that sign-in is older than ``max_age()`` (the
    provider no longer vouches for them: someone removed there keeps no role of its through a password). Groups
    given by hand outside the mapping stay; a local account is left as it is."""
    link = latest_link(user)
    if link is not None:
        _follow(user, link, link.groups if timezone.now() - link.last_sign_in <= max_age() else ())


def _follow(user, link, groups) -> None:
    """Put ``user``'s mapped groups (and superuser, if mapped) in line with what ``groups`` map to today."""
    mapping = GroupMapping.from_settings()
    granted, superuser = mapping.grants(groups)
    last = Identity(method=link.method, username=user.get_username(), groups=tuple(groups), provider=link.provider)
    with transaction.atomic():
        _apply(user, last, mapping, granted, superuser)
    # What the request cached on the user from the groups before (ModelBackend's permissions, scopes._CACHE; scopes
    # imports this module through actors, so the name is repeated here): read again from the groups just set.
    for cached in ("_perm_cache", "_user_perm_cache", "_group_perm_cache", "_statestore_scope"):
        user.__dict__.pop(cached, None)


def session_lapsed(request) -> bool:
    """Whether the request's session, started by single sign-on or the proxy (or from before sessions said how),
    belongs to an account that may no longer act (``recheck``). A password session never lapses here, but acts only
    with the provider's roles that it still vouches for (``recheck_password_session``); a break-glass session keeps
    its own rules (the link's minutes)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return False
    method = request.session.get(METHOD_KEY)
    if method == BREAK_GLASS:
        return False
    if method == PASSWORD:
        recheck_password_session(user)
        return False
    return not recheck(user)


def note_password_sign_in(sender, request, user, **kwargs) -> None:
    """user_logged_in: a sign-in through a password backend (the login page, /admin/login/) is a password
    one; single sign-on, the proxy and break-glass sign in through ``start_session``, which then says how."""
    if request is not None and getattr(user, "backend", "").endswith("ModelBackend"):
        remember(request, PASSWORD)


user_logged_in.connect(note_password_sign_in, dispatch_uid="statestore_note_password_sign_in")


def signed_in(request) -> str:
    """How the request's session signed in ('' for API tokens and sessions from before this was kept)."""
    session = getattr(request, "session", None)
    try:
        return session.get(SESSION_KEY, "") if session is not None else ""
    except Exception:  # noqa: BLE001 - a session store that fails must not stop the change being audited
        return ""
