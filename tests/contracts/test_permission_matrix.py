"""The permission matrix (issue 12): every URL and method of the project × every kind of principal.

For each (URL, method, principal) the status the rules below give is compared with the status Django's test
client gets through the whole stack (middleware, CSRF enforced, DRF, the admin). Data has objects in the
scoped principals' scope (DAG ``etl_a``, asset ``etl.one``) and out of it (DAG ``ml_x``, asset ``ml.two``),
with distinctive keys and values; every response is searched for what its principal may not see:

- a scoped principal never gets a key, value, DAG id or asset name of ``ml_*`` (unless the request itself
  named it: an answer may echo what the client sent);
- a principal without ``view`` on a store never gets one of that store's values.

The principals are those of the issue, plus a scoped Admin (staff: the admin's scoping, restore's scope check).
Token principals send an anonymous session's CSRF token with their writes: pages and the admin see an
anonymous visitor (a bearer token is for the API only). The failed-token throttle is off here (it has its
own tests): the refused tokens are many.

Every request runs in a savepoint of both databases that is rolled back afterwards, so writes are harmless
and every request sees the same data; after a refused write the state tables (and tokens and scopes) must
be unchanged. Mismatches are collected into one table; ``KNOWN_GAPS`` lists the cells known to differ
(each with its reason) and must stay honest: a listed cell that matches fails the test too.

``test_the_matrix_lists_every_url`` walks the URLconf: a URL pattern (or a model in the admin) the matrix
does not list fails, so a new URL must be added here with its expectations. The expected table, as
documentation: tests/permission_matrix.md.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connections, transaction
from django.db.models import CharField, DateTimeField, IntegerField, Value
from django.test import Client
from django.urls import URLResolver, get_resolver
from django.utils import timezone

from statestore_admin import grants
from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.audit import events as audit
from statestore_admin.records.models import AccessScope, AuditEvent, GcRun
from statestore_admin.state import services
from statestore_admin.stats import snapshots as stats
from statestore_admin.tokens.models import ApiToken
from tests import factories
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

# Permissions, as Django names them ------------------------------------------------------------------
TASK = {a: f"airflow.{a}_taskstatestore" for a in ("view", "add", "change", "delete")}
ASSET = {a: f"airflow.{a}_assetstatestore" for a in ("view", "add", "change", "delete")}
TOKENS = {a: f"tokens.{a}_apitoken" for a in ("view", "add", "change", "delete")}
SCOPES = {a: f"state.{a}_accessscope" for a in ("view", "add", "change", "delete")}
GCRUN = {a: f"state.{a}_gcrun" for a in ("view", "add", "change", "delete")}
SNAPSHOTS = {a: f"state.{a}_statssnapshot" for a in ("view", "add", "change", "delete")}
GROUPS = {a: f"auth.{a}_group" for a in ("view", "add", "change", "delete")}
USERS = {a: f"auth.{a}_user" for a in ("view", "add", "change", "delete")}
AXES = {
    model: {a: f"axes.{a}_{model}" for a in ("view", "add", "change", "delete")}
    for model in ("accessattempt", "accesslog", "accessfailurelog")
}
VIEW_ANY = (TASK["view"], ASSET["view"])  # at least one of them
RESTORE_ANY = tuple(tuple(perms.values()) for perms in (TASK, ASSET))  # all four on either store

# What each role may do: written out here (not read from roles.py), so that the matrix states it.
VIEW_BOTH = frozenset({TASK["view"], ASSET["view"]})
CHANGE_BOTH = frozenset({TASK["change"], ASSET["change"]})
OPERATOR = frozenset({s[a] for s in (TASK, ASSET) for a in ("view", "add", "change")})
ADMIN = frozenset(
    {s[a] for s in (TASK, ASSET) for a in ("view", "add", "change", "delete")}
    | {TOKENS["view"], TOKENS["change"], TOKENS["delete"], "state.view_auditevent", GCRUN["view"], GCRUN["add"]}
    | {SNAPSHOTS["view"], SNAPSHOTS["add"]}  # no access scopes, users or groups: those are a superuser's
)
SCOPE_MANAGER = frozenset({*SCOPES.values(), GROUPS["view"], USERS["view"]})

VALID, EXPIRED, READ_ONLY, REVOKED, DEACTIVATED = "valid", "expired", "read-only", "revoked", "deactivated"


@dataclass(frozen=True)
class Principal:
    name: str
    perms: frozenset = frozenset()
    session: bool = False  # signed in with a session (pages, admin, API with CSRF)
    staff: bool = False
    scoped: bool = False  # DAGs etl_*, assets etl.*
    token: str | None = None  # a bearer token in this state (no session)
    roles: tuple[str, ...] = ()  # groups, for building the user
    extra: frozenset = frozenset()  # permissions of the user's own on top of the roles'
    own_grant: bool = False  # scoped by patterns granted to the user itself (else by the group etl-team)

    def can(self, *perms: str) -> bool:
        return all(p in self.perms for p in perms)

    @property
    def api_user(self) -> bool:
        """Authenticated on the API: a session, or a token that works."""
        return self.session or self.token in (VALID, READ_ONLY)


PRINCIPALS = [
    Principal("anonymous"),
    Principal("no-permission", session=True),
    Principal("view-only", VIEW_BOTH, session=True),
    Principal("change-only", CHANGE_BOTH, session=True),
    Principal("Operator", OPERATOR, session=True, roles=("Operator",)),
    Principal("Admin", ADMIN, session=True, staff=True, roles=("Admin",)),
    Principal("scoped Operator", OPERATOR, session=True, scoped=True, roles=("Operator",)),
    Principal("scoped Admin", ADMIN, session=True, staff=True, scoped=True, roles=("Admin",)),
    # An Admin given every permission on access scopes and view on users and groups (a group of one's own
    # making could): scopes stay a superuser's, so this one cannot drop or widen its own either.
    Principal(
        "scoped Admin, own grant, scope permissions",
        ADMIN | SCOPE_MANAGER,
        session=True,
        staff=True,
        scoped=True,
        roles=("Admin",),
        extra=SCOPE_MANAGER,
        own_grant=True,
    ),
    Principal("token", ADMIN, token=VALID, staff=True, roles=("Admin",)),
    Principal("token expired", ADMIN, token=EXPIRED, staff=True, roles=("Admin",)),
    Principal("token read-only", ADMIN, token=READ_ONLY, staff=True, roles=("Admin",)),
    Principal("scoped token read-only", ADMIN, token=READ_ONLY, staff=True, scoped=True, roles=("Admin",)),
    Principal("token revoked", ADMIN, token=REVOKED, staff=True, roles=("Admin",)),
    Principal("token deactivated", ADMIN, token=DEACTIVATED, staff=True, roles=("Admin",)),
]


# Expected answers -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Expect:
    status: int
    location: str | None = None  # a redirect's Location starts with this
    exact: bool = False  # ... or is exactly this

    def matches(self, response) -> bool:
        if response.status_code != self.status:
            return False
        if self.location is None:
            return True
        where = response.get("Location", "")
        return where == self.location if self.exact else where.startswith(self.location)

    def __str__(self) -> str:
        return str(self.status) if self.location is None else f"{self.status} → {self.location}"


def status(code: int) -> Expect:
    return Expect(code)


LOGIN = Expect(302, "/login/?next=")  # LoginRequiredMiddleware
ADMIN_LOGIN = Expect(302, "/admin/login/?next=")  # the admin's own check: signed in, but not staff
ADMIN_INDEX = Expect(302, "/admin/", exact=True)  # the admin's answer to an object it does not find

PAGE, HTMX, API, ADMIN_FACE, PUBLIC = "page", "htmx", "api", "admin", "public"
SAFE = ("GET", "HEAD", "OPTIONS")
ETL, ML, GHOST = "etl", "ml", "ml (missing)"  # GHOST: a DAG named out of scope that does not exist
FILTERED = "filtered"  # out-of-scope ids in a list select nothing: answered as for nothing selected


@dataclass(frozen=True)
class Case:
    """One request of the matrix, and what it needs."""

    route: str  # the URL pattern, as the URLconf spells it
    method: str
    path: str
    face: str = PAGE
    target: str = ""  # ETL or ML: the object the request addresses
    variant: str = ""  # tells apart requests to the same route, method and target
    needs: tuple[str, ...] = ()  # every one of these
    any_of: tuple = ()  # at least one of these (a permission, or a tuple of permissions all needed)
    ok: Expect = status(200)
    out_of_scope: Expect | str = status(404)  # for a scoped principal and an ML target; FILTERED: as ok
    unscoped_only: bool = False  # a scoped principal is refused (403) whatever the target
    never: bool = False  # the admin refuses it to every staff user (403)
    rule: Callable[[Case, Principal], Expect] | None = None  # a rule of its own (login, admin pages)
    data: object = None  # a dict, a str (with content_type) or a callable giving one
    content_type: str | None = None
    headers: dict = field(default_factory=dict)
    fresh_client: bool = False  # the request ends the session (logout): a client of its own
    site_view: bool = False  # one of the admin site's own views: they send the anonymous to the admin's login
    lookup_first: bool = False  # the permission depends on the object: an id out of scope is 404 before it

    @property
    def unsafe(self) -> bool:
        return self.method not in SAFE

    @property
    def label(self) -> str:
        bits = [b for b in (self.target, self.variant) if b]
        return self.route + (f" [{', '.join(bits)}]" if bits else "")

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.route, ", ".join(b for b in (self.target, self.variant) if b), self.method)


def _has(who: Principal, requirement) -> bool:
    return who.can(*requirement) if isinstance(requirement, tuple) else who.can(requirement)


def permitted(case: Case, who: Principal) -> bool:
    return who.can(*case.needs) and (not case.any_of or any(_has(who, r) for r in case.any_of))


def expected(case: Case, who: Principal, csrf: bool = True) -> Expect:
    """The rules of issue 12 (README, Permissions; docs/api.md):

    - health endpoints and the login page answer everyone; every other page needs a session: without one
      (anonymous, or a bearer token: tokens are for the API) a page redirects to the login page;
    - a write without Django's CSRF token is 403 before anything else (pages, admin, and the API with a
      session; bearer tokens need none);
    - the API answers 401 without credentials or with an expired, revoked or deactivated user's token, and
      403 to any write with a read-only token;
    - a permission missing (Django's view/add/change/delete on the store) is 403; pages that show keys or
      values need view, actions their own permission (editing a value, by the dashboard's editors, the
      admin's change form or the API's PATCH, needs view and change: ``access.policies``); restore needs
      view, add, change and delete on the store;
    - for a scoped principal, a DAG named out of scope is 403 whether it exists or not, an object addressed
      by an id out of scope is 404 like a missing one (before the permission check when the permission
      depends on the object: an audit event's store), a list of ids selects only what is in scope (200 or
      204, nothing changed), and what spans every DAG (GC's preview) is 403;
    - the Django admin is for staff only (the others are sent to a login page), then Django's model
      permissions; a state key or asset out of the user's scope is 404 there too.
    """
    if case.face == API:
        if not who.session and who.token is None:
            return status(401)
        if who.token in (EXPIRED, REVOKED, DEACTIVATED):
            return status(401)
        if case.unsafe and who.token == READ_ONLY:
            return status(403)
        if case.unsafe and who.session and not csrf:
            return status(403)
    else:
        if case.unsafe and not csrf:
            return status(403)
        if case.rule is not None:
            return case.rule(case, who)
        if case.face == PUBLIC:
            return case.ok
        if case.face == ADMIN_FACE:
            gate = admin_gate(who, case.site_view)
            if gate is not None:
                return gate
            if case.never:
                return status(403)
        elif not who.session:
            return LOGIN
    if case.rule is not None:
        return case.rule(case, who)
    if case.lookup_first and who.scoped and case.target == ML:
        return case.out_of_scope
    if not permitted(case, who):
        return status(403)
    if who.scoped:
        if case.unscoped_only:
            return status(403)
        if case.target in (ML, GHOST):
            return case.ok if case.out_of_scope == FILTERED else case.out_of_scope
    return case.ok


# The data -------------------------------------------------------------------------------------------
ETL_VALUES = {"task": ["ETL-TASK-VALUE"], "asset": ["ETL-ASSET-VALUE"]}
ML_VALUES = {"task": ["ML-SECRET-VALUE", "ML-SECRET-EXPIRED-VALUE"], "asset": ["ML-SECRET-ASSET-VALUE"]}
OUT_OF_SCOPE = ["ml_x", "ml.two", "ml-secret", "ML-SECRET"]  # every ml key, run id and value holds one
NEW_VALUE = "matrix-new-value"
ALL_MARKERS = [*OUT_OF_SCOPE, *(v for values in (ETL_VALUES, ML_VALUES) for vs in values.values() for v in vs)]


def _user(username: str, who: Principal, **fields):
    user = get_user_model().objects.create_user(username=username, password="pw-for-matrix", **fields)
    for role in who.roles:
        user.groups.add(Group.objects.get(name=role))
    for perm in who.extra if who.roles else who.perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return user


def _scope(w, who: Principal) -> None:
    if who.scoped and who.own_grant:
        grants.grant(w.user, dags=["etl_*"], assets=["etl.*"], actor=Actor.command())
    elif who.scoped:
        w.user.groups.add(w.team)
    else:  # a local account sees nothing without a grant: these are made unscoped, as an administrator would
        grants.grant(w.user, unscoped=True, actor=Actor.command())


def build_world(who: Principal) -> SimpleNamespace:
    """Two DAGs, two assets, their keys (each changed once, so that the audit trail holds both values),
    a GC event and run, a scope group, and the principal's user, token and client."""
    w = SimpleNamespace()
    now = timezone.now()
    w.etl_run = factories.make_dag_run("etl_a", run_id="manual__etl-run")
    w.ml_run = factories.make_dag_run("ml_x", run_id="manual__ml-secret-run")
    for run in (w.etl_run, w.ml_run):
        factories.make_task_instance(run, task_id="t")
    w.etl_key = factories.make_task_key(w.etl_run, key="etl-task-key", value="ETL-TASK-VALUE-BEFORE", task_id="t")
    w.ml_key = factories.make_task_key(w.ml_run, key="ml-secret-key", value="ML-SECRET-VALUE-BEFORE", task_id="t")
    factories.make_task_key(
        w.ml_run,
        key="ml-secret-expired-key",
        value="ML-SECRET-EXPIRED-VALUE",
        task_id="t",
        expires_at=now - timedelta(days=1),
    )
    w.etl_asset = factories.make_asset(name="etl.one", uri="s3://bucket/etl.one")
    w.ml_asset = factories.make_asset(name="ml.two", uri="s3://bucket/ml.two")
    for asset, run, key, value in (
        (w.etl_asset, w.etl_run, "etl-asset-key", "ETL-ASSET-VALUE-BEFORE"),
        (w.ml_asset, w.ml_run, "ml-secret-asset-key", "ML-SECRET-ASSET-VALUE-BEFORE"),
    ):
        factories.make_asset_key(
            asset, key=key, value=value, kind="task", dag_id=run.dag_id, run_id=run.run_id, task_id="t", map_index=-1
        )
    system = Actor.command()
    for key, value in ((w.etl_key, "ETL-TASK-VALUE"), (w.ml_key, "ML-SECRET-VALUE")):
        services.patch_task_key(actor=system, ref=services.TaskKeyRef(id=key.pk), value=value)
    for asset, key, value in (
        (w.etl_asset, "etl-asset-key", "ETL-ASSET-VALUE"),
        (w.ml_asset, "ml-secret-asset-key", "ML-SECRET-ASSET-VALUE"),
    ):
        services.set_asset_key(actor=system, asset_id=asset.pk, key=key, value=value, mode=services.UPDATE)
    w.etl_key.refresh_from_db()
    w.ml_key.refresh_from_db()
    w.events = {
        ("task", ETL): AuditEvent.objects.get(dag_id="etl_a"),
        ("task", ML): AuditEvent.objects.get(dag_id="ml_x"),
        ("asset", ETL): AuditEvent.objects.get(asset_id=w.etl_asset.pk),
        ("asset", ML): AuditEvent.objects.get(asset_id=w.ml_asset.pk),
    }
    w.gc_event = audit.gc_started(system, {"cutoff": now.isoformat(), "dry_run": False})
    audit.gc_finished(w.gc_event, rows_deleted=0, outcome="completed", details={})
    w.gc_run = GcRun.objects.create(
        started_at=now,
        finished_at=now,
        cutoff=now,
        dag_ids=["ml_x"],
        batch_size=1000,
        outcome=GcRun.Outcome.COMPLETED,
        host="matrix-host",
        pid=1,
    )
    # figures of both DAGs and assets: the insights' lists are searched too
    w.snapshot = stats.take_snapshot(actor=Actor.command())
    w.team = Group.objects.create(name="etl-team")
    grants.grant(w.team, dags=["etl_*"], assets=["etl.*"], actor=Actor.command())
    w.scope_row = AccessScope.objects.filter(group=w.team).first()
    w.other_user = get_user_model().objects.create_user(username="someone-else", password="pw-for-matrix")
    w.other_token, _ = ApiToken.issue(w.other_user, "someone else's")

    # The principal.
    w.user = None
    w.client = Client(enforce_csrf_checks=True)
    if who.session:
        w.user = _user("matrix-user", who, is_staff=who.staff)
        _scope(w, who)
        w.own_token, _ = ApiToken.issue(w.user, "own")
        w.client.force_login(w.user)
    elif who.token is not None:
        w.user = _user("matrix-token-user", who, is_staff=who.staff)
        _scope(w, who)
        lifetime = timedelta(hours=1)
        record, token = ApiToken.issue(w.user, who.token, expires_in=lifetime, read_only=who.token == READ_ONLY)
        if who.token == EXPIRED:
            ApiToken.objects.filter(pk=record.pk).update(expires_at=now - timedelta(seconds=1))
        elif who.token == REVOKED:
            record.revoke("revoked by the matrix")
        elif who.token == DEACTIVATED:  # bypasses the signal that revokes: the token is refused for the user
            get_user_model().objects.filter(pk=w.user.pk).update(is_active=False)
        w.own_token = record
        w.client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    else:
        w.own_token = w.other_token
    w.client.get("/login/")  # the CSRF cookie
    w.csrf = w.client.cookies["csrftoken"].value
    return w


def snapshot() -> tuple:
    """What a refused write must leave as it was: one query a database, its rows as the database returns them
    (the matrix and the sweep take it twice around every write they send; on PostgreSQL, four round trips a
    snapshot were a quarter of the sweep, and then building the same two querysets again every time was a third
    of what was left)."""
    return tuple(sorted(_rows(alias, sql, params), key=repr) for alias, (sql, params) in _snapshot_sql().items())


def _rows(alias: str, sql: str, params) -> list:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@functools.cache
def _snapshot_sql() -> dict[str, tuple]:
    """Each database's snapshot query, compiled once a process: the state of both stores, and the tokens and
    scope grants (the same columns in both halves of each union: what, id, two texts, two numbers, two moments)."""
    at = Value(None, output_field=DateTimeField())
    number, text = Value(None, output_field=IntegerField()), Value("", output_field=CharField())
    airflow = (
        TaskStateStore.objects.order_by()
        .annotate(store=Value("task"))
        .values_list("store", "id", "key", "value", "expires_at", "updated_at")
    )
    airflow = airflow.union(
        AssetStateStore.objects.order_by()
        .annotate(store=Value("asset"), at=at)
        .values_list("store", "asset_id", "key", "value", "at", "updated_at"),
        all=True,
    )
    ours = (
        ApiToken.objects.order_by()
        .annotate(what=Value("token"), text=text, number=number)
        .values_list("what", "id", "name", "text", "number", "number", "revoked_at", "expires_at")
    )
    ours = ours.union(
        AccessScope.objects.order_by()
        .annotate(what=Value("scope"), at=at)
        .values_list("what", "id", "kind", "pattern", "group_id", "user_id", "at", "at"),
        all=True,
    )
    return {
        alias: qs.query.get_compiler(using=alias).as_sql() for alias, qs in (("airflow", airflow), ("default", ours))
    }


# The matrix -----------------------------------------------------------------------------------------
HX = {"HX-Request": "true"}
JSON = "application/json"


def browse_cases(target, run, key, asset, akey) -> list:
    """The pages by Airflow's names (views.browse, actions.browse): a DAG named out of scope is 403, an asset
    out of scope 404, as on the other pages."""
    instance = f"dag_id={quote(run.dag_id)}&run_id={quote(run.run_id)}&task_id=t"
    by_dag = {"target": target, "needs": (TASK["view"],), "out_of_scope": status(403)}
    dialog = {"face": HTMX, "target": target, "headers": HX, "out_of_scope": status(403)}
    return [
        Case("browse/dags/<str:dag_id>/", "GET", f"/browse/dags/{run.dag_id}/", **by_dag),
        Case(
            "browse/dags/<str:dag_id>/compare/",
            "GET",
            f"/browse/dags/{run.dag_id}/compare/?a={quote(run.run_id)}&b={quote(run.run_id)}",
            **by_dag,
        ),
        Case("browse/run/", "GET", f"/browse/run/?dag_id={quote(run.dag_id)}&run_id={quote(run.run_id)}", **by_dag),
        Case("browse/task/", "GET", f"/browse/task/?{instance}", **by_dag),
        Case(
            "browse/run/export/",
            "GET",
            f"/browse/run/export/?dag_id={quote(run.dag_id)}&run_id={quote(run.run_id)}&format=csv",
            **by_dag,
        ),
        Case("browse/story/", "GET", f"/browse/story/?{instance}&key={quote(key.key)}", **by_dag),
        Case("browse/task/export/", "GET", f"/browse/task/export/?{instance}&format=csv", **by_dag),
        Case(
            "browse/task/<str:op>/",
            "GET",
            f"/browse/task/edit/?{instance}&key={quote(key.key)}",
            needs=(TASK["view"], TASK["change"]),
            **dialog,
        ),
        Case(
            "browse/task/<str:op>/",
            "POST",
            f"/browse/task/delete/?{instance}&key={quote(key.key)}",
            needs=(TASK["delete"],),
            data={},
            ok=status(204),
            **dialog,
        ),
        Case(
            "browse/assets/<int:asset_id>/", "GET", f"/browse/assets/{asset.pk}/", target=target, needs=(ASSET["view"],)
        ),
        Case(
            "browse/assets/<int:asset_id>/export/",
            "GET",
            f"/browse/assets/{asset.pk}/export/?format=csv",
            target=target,
            needs=(ASSET["view"],),
        ),
        Case(
            "browse/assets/<int:asset_id>/<str:op>/",
            "GET",
            f"/browse/assets/{asset.pk}/edit/?key={quote(akey)}",
            face=HTMX,
            target=target,
            headers=HX,
            needs=(ASSET["view"], ASSET["change"]),
        ),
        Case(
            "browse/assets/<int:asset_id>/<str:op>/",
            "POST",
            f"/browse/assets/{asset.pk}/delete/?key={quote(akey)}",
            face=HTMX,
            target=target,
            headers=HX,
            needs=(ASSET["delete"],),
            data={},
            ok=status(204),
        ),
    ]


DASHBOARD, API_ROUTES, ROOT, ADMIN_ROUTES = [], [], [], []


def _iso(moment) -> str:
    return moment.isoformat()


def _query(text: str) -> str:
    return quote(text, safe="")


def export_document(w, target: str) -> str:
    """A restore document of one new key (the write a restore makes, rolled back afterwards)."""
    run = w.etl_run if target == ETL else w.ml_run
    return json.dumps(
        {
            "format": "statestore-admin/keys",
            "version": 1,
            "keys": [
                {
                    "store": "task",
                    "dag_id": run.dag_id,
                    "run_id": run.run_id,
                    "task_id": "t",
                    "map_index": -1,
                    "key": "matrix-restored-key",
                    "value": NEW_VALUE,
                    "expires_at": None,
                }
            ],
        }
    )


def objects(w, target):
    if target == ETL:
        return SimpleNamespace(run=w.etl_run, key=w.etl_key, asset=w.etl_asset, akey="etl-asset-key")
    return SimpleNamespace(run=w.ml_run, key=w.ml_key, asset=w.ml_asset, akey="ml-secret-asset-key")


def listed(rows) -> str:
    """What a confirmation dialog of ``rows`` posts back: its listing of them."""
    return services.list_keys(rows).token


def dashboard_cases(w) -> list[Case]:
    at = _query(_iso(timezone.now()))  # a download's bound on updated_at, in a query string
    cases = [
        Case("", "GET", "/"),
        Case("overview/largest/", "GET", "/overview/largest/", any_of=VIEW_ANY),
        Case("insights/", "GET", "/insights/"),  # a message without view, as the overview
        # Taking a statistics snapshot reads every DAG: view on task state, no scope, and "Can add stats snapshot"
        # (the Admin role); POST only.
        Case(
            "insights/snapshot/",
            "POST",
            "/insights/snapshot/",
            needs=(TASK["view"], SNAPSHOTS["add"]),
            unscoped_only=True,
            ok=Expect(302, "/insights/", exact=True),
        ),
        # The GC page spans every DAG (as the API's dry run): view on task state and no scope; running GC also
        # needs delete on task state and "Can add gc run" (the Admin role).
        Case("gc/", "GET", "/gc/", needs=(TASK["view"],), unscoped_only=True),
        Case(
            "gc/run/",
            "GET",
            "/gc/run/?batch_size=10",
            face=HTMX,
            needs=(TASK["view"], TASK["delete"], GCRUN["add"]),
            unscoped_only=True,
            headers=HX,
        ),
        Case(
            "gc/run/",
            "POST",
            "/gc/run/",
            face=HTMX,
            needs=(TASK["view"], TASK["delete"], GCRUN["add"]),
            unscoped_only=True,
            headers=HX,
            data={"batch_size": "10", "max_batches": "1", "time_limit": "5"},
            ok=status(204),
        ),
        # The orphans report spans every DAG and asset: view on both stores and no scope (deleting orphans is
        # the command's alone).
        Case("orphans/", "GET", "/orphans/", needs=(TASK["view"], ASSET["view"]), unscoped_only=True),
        Case("dags/", "GET", "/dags/", needs=(TASK["view"],)),
        Case("browse/dags/", "GET", "/browse/dags/", needs=(TASK["view"],)),
        Case("search/", "GET", "/search/?key=key"),
        Case("audit/", "GET", "/audit/", any_of=VIEW_ANY),
        Case("search/export/", "GET", "/search/export/?key=key", variant="json", any_of=VIEW_ANY),
        Case("search/export/", "GET", "/search/export/?format=csv", variant="csv, no filter", any_of=VIEW_ANY),
        Case("audit/export/", "GET", "/audit/export/", variant="json", any_of=VIEW_ANY),
        Case("audit/export/", "GET", "/audit/export/?format=csv", variant="csv", any_of=VIEW_ANY),
        Case("account/tokens/", "GET", "/account/tokens/"),
        Case(
            "account/tokens/",
            "POST",
            "/account/tokens/",
            variant="create",
            data={"name": "matrix", "expires_in_days": "30"},
            ok=Expect(302, "/account/tokens/", exact=True),
        ),
        Case(
            "account/tokens/",
            "POST",
            "/account/tokens/",
            variant="revoke own",
            data={"revoke": str(w.own_token.pk)},
            ok=Expect(302, "/account/tokens/", exact=True),
        ),
        Case(
            "account/tokens/",
            "POST",
            "/account/tokens/",
            variant="revoke another's",
            data={"revoke": str(w.other_token.pk)},
            ok=status(404),
        ),
        Case(
            "account/tokens/<int:pk>/revoke/",
            "GET",
            f"/account/tokens/{w.own_token.pk}/revoke/",
            variant="own",
            rule=lambda case, who: status(200) if who.session else LOGIN,
        ),
        Case(
            "account/tokens/<int:pk>/revoke/",
            "GET",
            f"/account/tokens/{w.other_token.pk}/revoke/",
            variant="another's",
            rule=lambda case, who: status(404) if who.session else LOGIN,
        ),
        Case(
            "audit/restore-file/",
            "POST",
            "/audit/restore-file/",
            target=ETL,
            any_of=RESTORE_ANY,
            headers=HX,
            data=lambda: {"file": SimpleUploadedFile("keys.json", export_document(w, ETL).encode())},
        ),
        Case(
            "audit/restore-file/",
            "POST",
            "/audit/restore-file/",
            target=ML,
            any_of=RESTORE_ANY,
            headers=HX,
            data=lambda: {"file": SimpleUploadedFile("keys.json", export_document(w, ML).encode())},
            out_of_scope=status(403),
        ),
    ]
    for target in (ETL, ML):
        o = objects(w, target)
        run, key, asset, akey = o.run, o.key, o.asset, o.akey
        run_url = f"/runs/{run.pk}/"
        cases += [
            Case(
                "dags/<str:dag_id>/",
                "GET",
                f"/dags/{run.dag_id}/",
                target=target,
                needs=(TASK["view"],),
                out_of_scope=status(403),
            ),
            Case("runs/<int:run_pk>/", "GET", run_url, target=target, needs=(TASK["view"],)),
            Case("runs/<int:run_pk>/iterations/", "GET", f"{run_url}iterations/", target=target, needs=(TASK["view"],)),
            Case(
                "runs/<int:run_pk>/tasks/<str:task_id>/",
                "GET",
                f"{run_url}tasks/t/",
                target=target,
                needs=(TASK["view"],),
            ),
            Case(
                "task-instance/",
                "GET",
                f"/task-instance/?dag_id={run.dag_id}&run_id={run.run_id}&task_id=t",
                target=target,
                needs=(TASK["view"],),
                ok=Expect(302, f"{run_url}tasks/t/"),
                out_of_scope=status(403),
            ),
            Case(
                "airflow/<str:destination>/",
                "GET",
                f"/airflow/task_instance/?dag_id={run.dag_id}&run_id={run.run_id}&task_id=t&map_index={{MAP_INDEX}}",
                target=target,
                needs=(TASK["view"],),
                ok=Expect(302, f"{run_url}tasks/t/", exact=True),
                out_of_scope=status(403),
            ),
            Case(
                "audit/run/",
                "GET",
                f"/audit/run/?dag_id={run.dag_id}&run_id={run.run_id}",
                target=target,
                needs=(TASK["view"],),
                ok=Expect(302, run_url, exact=True),
                out_of_scope=status(403),
            ),
            Case(
                "runs/<int:run_pk>/tasks/<str:task_id>/add/",
                "GET",
                f"{run_url}tasks/t/add/",
                face=HTMX,
                target=target,
                needs=(TASK["add"],),
                headers=HX,
            ),
            Case(
                "runs/<int:run_pk>/tasks/<str:task_id>/add/",
                "POST",
                f"{run_url}tasks/t/add/",
                face=HTMX,
                target=target,
                needs=(TASK["add"],),
                headers=HX,
                data={"key": "matrix-new-key", "value": json.dumps(NEW_VALUE), "map_index": "-1", "expiry": "never"},
                ok=status(204),
            ),
            Case("keys/task/<int:key_id>/", "GET", f"/keys/task/{key.pk}/", target=target, needs=(TASK["view"],)),
            Case(
                "keys/task/<int:key_id>/value/",
                "GET",
                f"/keys/task/{key.pk}/value/?raw=1",
                face=HTMX,
                target=target,
                needs=(TASK["view"],),
                headers=HX,
            ),
            Case(
                "keys/task/<int:key_id>/actions/",
                "GET",
                f"/keys/task/{key.pk}/actions/",
                face=HTMX,
                target=target,
                needs=(TASK["view"],),
                headers=HX,
            ),
            Case(
                "keys/task/<int:key_id>/story/",
                "GET",
                f"/keys/task/{key.pk}/story/",
                target=target,
                needs=(TASK["view"],),
            ),
            Case(
                "dags/<str:dag_id>/compare/",
                "GET",
                f"/dags/{run.dag_id}/compare/?a={run.run_id}&b={run.run_id}",
                target=target,
                needs=(TASK["view"],),
            ),
            Case(
                "keys/task/<int:key_id>/edit/",
                "GET",
                f"/keys/task/{key.pk}/edit/",
                face=HTMX,
                target=target,
                needs=(TASK["view"], TASK["change"]),
                headers=HX,
            ),
            Case(
                "keys/task/<int:key_id>/edit/",
                "POST",
                f"/keys/task/{key.pk}/edit/",
                face=HTMX,
                target=target,
                needs=(TASK["view"], TASK["change"]),
                headers=HX,
                data={"value": json.dumps(NEW_VALUE)},
                ok=status(204),
            ),
            Case(
                "keys/task/<int:key_id>/expiry/",
                "GET",
                f"/keys/task/{key.pk}/expiry/",
                face=HTMX,
                target=target,
                needs=(TASK["change"],),
                headers=HX,
            ),
            Case(
                "keys/task/<int:key_id>/expiry/",
                "POST",
                f"/keys/task/{key.pk}/expiry/",
                face=HTMX,
                target=target,
                needs=(TASK["change"],),
                headers=HX,
                data={"expiry": "never"},
                ok=status(204),
            ),
            Case(
                "keys/task/export/",
                "GET",
                f"/keys/task/export/?ids={key.pk}&confirmed_at={at}",
                target=target,
                variant="ids",
                needs=(TASK["view"],),
                out_of_scope=FILTERED,
            ),
            Case(
                "keys/task/export/",
                "GET",
                f"/keys/task/export/?run={run.pk}&task_id=t&map_index=-1&confirmed_at={at}",
                target=target,
                variant="task instance",
                needs=(TASK["view"],),
            ),
            Case("assets/<int:asset_id>/", "GET", f"/assets/{asset.pk}/", target=target, needs=(ASSET["view"],)),
            Case(
                "assets/<int:asset_id>/key/",
                "GET",
                f"/assets/{asset.pk}/key/?key={akey}",
                target=target,
                needs=(ASSET["view"],),
            ),
            Case(
                "assets/<int:asset_id>/key/value/",
                "GET",
                f"/assets/{asset.pk}/key/value/?key={akey}&raw=1",
                face=HTMX,
                target=target,
                needs=(ASSET["view"],),
                headers=HX,
            ),
            Case(
                "assets/<int:asset_id>/key/edit/",
                "GET",
                f"/assets/{asset.pk}/key/edit/?key={akey}",
                face=HTMX,
                target=target,
                needs=(ASSET["view"], ASSET["change"]),
                headers=HX,
            ),
            Case(
                "assets/<int:asset_id>/key/edit/",
                "POST",
                f"/assets/{asset.pk}/key/edit/?key={akey}",
                face=HTMX,
                target=target,
                needs=(ASSET["view"], ASSET["change"]),
                headers=HX,
                data={"value": json.dumps(NEW_VALUE)},
                ok=status(204),
            ),
            Case(
                "assets/<int:asset_id>/add/",
                "GET",
                f"/assets/{asset.pk}/add/",
                face=HTMX,
                target=target,
                needs=(ASSET["add"],),
                headers=HX,
            ),
            Case(
                "assets/<int:asset_id>/add/",
                "POST",
                f"/assets/{asset.pk}/add/",
                face=HTMX,
                target=target,
                needs=(ASSET["add"],),
                headers=HX,
                data={"key": "matrix-new-key", "value": json.dumps(NEW_VALUE)},
                ok=status(204),
            ),
            Case(
                "assets/<int:asset_id>/delete/",
                "GET",
                f"/assets/{asset.pk}/delete/?keys={akey}",
                face=HTMX,
                target=target,
                needs=(ASSET["delete"],),
                headers=HX,
            ),
            Case(
                "assets/<int:asset_id>/delete/",
                "POST",
                f"/assets/{asset.pk}/delete/",
                face=HTMX,
                target=target,
                needs=(ASSET["delete"],),
                headers=HX,
                data={"keys": akey, "listed": listed(AssetStateStore.objects.filter(asset=asset, key=akey))},
                ok=status(204),
            ),
            Case(
                "assets/<int:asset_id>/export/",
                "GET",
                f"/assets/{asset.pk}/export/?keys={akey}&confirmed_at={at}",
                target=target,
                needs=(ASSET["view"],),
            ),
            Case("runs/<int:run_pk>/export/", "GET", f"{run_url}export/", target=target, needs=(TASK["view"],)),
            Case(
                "runs/<int:run_pk>/tasks/<str:task_id>/export/",
                "GET",
                f"{run_url}tasks/t/export/?map_index=all&format=csv",
                target=target,
                needs=(TASK["view"],),
            ),
            Case(
                "assets/<int:asset_id>/keys/export/",
                "GET",
                f"/assets/{asset.pk}/keys/export/?format=csv",
                target=target,
                needs=(ASSET["view"],),
            ),
            *browse_cases(target, run, key, asset, akey),
        ]
        cases.append(
            Case(
                "keys/task/bulk-expiry/",
                "GET",
                f"/keys/task/bulk-expiry/?ids={key.pk}",
                face=HTMX,
                target=target,
                variant="ids",
                needs=(TASK["change"],),
                headers=HX,
                out_of_scope=status(422),  # out-of-scope ids select nothing: a confirmation of nothing is refused
            )
        )
        for action in ("expire", "delete"):
            perm = TASK["change"] if action == "expire" else TASK["delete"]
            for variant, params, rows in (
                ("ids", {"ids": str(key.pk)}, TaskStateStore.objects.filter(pk=key.pk)),
                (
                    "task instance",
                    {"run": str(run.pk), "task_id": "t", "map_index": "-1"},
                    TaskStateStore.objects.filter(dag_run=run, task_id="t", map_index=-1),
                ),
            ):
                query = "&".join(f"{k}={v}" for k, v in params.items())
                scope = FILTERED if variant == "ids" else status(404)
                cases += [
                    Case(
                        "keys/task/<action>/",
                        "GET",
                        f"/keys/task/{action}/?{query}",
                        face=HTMX,
                        target=target,
                        variant=f"{action}, {variant}",
                        needs=(perm,),
                        headers=HX,
                        # out-of-scope ids select nothing, and a confirmation of nothing is refused (422)
                        out_of_scope=status(422) if variant == "ids" else scope,
                    ),
                    Case(
                        "keys/task/<action>/",
                        "POST",
                        f"/keys/task/{action}/",
                        face=HTMX,
                        target=target,
                        variant=f"{action}, {variant}",
                        needs=(perm,),
                        headers=HX,
                        data={**params, "listed": listed(rows)},
                        ok=status(204),
                        out_of_scope=scope,
                    ),
                ]
        for store in ("task", "asset"):
            event = w.events[(store, target)]
            perms = TASK if store == "task" else ASSET
            restore = (perms["view"], perms["add"], perms["change"], perms["delete"])
            cases += [
                Case(
                    "audit/<int:event_id>/",
                    "GET",
                    f"/audit/{event.pk}/",
                    target=target,
                    variant=store,
                    needs=(perms["view"],),
                    lookup_first=True,  # which store's permission: the event says
                ),
                Case(
                    "audit/<int:event_id>/restore/",
                    "GET",
                    f"/audit/{event.pk}/restore/",
                    face=HTMX,
                    target=target,
                    variant=store,
                    needs=restore,
                    headers=HX,
                    lookup_first=True,
                ),
                Case(
                    "audit/<int:event_id>/restore/",
                    "POST",
                    f"/audit/{event.pk}/restore/",
                    face=HTMX,
                    target=target,
                    variant=store,
                    needs=restore,
                    headers=HX,
                    data={},
                    lookup_first=True,
                ),
            ]
    cases += [
        Case(
            "dags/<str:dag_id>/",
            "GET",
            "/dags/ml_ghost/",
            target=GHOST,
            needs=(TASK["view"],),
            out_of_scope=status(403),
        ),
        Case(
            "audit/<int:event_id>/",
            "GET",
            f"/audit/{w.gc_event.pk}/",
            variant="GC",
            target=ML,  # GC spans every DAG: hidden from scoped users
            needs=(TASK["view"],),
            lookup_first=True,
        ),
        Case("assets/", "GET", "/assets/", needs=(ASSET["view"],)),
        Case("browse/assets/", "GET", "/browse/assets/", needs=(ASSET["view"],)),
    ]
    return cases


def api_cases(w) -> list[Case]:
    cases = [
        Case("api/statestore/v1/search/task-keys", "GET", "/api/statestore/v1/search/task-keys?key=key", face=API),
        Case("api/statestore/v1/search/asset-keys", "GET", "/api/statestore/v1/search/asset-keys?key=key", face=API),
        Case("api/statestore/v1/stats", "GET", "/api/statestore/v1/stats", face=API, any_of=VIEW_ANY),
        Case(
            "api/statestore/v1/gc/dry-run",
            "GET",
            "/api/statestore/v1/gc/dry-run",
            face=API,
            needs=(TASK["view"],),
            unscoped_only=True,
        ),
        Case(
            "api/statestore/v1/orphans",
            "GET",
            "/api/statestore/v1/orphans",
            face=API,
            needs=(TASK["view"], ASSET["view"]),
            unscoped_only=True,
        ),
        Case(
            "api/statestore/v1/insights/series", "GET", "/api/statestore/v1/insights/series", face=API, any_of=VIEW_ANY
        ),
        Case(
            "api/statestore/v1/insights/expiry", "GET", "/api/statestore/v1/insights/expiry", face=API, any_of=VIEW_ANY
        ),
        Case("api/statestore/v1/insights/sizes", "GET", "/api/statestore/v1/insights/sizes", face=API, any_of=VIEW_ANY),
        Case("api/statestore/v1/insights/top", "GET", "/api/statestore/v1/insights/top", face=API, any_of=VIEW_ANY),
        Case(
            "api/statestore/v1/insights/gc",
            "GET",
            "/api/statestore/v1/insights/gc",
            face=API,
            needs=(TASK["view"],),
            unscoped_only=True,
        ),
        Case("api/statestore/v1/audit-events", "GET", "/api/statestore/v1/audit-events", face=API, any_of=VIEW_ANY),
        Case(
            "api/statestore/v1/audit-events/<int:id>",
            "GET",
            f"/api/statestore/v1/audit-events/{w.gc_event.pk}",
            face=API,
            target=ML,
            variant="GC",
            needs=(TASK["view"],),
        ),
        Case("api/schema/", "GET", "/api/schema/", face=API),
        Case("api/docs/", "GET", "/api/docs/", face=API),  # Swagger UI: a DRF view, authenticated as the API
    ]
    cases[0] = replace(cases[0], needs=(TASK["view"],))
    cases[1] = replace(cases[1], needs=(ASSET["view"],))
    for target in (ETL, ML):
        o = objects(w, target)
        run, asset, akey = o.run, o.asset, o.akey
        base = f"/api/v2/dags/{run.dag_id}/dagRuns/{run.run_id}/taskInstances/t/state-store"
        task_route = "api/v2/dags/<str:dag_id>/dagRuns/<str:dag_run_id>/taskInstances/<str:task_id>/state-store"
        asset_base = f"/api/v2/assets/{asset.pk}/state-store"
        asset_route = "api/v2/assets/<segment:asset_id>/state-store"
        named = status(403)
        body = json.dumps({"value": NEW_VALUE})
        cases += [
            Case(task_route, "GET", base, face=API, target=target, needs=(TASK["view"],), out_of_scope=named),
            Case(
                task_route,
                "DELETE",
                base,
                face=API,
                target=target,
                needs=(TASK["delete"],),
                ok=status(204),
                out_of_scope=named,
            ),
            Case(
                f"{task_route}/<key:key>",
                "GET",
                f"{base}/{o.key.key}",
                face=API,
                target=target,
                needs=(TASK["view"],),
                out_of_scope=named,
            ),
            Case(
                f"{task_route}/<key:key>",
                "PUT",
                f"{base}/{o.key.key}",
                face=API,
                target=target,
                needs=(TASK["change"],),  # docs/api.md: change to overwrite a key, add to create one
                data=body,
                content_type=JSON,
                ok=status(204),
                out_of_scope=named,
            ),
            Case(
                f"{task_route}/<key:key>",
                "PATCH",
                f"{base}/{o.key.key}",
                face=API,
                target=target,
                needs=(TASK["view"], TASK["change"]),  # edit needs view, on every face (access.policies)
                data=body,
                content_type=JSON,
                out_of_scope=named,
            ),
            Case(
                f"{task_route}/<key:key>",
                "DELETE",
                f"{base}/{o.key.key}",
                face=API,
                target=target,
                needs=(TASK["delete"],),
                ok=status(204),
                out_of_scope=named,
            ),
            Case(asset_route, "GET", asset_base, face=API, target=target, needs=(ASSET["view"],)),
            Case(
                asset_route,
                "DELETE",
                asset_base,
                face=API,
                target=target,
                needs=(ASSET["delete"],),
                ok=status(204),
            ),
            Case(
                f"{asset_route}/<key:key>",
                "GET",
                f"{asset_base}/{akey}",
                face=API,
                target=target,
                needs=(ASSET["view"],),
            ),
            Case(
                f"{asset_route}/<key:key>",
                "PUT",
                f"{asset_base}/{akey}",
                face=API,
                target=target,
                needs=(ASSET["change"],),
                data=body,
                content_type=JSON,
                ok=status(204),
            ),
            Case(
                f"{asset_route}/<key:key>",
                "DELETE",
                f"{asset_base}/{akey}",
                face=API,
                target=target,
                needs=(ASSET["delete"],),
                ok=status(204),
            ),
            Case(
                "api/statestore/v1/restore",
                "POST",
                "/api/statestore/v1/restore",
                face=API,
                target=target,
                any_of=RESTORE_ANY,
                data=export_document(w, target),
                content_type=JSON,
                out_of_scope=status(403),
            ),
        ]
        for store in ("task", "asset"):
            event = w.events[(store, target)]
            perms = TASK if store == "task" else ASSET
            cases += [
                Case(
                    "api/statestore/v1/audit-events/<int:id>",
                    "GET",
                    f"/api/statestore/v1/audit-events/{event.pk}",
                    face=API,
                    target=target,
                    variant=store,
                    needs=(perms["view"],),
                ),
                Case(
                    "api/statestore/v1/audit-events/<int:id>/restore",
                    "POST",
                    f"/api/statestore/v1/audit-events/{event.pk}/restore",
                    face=API,
                    target=target,
                    variant=store,
                    needs=(perms["view"], perms["add"], perms["change"], perms["delete"]),
                    data="{}",
                    content_type=JSON,
                ),
            ]
    cases.append(
        Case(
            "api/v2/dags/<str:dag_id>/dagRuns/<str:dag_run_id>/taskInstances/<str:task_id>/state-store",
            "GET",
            "/api/v2/dags/ml_ghost/dagRuns/r/taskInstances/t/state-store",
            face=API,
            target=GHOST,
            needs=(TASK["view"],),  # no such task instance: an empty list, as in Airflow
            out_of_scope=status(403),
        )
    )
    return cases


def root_cases(w) -> list[Case]:
    def signed_out(case, who):  # LogoutView needs a session (LoginRequiredMiddleware), then goes to the login
        return Expect(302, "/login/", exact=True) if who.session else LOGIN

    return [
        Case("healthz", "GET", "/healthz", face=PUBLIC),
        Case("readyz", "GET", "/readyz", face=PUBLIC),
        Case("metrics", "GET", "/metrics", face=PUBLIC, ok=status(404)),  # off without METRICS_TOKEN/_ALLOWED_IPS
        Case("login/", "GET", "/login/", face=PUBLIC),
        Case(
            "login/",
            "POST",
            "/login/",
            face=PUBLIC,
            data={"username": "matrix-nobody", "password": "wrong"},
            ok=status(200),  # the form again, with its error
        ),
        Case("logout/", "POST", "/logout/", rule=signed_out, fresh_client=True),
        # manage.py break_glass's links: an unknown one is refused to everyone, signed in or not.
        Case("break-glass/", "GET", "/break-glass/?token=matrix-unknown", face=PUBLIC, ok=status(403)),
        Case("break-glass/", "POST", "/break-glass/?token=matrix-unknown", face=PUBLIC, ok=status(403)),
        # Single sign-on's two steps answer everyone (they are how one signs in): 404 while it is off (no OIDC_ISSUER).
        Case("oidc/login/", "GET", "/oidc/login/", face=PUBLIC, ok=status(404)),
        Case("oidc/callback/", "GET", "/oidc/callback/", face=PUBLIC, ok=status(404)),
        # The language menu answers everyone (the sign-in page has it too): a cookie, and the account's choice for
        # whoever is signed in; back to the page it was chosen on. The scripts' strings are no secret either.
        Case(
            "language/",
            "POST",
            "/language/",
            face=PUBLIC,
            data={"language": "de", "next": "/"},
            ok=Expect(302, "/", exact=True),
        ),
        Case("jsi18n/", "GET", "/jsi18n/?language=de", face=PUBLIC),
    ]


# The Django admin: each registered model, with the permissions each of its pages needs.
NEVER = ("<never>",)  # a permission nobody has: 403 to every staff user


@dataclass(frozen=True)
class AdminModel:
    """``list``, ``history``, ``change``: at least one of these permissions (Django: view or change);
    ``add``, ``save`` (POST of the change form), ``delete``: this permission, or NEVER."""

    app: str
    model: str
    perms: dict  # Django's four permissions of the model
    list: tuple | None = None
    add: tuple | None = None
    history: tuple | None = None
    change: tuple | None = None
    save: tuple | None = None
    delete: tuple | None = None
    action: tuple[str, str, Expect] | None = None  # (name, permission, success) of a changelist action
    add_data: Callable | None = None
    change_data: Callable | None = None
    change_page: Callable | None = None  # (world, pk) -> Expect: the change page is elsewhere
    missing: Expect = Expect(302, "/admin/", exact=True)  # an object the user's queryset lacks (Django's default)
    unscoped_only: bool = False  # hidden from scoped users (403), as GC runs are

    def needs(self, name: str) -> tuple:
        p = self.perms
        defaults = {
            "list": (p["view"], p["change"]),
            "add": (p["add"],),
            "history": (p["view"], p["change"]),
            "change": (p["view"], p["change"]),
            "save": (p["change"],),
            "delete": (p["delete"],),
        }
        value = getattr(self, name)
        return defaults[name] if value is None else value


def _scope_form(w, pattern="matrix_*"):
    return {"group": str(w.team.pk), "user": "", "kind": "dag", "pattern": pattern}


CHANGELIST_AGAIN = Expect(302, "/admin/")  # an action done: back to the list
NOT_FOUND = status(404)

ADMIN_MODELS = [
    # Task state: the list and reading values need view; the change form edits value and expiry (change);
    # keys are never added nor deleted one by one here (the "Delete" action goes through the service). A key
    # out of the user's scope is a 404, as a missing one.
    AdminModel(
        "airflow",
        "taskstatestore",
        TASK,
        list=(TASK["view"],),
        add=NEVER,
        delete=NEVER,
        action=("expire_now", TASK["change"], CHANGELIST_AGAIN),
        change_data=lambda w: {"new_value": json.dumps(NEW_VALUE), "expiry": "keep", "expires_at_text": ""},
        missing=NOT_FOUND,
    ),
    # Assets (asset state has a composite key the admin cannot register): a read-only list for viewers of
    # asset state; an asset's page is the dashboard's.
    AdminModel(
        "airflow",
        "asset",
        ASSET,
        list=(ASSET["view"],),
        add=NEVER,
        history=(ASSET["view"],),
        change=(ASSET["view"],),
        save=(ASSET["view"],),
        delete=NEVER,
        change_page=lambda w, pk: Expect(302, f"/assets/{pk}/", exact=True),
        missing=NOT_FOUND,
    ),
    AdminModel("state", "gcrun", GCRUN, add=NEVER, save=NEVER, delete=NEVER, unscoped_only=True),
    AdminModel("state", "statssnapshot", SNAPSHOTS, add=NEVER, save=NEVER, delete=NEVER, unscoped_only=True),
    # Access scopes are a superuser's alone, whatever the permissions on the model (none of the roles has
    # them): 403 to every other staff user, so that a scoped Admin cannot drop or widen their own.
    AdminModel(
        "state",
        "accessscope",
        SCOPES,
        list=NEVER,
        add=NEVER,
        history=NEVER,
        change=NEVER,
        save=NEVER,
        delete=NEVER,
        action=("delete_selected", SCOPES["delete"], status(200)),  # its confirmation page
        add_data=_scope_form,
        change_data=lambda w: _scope_form(w, "etl_renamed_*"),
    ),
    AdminModel(
        "auth",
        "group",
        GROUPS,
        action=("delete_selected", GROUPS["delete"], status(200)),
        add_data=lambda w: {"name": "matrix-group"},
        change_data=lambda w: {"name": "etl-team"},
    ),
    AdminModel(
        "auth",
        "user",
        USERS,
        action=("delete_selected", USERS["delete"], status(200)),
        add_data=lambda w: {"username": "matrix-new", "password1": "x-Matrix-9a", "password2": "x-Matrix-9a"},
        change_data=lambda w: {"username": "someone-else"},
    ),
    # Tokens are created by their users only; administrators list, rename and revoke them.
    AdminModel(
        "tokens",
        "apitoken",
        TOKENS,
        add=NEVER,
        action=("revoke", TOKENS["change"], CHANGELIST_AGAIN),
        change_data=lambda w: {"name": "renamed by the matrix"},
    ),
    *[
        AdminModel("axes", model, perms, action=("delete_selected", perms["delete"], status(200)))
        for model, perms in AXES.items()
    ],
]


def _admin_objects(w, m: AdminModel) -> list[tuple[str, object]]:
    """(target, primary key) of the objects whose pages are requested (made once per world)."""
    cache = w.__dict__.setdefault("admin_objects", {})
    if m.model not in cache:
        cache[m.model] = _make_admin_objects(w, m)
    return cache[m.model]


def _make_admin_objects(w, m: AdminModel) -> list[tuple[str, object]]:
    from axes.models import AccessAttempt, AccessFailureLog, AccessLog

    known = {
        "taskstatestore": [(ETL, w.etl_key.pk), (ML, w.ml_key.pk)],
        "asset": [(ETL, w.etl_asset.pk), (ML, w.ml_asset.pk)],
        "gcrun": [("", w.gc_run.pk)],
        "statssnapshot": [("", w.snapshot.pk)],
        "accessscope": [("", w.scope_row.pk)],
        "group": [("", w.team.pk)],
        "user": [("", w.other_user.pk)],
        "apitoken": [("", w.other_token.pk)],
    }
    if m.model in known:
        return known[m.model]
    now = timezone.now()
    common = {"user_agent": "matrix", "ip_address": "10.0.0.1", "username": "matrix-nobody", "http_accept": "*/*"}
    common.update(path_info="/login/", attempt_time=now)
    if m.model == "accessattempt":
        row = AccessAttempt.objects.create(**common, get_data="", post_data="", failures_since_start=1)
    elif m.model == "accesslog":
        row = AccessLog.objects.create(**common)
    else:
        row = AccessFailureLog.objects.create(**common, locked_out=False)
    return [("", row.pk)]


def admin_model_cases(w, m: AdminModel) -> list[Case]:
    route = f"admin/{m.app}/{m.model}/"
    base = f"/{route}"

    def case(suffix, method, path, need, *, any_of=False, **kw):
        """``need``: the permissions (all of them, or with any_of at least one); NEVER: 403 to everyone."""
        requirement = {"any_of": need} if any_of else {"needs": need}
        # An admin whose get_object answers 404 (the state models) looks the object up before any permission.
        lookup_first = m.missing == NOT_FOUND and kw.get("target") == ML and "object_id" in suffix
        return Case(
            route + suffix,
            method,
            path,
            face=ADMIN_FACE,
            never=need == NEVER and not lookup_first,
            lookup_first=lookup_first,
            unscoped_only=m.unscoped_only,
            **requirement,
            **kw,
        )

    cases = [case("", "GET", base, m.needs("list"), any_of=True, out_of_scope=FILTERED)]
    if m.action is not None:
        name, perm, ok = m.action

        def action_rule(case, who, perm=perm, ok=ok):
            """The list's permission first; without the action's, no action is offered: the list again. Ids
            out of the user's scope select nothing (the action says so)."""
            if gate := admin_gate(who):
                return gate
            if not any(who.can(p) for p in m.needs("list")):
                return status(403)
            return ok if who.can(perm) else status(200)

        for target, pk in _admin_objects(w, m):
            data = {"action": name, "_selected_action": [str(pk)], "index": "0"}
            cases.append(
                case(
                    "",
                    "POST",
                    base,
                    (perm,),
                    target=target,
                    variant=name,
                    data=data,
                    rule=action_rule,
                    ok=ok,
                    out_of_scope=FILTERED,
                )
            )
    else:  # no action for anyone: a POST is the list again
        cases.append(case("", "POST", base, m.needs("list"), any_of=True, data={}, out_of_scope=FILTERED))
    add_data = (lambda: m.add_data(w)) if m.add_data else {}
    cases += [
        case("add/", "GET", f"{base}add/", m.needs("add")),
        case("add/", "POST", f"{base}add/", m.needs("add"), data=add_data, ok=Expect(302, base)),
    ]
    for target, pk in _admin_objects(w, m):
        url = f"{base}{pk}/"
        kw = {"target": target, "out_of_scope": m.missing}
        change_ok = m.change_page(w, pk) if m.change_page else status(200)
        save_ok = m.change_page(w, pk) if m.change_page else Expect(302, base)
        change_data = (lambda: m.change_data(w)) if m.change_data else {}
        cases += [
            case("<path:object_id>/history/", "GET", f"{url}history/", m.needs("history"), any_of=True, **kw),
            case("<path:object_id>/delete/", "GET", f"{url}delete/", m.needs("delete"), **kw),
            case(
                "<path:object_id>/delete/",
                "POST",
                f"{url}delete/",
                m.needs("delete"),
                data={"post": "yes"},
                ok=Expect(302, base),
                **kw,
            ),
            case(
                "<path:object_id>/change/", "GET", f"{url}change/", m.needs("change"), any_of=True, ok=change_ok, **kw
            ),
            case(
                "<path:object_id>/change/", "POST", f"{url}change/", m.needs("save"), data=change_data, ok=save_ok, **kw
            ),
            # A bare object URL redirects to its change page for any staff user (no lookup, no permission).
            case(
                "<path:object_id>/",
                "GET",
                url,
                (),
                target=target,
                rule=lambda c, who: admin_gate(who) or Expect(302, c.path + "change/", exact=True),
            ),
        ]
        if m.model == "user":
            password = {"password1": "x-Matrix-9a", "password2": "x-Matrix-9a"}
            cases += [
                case("<id>/password/", "GET", f"{url}password/", (USERS["change"],)),
                case(
                    "<id>/password/", "POST", f"{url}password/", (USERS["change"],), data=password, ok=Expect(302, base)
                ),
            ]
    return cases


def admin_gate(who: Principal, site_view: bool = False) -> Expect | None:
    """The admin's pages need a session, then a staff user (the admin's own check). Without a session, the
    model pages go to the login page (LoginRequiredMiddleware), the admin site's own views (index, app lists,
    password change, jsi18n, autocomplete, "view on site", the catch-all) to the admin's login page (Django
    exempts them from LoginRequiredMiddleware)."""
    if not who.session:
        return ADMIN_LOGIN if site_view else LOGIN
    if not who.staff:
        return ADMIN_LOGIN
    return None


def admin_cases(w) -> list[Case]:
    def staff_only(ok: Expect, otherwise: Expect | None = None):
        def rule(case, who):
            if not who.staff or not who.session:
                return otherwise or ADMIN_LOGIN
            return ok

        return rule

    def admin_logout(case, who):
        if not who.session:
            return ADMIN_LOGIN
        if not who.staff:  # signed in but not staff: back to the admin's index (which asks to log in)
            return Expect(302, "/admin/", exact=True)
        return Expect(302, "/login/", exact=True)  # signed out, then LOGOUT_REDIRECT_URL

    def admin_login(case, who):  # the admin's login page answers anyone; a staff user is sent to the index
        if case.method == "GET" and who.session and who.staff:
            return ADMIN_INDEX
        return status(200)

    group_type = ContentType.objects.get_for_model(Group).pk
    SITE = {"face": ADMIN_FACE, "site_view": True}  # noqa: N806
    cases = [
        Case("admin/", "GET", "/admin/", **SITE),
        Case("admin/login/", "GET", "/admin/login/", **SITE, rule=admin_login),
        Case(
            "admin/login/",
            "POST",
            "/admin/login/",
            **SITE,
            rule=admin_login,
            data={"username": "matrix-nobody", "password": "wrong"},
        ),
        Case(
            "admin/logout/",
            "POST",
            "/admin/logout/",
            **SITE,
            rule=admin_logout,
            fresh_client=True,
        ),
        Case("admin/password_change/", "GET", "/admin/password_change/", **SITE),
        Case(
            "admin/password_change/",
            "POST",
            "/admin/password_change/",
            **SITE,
            data={"old_password": "wrong", "new_password1": "x-Matrix-9a", "new_password2": "x-Matrix-9a"},
        ),
        Case("admin/password_change/done/", "GET", "/admin/password_change/done/", **SITE),
        Case("admin/jsi18n/", "GET", "/admin/jsi18n/", **SITE),
        # The scope form's autocompletes: the related model's view permission (groups, users).
        Case(
            "admin/autocomplete/",
            "GET",
            "/admin/autocomplete/?app_label=state&model_name=accessscope&field_name=group&term=etl",
            **SITE,
            variant="group",
            needs=(GROUPS["view"],),
        ),
        Case(
            "admin/autocomplete/",
            "GET",
            "/admin/autocomplete/?app_label=state&model_name=accessscope&field_name=user&term=some",
            **SITE,
            variant="user",
            needs=(USERS["view"],),
        ),
        # "View on site": no state model has a page of its own outside the admin.
        Case(
            "admin/r/<path:content_type_id>/<path:object_id>/",
            "GET",
            f"/admin/r/{group_type}/{w.team.pk}/",
            **SITE,
            ok=status(404),
        ),
        Case("admin/(?P<url>.*)$", "GET", "/admin/no-such-page/", **SITE, ok=status(404)),
    ]
    # An app's page lists the models the user may see: a scoped user sees none of state's (GC runs and
    # snapshots span every DAG; access scopes are a superuser's).
    apps = {
        "airflow": ((TASK["view"], ASSET["view"]), False),
        "state": ((GCRUN["view"], SNAPSHOTS["view"]), True),
        "auth": ((GROUPS["view"], USERS["view"]), False),
        "tokens": ((TOKENS["view"],), False),
        "axes": (tuple(perms["view"] for perms in AXES.values()), False),
    }
    app_route = next(r for r in admin_routes() if "(?P<app_label>" in r)
    for app, (views, unscoped) in apps.items():
        cases.append(
            Case(
                app_route,
                "GET",
                f"/admin/{app}/",
                **SITE,
                variant=app,
                rule=lambda case, who, views=views, unscoped=unscoped: staff_only(
                    status(200) if any(who.can(v) for v in views) and not (unscoped and who.scoped) else status(404)
                )(case, who),
            )
        )
    for m in ADMIN_MODELS:
        cases += admin_model_cases(w, m)
    return cases


def all_cases(w) -> list[Case]:
    return root_cases(w) + dashboard_cases(w) + api_cases(w) + admin_cases(w)


# The URLconf ------------------------------------------------------------------------------------------
def url_routes(patterns=None, prefix="") -> list[str]:
    found = []
    for pattern in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(pattern, URLResolver):
            found += url_routes(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            found.append(prefix + str(pattern.pattern))
    return found


def admin_routes() -> list[str]:
    return [r for r in url_routes() if r.startswith("admin/")]


# Known gaps: cells (route, target/variant, method, principal) where the code does not yet follow the rules.
# Each has a reason; a listed cell that matches makes the test fail, so that the list stays honest.
KNOWN_GAPS: dict[tuple[str, str, str, str], str] = {}


# Running the matrix -------------------------------------------------------------------------------------
@dataclass
class Outcome:
    case: Case
    method: str
    expected: Expect
    actual: str
    problem: str = ""
    seen: frozenset = frozenset()  # the markers in the body


def _leaks(case: Case, who: Principal, body: str, request_text: str) -> list[str]:
    """What this principal may not see, found in the body (unless the request itself sent it)."""
    forbidden = []
    if who.scoped:
        forbidden += OUT_OF_SCOPE
    for store, store_perms in (("task", TASK), ("asset", ASSET)):
        if not who.can(store_perms["view"]):
            forbidden += ETL_VALUES[store] + ML_VALUES[store]
    return [marker for marker in forbidden if marker in body and marker not in request_text]


def offsite_redirect(response) -> str:
    """A redirect (``Location``, or htmx's ``HX-Redirect``) that may leave this site, or "": only a path on
    this site (not ``//host`` nor ``/\\host``, which browsers read as another host) is safe."""
    for header in ("Location", "HX-Redirect"):
        where = response.get(header, "")
        if where and (not where.startswith("/") or where.startswith(("//", "/\\"))):
            return f"{header}: {where}"
    return ""


def _body(response) -> str:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return content.decode("utf-8", "replace")


def _request_text(case: Case, data) -> str:
    if isinstance(data, dict):
        parts = []
        for name, value in data.items():
            if isinstance(value, SimpleUploadedFile):
                value.seek(0)
                parts.append(value.read().decode())
                value.seek(0)
            else:
                parts.append(f"{name}={value}")
        return case.path + " " + " ".join(parts)
    return case.path + " " + (data if isinstance(data, str) else "")


def run_case(w, who: Principal, case: Case, csrf: bool) -> Outcome:
    client = w.client
    if case.fresh_client:
        client = Client(enforce_csrf_checks=True, **{k: v for k, v in w.client.defaults.items()})
        client.cookies = w.client.cookies.__class__(w.client.cookies)
    data = case.data() if callable(case.data) else case.data
    headers = dict(case.headers)
    if case.unsafe and csrf:
        headers["X-CSRFToken"] = w.csrf
    kwargs = {"headers": headers}
    if data is not None:
        kwargs["data"] = data
    if case.content_type:
        kwargs["content_type"] = case.content_type
    want = expected(case, who, csrf)
    request_text = _request_text(case, data)
    with transaction.atomic(using="default"), transaction.atomic(using="airflow"):
        before = snapshot() if case.unsafe else None
        response = getattr(client, case.method.lower())(case.path, **kwargs)
        body = _body(response)
        after = snapshot() if case.unsafe else None
        transaction.set_rollback(True, using="airflow")
        transaction.set_rollback(True, using="default")
    actual = str(response.status_code)
    if response.status_code in (301, 302, 303, 307, 308):
        actual += f" → {response.get('Location', '')}"
    problems = []
    if not want.matches(response):
        problems.append("status")
    refused = want.status >= 400 or want in (LOGIN, ADMIN_LOGIN) or response.status_code >= 400
    filtered = who.scoped and case.target in (ML, GHOST) and case.out_of_scope == FILTERED
    if case.unsafe and (refused or filtered) and before != after:
        problems.append("state changed")
    if away := offsite_redirect(response):
        problems.append(f"redirects off the site: {away}")
    leaks = _leaks(case, who, body, request_text)
    if leaks:
        problems.append("leaks " + ", ".join(leaks))
    method = case.method if csrf else f"{case.method} (no CSRF)"
    seen = frozenset(m for m in ALL_MARKERS if m in body)
    return Outcome(case, method, want, actual, "; ".join(problems), seen)


def run_matrix(who: Principal) -> list[Outcome]:
    w = build_world(who)
    outcomes = []
    for case in all_cases(w):
        outcomes.append(run_case(w, who, case, csrf=True))
        if case.unsafe and who.token is None:  # the same write without the CSRF token (sessions, anonymous)
            outcomes.append(run_case(w, who, case, csrf=False))
    return outcomes


def table(rows: list[tuple]) -> str:
    header = ("url", "method", "principal", "expected", "actual", "problem")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [" | ".join(str(v).ljust(widths[i]) for i, v in enumerate(r)) for r in [header, *rows]]
    return "\n".join([lines[0], "-+-".join("-" * w for w in widths), *lines[1:]])


@pytest.fixture(autouse=True)
def _no_token_throttle(settings):
    settings.TOKEN_FAILURE_LIMIT = 0  # the refused tokens below are many; throttling has its own tests


@pytest.mark.parametrize("who", PRINCIPALS, ids=[p.name for p in PRINCIPALS])
def test_permission_matrix(who):
    outcomes = run_matrix(who)
    assert len(outcomes) > 150
    failing, fixed = [], []
    for o in outcomes:
        gap = (o.case.route, o.case.key[1], o.method, who.name)
        if o.problem and gap not in KNOWN_GAPS:
            failing.append((o.case.label, o.method, who.name, str(o.expected), o.actual, o.problem))
        elif not o.problem and gap in KNOWN_GAPS:
            fixed.append((o.case.label, o.method, who.name, str(o.expected), o.actual, "fixed: " + KNOWN_GAPS[gap]))
    message = ""
    if who.api_user and not who.scoped and who.can(TASK["view"], ASSET["view"]):
        # The searches above prove something only if these bodies do show every marker to those who may see it.
        unseen = set(ALL_MARKERS) - set().union(*(o.seen for o in outcomes))
        assert not unseen, f"never shown, even to {who.name}: {sorted(unseen)}"
    if failing:
        message += f"{len(failing)} cell(s) differ from the rules:\n{table(failing)}\n"
    if fixed:
        message += f"{len(fixed)} known gap(s) now pass: remove them from KNOWN_GAPS:\n{table(fixed)}\n"
    assert not message, message


def test_the_snapshot_sees_every_kind_of_write_to_what_it_watches(operator):
    """The snapshot is what "changes nothing" means in the matrix and the sweep: a row added, changed or
    deleted in any of the four tables it reads is a different snapshot."""
    run = factories.make_dag_run("snap")
    factories.make_task_instance(run, task_id="t")
    key = factories.make_task_key(run, key="k", value="1", task_id="t")
    asset_key = factories.make_asset_key(factories.make_asset(name="snap.asset"), key="k", value="1")
    token, _ = ApiToken.issue(operator, "snap")
    grant = AccessScope.objects.create(user=operator, kind=AccessScope.Kind.DAG, pattern="snap*")
    writes = {
        "task value": lambda: TaskStateStore.objects.filter(pk=key.pk).update(value="2"),
        "task expiry": lambda: TaskStateStore.objects.filter(pk=key.pk).update(expires_at=timezone.now()),
        "task key deleted": lambda: TaskStateStore.objects.filter(pk=key.pk).delete(),
        "asset value": lambda: AssetStateStore.objects.filter(asset_id=asset_key.asset_id).update(value="2"),
        "asset key added": lambda: factories.make_asset_key(factories.make_asset(name="snap.two"), key="k"),
        "token revoked": lambda: ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now()),
        "grant changed": lambda: AccessScope.objects.filter(pk=grant.pk).update(pattern="other*"),
        "grant deleted": lambda: AccessScope.objects.filter(pk=grant.pk).delete(),
    }
    unseen = []
    for name, write in writes.items():
        with transaction.atomic(using="default"), transaction.atomic(using="airflow"):
            before = snapshot()
            write()
            if snapshot() == before:
                unseen.append(name)
            transaction.set_rollback(True, using="airflow")
            transaction.set_rollback(True, using="default")
    assert snapshot() == snapshot()
    assert not unseen, f"writes the snapshot does not see: {unseen}"


def test_the_matrix_lists_every_url():
    """Every URL pattern of the URLconf is in the matrix (and the matrix names no pattern that is gone); every
    model in the admin is in ADMIN_MODELS."""
    w = build_world(PRINCIPALS[0])
    listed = {case.route for case in all_cases(w)}
    routes = set(url_routes())
    missing, stale = sorted(routes - listed), sorted(listed - routes)
    assert not missing, "URL patterns the permission matrix does not list (add them with their rules):\n" + "\n".join(
        missing
    )
    assert not stale, "The permission matrix lists URL patterns that no longer exist:\n" + "\n".join(stale)
    registered = {(m._meta.app_label, m._meta.model_name) for m in admin.site._registry}
    assert registered == {(m.app, m.model) for m in ADMIN_MODELS}


# The table, written down: tests/permission_matrix.md -----------------------------------------------------
DOCUMENT = Path(__file__).resolve().parents[1] / "permission_matrix.md"
SHORT = {
    "anonymous": "anon",
    "no-permission": "none",
    "view-only": "view",
    "change-only": "change",
    "Operator": "Op",
    "Admin": "Admin",
    "scoped Operator": "sOp",
    "scoped Admin": "sAdmin",
    "scoped Admin, own grant, scope permissions": "sAdmin+",
    "scoped token read-only": "stRO",
    "token": "tok",
    "token expired": "tExp",
    "token read-only": "tRO",
    "token revoked": "tRev",
    "token deactivated": "tDeact",
}


def _cell(want: Expect) -> str:
    if want == LOGIN:
        return "302 login"
    if want == ADMIN_LOGIN:
        return "302 admin login"
    return str(want.status)


def render_document(w) -> str:
    rows = []
    for case in all_cases(w):
        cells = []
        for who in PRINCIPALS:
            cell = _cell(expected(case, who))
            if (case.route, case.key[1], case.method, who.name) in KNOWN_GAPS:
                cell += " (gap)"
            cells.append(cell)
        bits = ", ".join(b for b in (case.target, case.variant) if b)
        url = f"`{case.route or '/'}`" + (f" {bits}" if bits else "")
        rows.append(f"| {url} | {case.method} | " + " | ".join(cells) + " |")
    gaps = "\n".join(
        f"- `{route}` {target} {method}, {who}: {reason}" for (route, target, method, who), reason in KNOWN_GAPS.items()
    )
    principals = "\n".join(
        f"- **{SHORT[p.name]}**: {p.name}"
        + (f" (groups {', '.join(p.roles)})" if p.roles else "")
        + (", staff" if p.staff else "")
        + (f", permissions {', '.join(sorted(p.extra))}" if p.extra else "")
        + (", scoped to DAGs etl_* and assets etl.*" if p.scoped else "")
        + (" (granted to the user itself)" if p.own_grant else "")
        for p in PRINCIPALS
    )
    rules = "\n".join(line.strip() for line in expected.__doc__.strip().splitlines()[2:])
    return (
        f"""# The permission matrix

Written by `tests/contracts/test_permission_matrix.py` (`UPDATE_PERMISSION_MATRIX=1 .venv/bin/pytest
tests/contracts/test_permission_matrix.py -k document`); the test fails when this file is not what the rules give.
Every URL pattern of the URLconf is listed, each with the methods it serves, and requested once per
principal (objects in scope: DAG etl_a, asset etl.one; out of scope: DAG ml_x, asset ml.two; "ml (missing)"
is a DAG named out of scope that does not exist). Every write is also sent without its CSRF token by the
session principals and anonymous: 403 before anything else (the API: 401 anonymous, 403 signed in).

Principals:
{principals}

Rules:
{rules}

Besides the status, every response is searched: a scoped principal never gets a key, value, DAG id or asset
name of ml_x / ml.two (unless the request named it); a principal without `view` on a store never gets one of
its values; after a refused write the state tables, tokens and scopes are unchanged.

Cells: the expected status; "302 login" is the login page, "302 admin login" the admin's; "(gap)" marks a
known gap, where the code differs today:
{gaps}

| URL | method | {" | ".join(SHORT[p.name] for p in PRINCIPALS)} |
|---|---|{"---|" * len(PRINCIPALS)}
"""
        + "\n".join(rows)
        + "\n"
    )


def test_the_document_is_the_matrix():
    text = render_document(build_world(PRINCIPALS[0]))
    if os.environ.get("UPDATE_PERMISSION_MATRIX"):
        DOCUMENT.write_text(text)
    assert DOCUMENT.exists() and DOCUMENT.read_text() == text, (
        f"{DOCUMENT.name} is not the matrix: UPDATE_PERMISSION_MATRIX=1 .venv/bin/pytest {__file__} -k document"
    )
