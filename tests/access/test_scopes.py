"""Roles and scopes (issue 12): glob patterns matched alike in Python and in SQL, whose scope a user has,
the grant_scope / revoke_scope commands, the Viewer / Operator / Admin groups, and a scoped Operator's
view through every face (pages, Airflow's API, our API, bulk actions, restore, GC)."""

import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Group, Permission
from django.core.management import CommandError, call_command
from django.utils import timezone

from statestore_admin import grants
from statestore_admin.access import scopes
from statestore_admin.access.actors import Actor
from statestore_admin.access.scopes import EVERYTHING, Scope, glob_q, glob_regex, scope_of
from statestore_admin.airflow.models import Asset, AssetStateStore, DagRun, TaskStateStore
from statestore_admin.core.values import NEVER, Expiry
from statestore_admin.identity import roles
from statestore_admin.records.models import AccessScope, AuditEvent, ExternalIdentity
from statestore_admin.state import services
from statestore_admin.state.selectors import TaskAddress
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}


# Patterns: Python and SQL agree ------------------------------------------------------------------
def glob_oracle(pattern: str, text: str) -> bool:
    """What a glob means, written without regular expressions: ``*`` any run, ``?`` one character,
    everything else itself (case-sensitive)."""
    if not pattern:
        return not text
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        return any(glob_oracle(rest, text[i:]) for i in range(len(text) + 1))
    return bool(text) and (head == "?" or head == text[0]) and glob_oracle(rest, text[1:])


# Each pattern with inputs that match it and near misses. Upper-case variants are in the case test below.
PATTERNS = {
    "etl_*": ["etl_a", "etl_", "etl_orders_daily", "etlxa", "etl", "xetl_a", "etl%a"],
    "ml_training": ["ml_training", "mlxtraining", "ml_training2", "ml_trainin", "ml%training"],
    "a?c": ["abc", "a_c", "a.c", "a%c", "ac", "abbc", "xabc"],
    "s3://bucket/*": ["s3://bucket/", "s3://bucket/a/b.csv", "s3://bucketx", "s3://bucket", "s3:/xbucket/a"],
    "x.y+(z)": ["x.y+(z)", "xay+(z)", "x.yy(z)", "x.y+z", "x.y+(z)x", "x.yyy(z)"],
    "*": ["", "anything", "ml_x", "s3://ml/two"],
    "%": ["%", "x", "%%", ""],
    "_": ["_", "x", "__"],
    "a%b_*": ["a%b_", "a%b_c", "axbyc", "a%bxc", "ab"],
    "*_x?": ["_xy", "a_xy", "axxy", "_x", "a_xyz"],
    "[ab]*": ["[ab]", "[ab]x", "a", "ax", "b"],
    "a\\b?": ["a\\bc", "abc", "a\\b"],
    "^x$*": ["^x$", "^x$y", "x", "xy"],
    "a|b*": ["a|b", "a|bc", "a", "b"],
    "caf?_é*": ["café_é", "cafe_éx", "caf_é", "café_e"],
    "?": ["a", "é", "", "ab"],
    "*.*": ["a.b", ".", "ab", "a.b.c"],
    "etl_?_*_v?": ["etl_a_x_v1", "etl_a__v1", "etl_ab_x_v1", "etl_a_x_v12"],
}
EVERY_INPUT = sorted({text for texts in PATTERNS.values() for text in texts if text})


def test_the_oracle_itself():
    assert glob_oracle("etl_*", "etl_a") and not glob_oracle("etl_*", "etlxa")
    assert glob_oracle("a?c", "abc") and not glob_oracle("a?c", "ac")
    assert glob_oracle("*", "") and not glob_oracle("?", "")


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_python_matching_is_the_glob(pattern):
    scope = Scope(dags=(pattern,), assets=(pattern,))
    for text in PATTERNS[pattern] + EVERY_INPUT:
        expected = glob_oracle(pattern, text)
        assert scope.allows_dag(text) is expected, (pattern, text)
        assert scope.allows_asset(text, None) is expected, (pattern, text)
        assert scope.allows_asset(None, text) is expected, (pattern, text)
        assert bool(re.fullmatch(glob_regex(pattern), text, re.S)) is expected, (pattern, text)


@pytest.fixture
def named_rows(dag_run_factory, asset_factory):
    """One DAG run per input (dag_id), one asset per input (name) and one per input (URI)."""
    for number, text in enumerate(EVERY_INPUT):
        dag_run_factory(dag_id=text)
        asset_factory(name=text, uri=f"none://{number}")
        asset_factory(name=f"none-{number}", uri=text)


def matched_in_sql(pattern_list) -> tuple[set, set]:
    scope = Scope(dags=tuple(pattern_list), assets=tuple(pattern_list))
    dags = set(DagRun.objects.filter(scope.dag_q()).values_list("dag_id", flat=True))
    assets = Asset.objects.filter(scope.asset_q())
    return dags, {a.name for a in assets if not a.name.startswith("none-")} | {
        a.uri for a in assets if not a.uri.startswith("none://")
    }


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_sql_matching_is_the_glob(named_rows, pattern):
    """glob_q's SQL (names without a wildcard as IN, the others as a regular expression) agrees with
    Python, on this run's database (SQLite or PostgreSQL)."""
    expected = {text for text in EVERY_INPUT if glob_oracle(pattern, text)}
    dags, assets = matched_in_sql([pattern])
    assert dags == expected
    assert assets == expected
    python = Scope(dags=(pattern,), assets=(pattern,))
    assert {t for t in EVERY_INPUT if python.allows_dag(t)} == expected
    assert {t for t in EVERY_INPUT if python.allows_asset(t, "none://")} == expected


def test_several_patterns_are_a_union_in_python_and_sql(named_rows):
    patterns = ["etl_*", "ml_training", "a?c", "x.y+(z)"]
    expected = {t for t in EVERY_INPUT if any(glob_oracle(p, t) for p in patterns)}
    dags, assets = matched_in_sql(patterns)
    assert dags == assets == expected
    assert {t for t in EVERY_INPUT if Scope(dags=tuple(patterns)).allows_dag(t)} == expected


def test_no_pattern_matches_nothing_and_none_means_everything(named_rows):
    assert DagRun.objects.filter(glob_q("dag_id", ())).count() == 0
    assert not Scope(dags=()).allows_dag("etl_a") and not Scope(assets=()).allows_asset("etl.one", "s3://etl/one")
    assert Scope().allows_dag("anything") and DagRun.objects.filter(Scope().dag_q()).count() == len(EVERY_INPUT)


def test_underscore_and_percent_are_literal(named_rows):
    """Not LIKE's wildcards, in either database."""
    dags, _ = matched_in_sql(["etl_*"])
    assert "etl_a" in dags and "etlxa" not in dags and "etl%a" not in dags
    dags, _ = matched_in_sql(["a%b_*"])
    assert dags == {"a%b_", "a%b_c"}
    dags, _ = matched_in_sql(["_"])
    assert dags == {"_"}
    dags, _ = matched_in_sql(["%"])
    assert dags == {"%"}


CASES = {
    # pattern: (matching, the same in other letter cases); no wildcard is an IN, the rest a regular
    # expression (a prefix glob too: SQLite's LIKE, which startswith uses, ignores case)
    "ml_training": ("ml_training", ["ML_TRAINING", "Ml_training"]),
    "a?c": ("abc", ["ABC", "aBC"]),
    "etl_*": ("etl_a", ["ETL_a", "Etl_b", "ETL_"]),
    "s3://bucket/*": ("s3://bucket/x", ["S3://BUCKET/x", "s3://Bucket/x"]),
}


@pytest.mark.parametrize("pattern", list(CASES))
def test_matching_is_case_sensitive(dag_run_factory, asset_factory, pattern):
    same, other_cases = CASES[pattern]
    for text in [same, *other_cases]:
        dag_run_factory(dag_id=text)
        asset_factory(name=text, uri=f"none://{text}")
    scope = Scope(dags=(pattern,), assets=(pattern,))
    assert [t for t in [same, *other_cases] if scope.allows_dag(t)] == [same]
    assert set(DagRun.objects.filter(scope.dag_q()).values_list("dag_id", flat=True)) == {same}
    assert set(Asset.objects.filter(scope.asset_q()).values_list("name", flat=True)) == {same}


@pytest.mark.parametrize("pattern", ["abc", "a?c"])
def test_a_trailing_newline_is_not_ignored(dag_run_factory, pattern):
    dag_run_factory(dag_id="abc\n")
    in_sql = DagRun.objects.filter(Scope(dags=(pattern,)).dag_q()).exists()
    assert Scope(dags=(pattern,)).allows_dag("abc\n") is in_sql is False


def test_a_newline_inside_is_one_character(dag_run_factory):
    """``?`` matches any one character, a newline too, in Python and in SQL on both databases."""
    dag_run_factory(dag_id="a\nc")
    assert Scope(dags=("a?c",)).allows_dag("a\nc")
    assert DagRun.objects.filter(Scope(dags=("a?c",)).dag_q()).exists()


# scope_of -------------------------------------------------------------------------------------------
User = get_user_model()


def make_user(username, *groups, superuser=False, password="pw-for-tests", unscoped=False):
    """A local account in ``groups``; with ``unscoped``, granted every DAG and asset (an administrator's choice)."""
    user = User.objects.create_user(username=username, password=password, is_superuser=superuser)
    if unscoped:
        grants.grant(user, unscoped=True, actor=Actor.command())
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    user = User.objects.get(pk=user.pk)
    user.raw_password = password
    return user


def grant(holder, kind, *patterns):
    for pattern in patterns:
        field = "group" if isinstance(holder, Group) else "user"
        AccessScope.objects.create(**{field: holder}, kind=kind, pattern=pattern)


def fresh(user):
    return User.objects.get(pk=user.pk)  # scope_of caches on the user object


def test_a_user_without_any_grant_sees_nothing_and_one_made_unscoped_sees_everything():
    user = make_user("alice", "Operator")
    assert scope_of(user) == Scope(dags=(), assets=()) and scope_of(user).restricted
    assert not scope_of(user).allows_dag("etl_a") and not scope_of(user).allows_asset("etl.one", "s3://etl/one")
    chosen = make_user("alma", "Operator", unscoped=True)
    assert scope_of(chosen) is EVERYTHING and not scope_of(chosen).restricted
    assert scope_of(Actor.command()) is EVERYTHING
    assert scope_of(AnonymousUser()) == Scope(dags=(), assets=())


def test_losing_the_last_grant_never_widens():
    team = Group.objects.create(name="team-etl")
    grant(team, "dag", "etl_*")
    user = make_user("bea", "team-etl")
    assert scope_of(user).dags == ("etl_*",)
    user.groups.remove(team)
    assert scope_of(fresh(user)) == Scope(dags=(), assets=())
    everything = Group.objects.create(name="platform")
    grants.grant(everything, unscoped=True, actor=Actor.command())
    user.groups.add(everything, team)
    assert scope_of(fresh(user)) is EVERYTHING  # the union: every DAG and asset
    user.groups.remove(everything)
    assert scope_of(fresh(user)).dags == ("etl_*",)  # narrower, never wider
    grants.revoke(team, everything=True, actor=Actor.command())
    assert scope_of(fresh(user)) == Scope(dags=(), assets=())


def test_an_account_single_sign_on_manages_gets_default_scope_without_a_grant(settings):
    user = make_user("sso-person", "Viewer")
    ExternalIdentity.objects.create(user=user, method="oidc", provider="https://idp", subject="s1")
    assert scope_of(fresh(user)) == Scope(dags=(), assets=())
    settings.DEFAULT_SCOPE = ["*"]
    assert scope_of(fresh(user)) is EVERYTHING
    settings.DEFAULT_SCOPE = ["etl_*", "s3://etl/*"]
    assert scope_of(fresh(user)) == Scope(dags=("etl_*", "s3://etl/*"), assets=("etl_*", "s3://etl/*"))
    team = Group.objects.create(name="team-ml")
    grant(team, "dag", "ml_*")
    user.groups.add(team)
    assert scope_of(fresh(user)).dags == ("ml_*",)  # a grant, not the default
    local = make_user("local-person", "Viewer")
    assert scope_of(local) == Scope(dags=(), assets=())  # DEFAULT_SCOPE is for single sign-on only


def test_patterns_and_unscoped_replace_each_other_on_one_holder():
    user = make_user("cleo", unscoped=True)
    grants.grant(user, dags=["etl_*"], actor=Actor.command())
    assert rows() == [("user:cleo", "dag", "etl_*")]
    grants.grant(user, unscoped=True, actor=Actor.command())
    assert rows() == [("user:cleo", "all", "*")]
    with pytest.raises(scopes.Invalid):
        grants.grant(user, dags=["etl_*"], unscoped=True, actor=Actor.command())


def test_scoped_through_a_group_and_the_union_with_the_users_own():
    team = Group.objects.create(name="team-etl")
    grant(team, "dag", "etl_*")
    grant(team, "asset", "s3://etl-bucket/*")
    user = make_user("bob", "team-etl")
    scope = scope_of(user)
    assert scope.dags == ("etl_*",) and scope.assets == ("s3://etl-bucket/*",)
    assert scope.allows_dag("etl_a") and not scope.allows_dag("ml_x")
    assert scope.allows_asset("anything", "s3://etl-bucket/o") and not scope.allows_asset("etl", "s3://ml/o")
    grant(user, "dag", "ml_training")
    other = Group.objects.create(name="team-reports")
    grant(other, "dag", "report_?")
    grant(other, "dag", "etl_*")  # the same pattern twice counts once
    user.groups.add(other)
    scope = scope_of(fresh(user))
    assert sorted(scope.dags) == ["etl_*", "ml_training", "report_?"]
    assert all(scope.allows_dag(d) for d in ("etl_a", "ml_training", "report_1"))
    assert not any(scope.allows_dag(d) for d in ("ml_training2", "report_12", "ml_x"))
    assert scope_of(Actor(via="ui", user=fresh(user), host="h")) == scope
    assert scope_of(make_user("carol", "Operator", unscoped=True)) is EVERYTHING  # other users are unaffected


def test_a_superuser_is_never_scoped():
    root = make_user("root", "team-etl", superuser=True)
    grant(Group.objects.get(name="team-etl"), "dag", "etl_*")
    grant(root, "dag", "nothing_*")
    assert scope_of(root) is EVERYTHING


def test_a_dag_only_scope_sees_no_asset_and_assets_star_sees_all():
    user = make_user("dan")
    grant(user, "dag", "etl_*")
    scope = scope_of(user)
    assert scope.assets == () and not scope.allows_asset("etl.one", "s3://etl/one")
    assert Asset.objects.filter(scope.asset_q()).count() == 0
    grant(user, "asset", "*")
    scope = scope_of(fresh(user))
    assert scope.all_assets and scope.allows_asset("ml.two", "s3://ml/two")
    assert not scope.all_dags and not scope.allows_dag("ml_x")


def test_an_asset_only_scope_sees_no_dag():
    user = make_user("erin")
    grant(user, "asset", "etl.*")
    scope = scope_of(user)
    assert scope.dags == () and not scope.allows_dag("etl_a")
    assert scope.allows_asset("etl.one", "s3://x") and not scope.allows_asset("ml.two", "s3://x")


# grant_scope / revoke_scope ---------------------------------------------------------------------
def run(command, *args) -> str:
    import io

    out = io.StringIO()
    call_command(command, *args, stdout=out)
    return out.getvalue()


def rows():
    return sorted(
        (r.group.name if r.group else f"user:{r.user.username}", r.kind, r.pattern)
        for r in AccessScope.objects.select_related("group", "user")
    )


def test_grant_to_a_group_and_to_a_user():
    Group.objects.create(name="team-etl")
    make_user("frank")
    output = run("grant_scope", "team-etl", "--dags", "etl_*", "etl_orders", "--assets", "s3://etl-bucket/*")
    assert "Added 3 pattern(s)" in output and "group team-etl" in output and "etl_*" in output
    assert "Added 0 pattern(s)" in run("grant_scope", "team-etl", "--dags", "etl_*")  # already there
    output = run("grant_scope", "frank", "--dags", "ml_training")
    assert "user frank" in output and "no asset" in output
    assert rows() == [
        ("team-etl", "asset", "s3://etl-bucket/*"),
        ("team-etl", "dag", "etl_*"),
        ("team-etl", "dag", "etl_orders"),
        ("user:frank", "dag", "ml_training"),
    ]
    assert scope_of(fresh(User.objects.get(username="frank"))).dags == ("ml_training",)


def test_a_name_of_both_a_group_and_a_user_needs_group_or_user():
    Group.objects.create(name="etl")
    make_user("etl")
    with pytest.raises(CommandError, match="--group or --user"):
        run("grant_scope", "etl", "--dags", "etl_*")
    assert rows() == []
    run("grant_scope", "etl", "--group", "--dags", "etl_*")
    run("grant_scope", "etl", "--user", "--dags", "etl_a")
    assert rows() == [("etl", "dag", "etl_*"), ("user:etl", "dag", "etl_a")]
    with pytest.raises(CommandError, match="--group or --user"):
        run("revoke_scope", "etl", "--all")
    run("revoke_scope", "etl", "--user", "--all")
    assert rows() == [("etl", "dag", "etl_*")]


def test_unknown_holder():
    Group.objects.create(name="team-etl")
    with pytest.raises(CommandError, match="No group or user called 'nobody-here'"):
        run("grant_scope", "nobody-here", "--dags", "etl_*")
    with pytest.raises(CommandError, match="No user called 'team-etl'"):
        run("grant_scope", "team-etl", "--user", "--dags", "etl_*")
    with pytest.raises(CommandError, match="No group or user called 'nobody-here'"):
        run("revoke_scope", "nobody-here", "--all")
    assert rows() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dags", ""], "non-empty"),
        (["--dags", "   "], "non-empty"),
        (["--dags", "etl_*", "x" * 251], "at most 250"),
        (["--dags", "etl_*", "--assets", "bad\npattern"], "printable"),
        ([], "at least one pattern"),
    ],
)
def test_bad_patterns_are_refused_and_nothing_is_stored(args, message):
    Group.objects.create(name="team-etl")
    with pytest.raises(CommandError, match=message):
        run("grant_scope", "team-etl", *args)
    assert rows() == []


def test_a_250_character_pattern_is_fine():
    Group.objects.create(name="team-etl")
    run("grant_scope", "team-etl", "--dags", "x" * 249 + "*")
    assert rows() == [("team-etl", "dag", "x" * 249 + "*")]


def test_revoke_some_patterns_or_all():
    Group.objects.create(name="team-etl")
    run("grant_scope", "team-etl", "--dags", "etl_*", "etl_x", "--assets", "etl.*")
    output = run("revoke_scope", "team-etl", "--dags", "etl_x", "not-granted")
    assert "Removed 1 pattern(s)" in output
    assert rows() == [("team-etl", "asset", "etl.*"), ("team-etl", "dag", "etl_*")]
    with pytest.raises(CommandError, match="--all"):
        run("revoke_scope", "team-etl")
    output = run("revoke_scope", "team-etl", "--all")
    assert "Removed 2 pattern(s)" in output and "no DAG; no asset" in output
    assert rows() == []


def test_grant_and_revoke_unscoped_through_the_commands():
    make_user("hal")
    output = run("grant_scope", "hal", "--unscoped")
    assert "Added 1 pattern(s)" in output and "every DAG and asset" in output
    assert scope_of(User.objects.get(username="hal")) is EVERYTHING
    with pytest.raises(CommandError, match="not both"):
        run("grant_scope", "hal", "--unscoped", "--dags", "etl_*")
    output = run("revoke_scope", "hal", "--all")
    assert "Removed 1 pattern(s)" in output and "no DAG; no asset" in output
    assert scope_of(User.objects.get(username="hal")) == Scope(dags=(), assets=())


def scope_events(action) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("pk"))


def test_the_commands_record_who_granted_and_revoked():
    Group.objects.create(name="team-etl")
    run("grant_scope", "team-etl", "--dags", "etl_*", "--assets", "etl.*")
    run("grant_scope", "team-etl", "--dags", "etl_*")  # granted already: no change, no event
    run("revoke_scope", "team-etl", "--dags", "etl_*", "not-granted")
    run("revoke_scope", "team-etl", "--dags", "not-granted")  # nothing removed: no event
    run("grant_scope", "team-etl", "--unscoped")  # replaces the asset pattern
    (granted, unscoped) = scope_events(AuditEvent.Action.GRANT)
    (revoked,) = scope_events(AuditEvent.Action.UNGRANT)
    command = Actor.command()
    for event in (granted, revoked, unscoped):
        assert (event.actor, event.user, event.via, event.status) == (command.name, None, "command", "done")
        assert (event.os_user, event.host, event.store, event.key_count) == (command.os_user, command.host, "", 0)
        assert event.details["group"] == "team-etl"
    assert granted.details["added"] == [{"kind": "dag", "pattern": "etl_*"}, {"kind": "asset", "pattern": "etl.*"}]
    assert granted.details["removed"] == []
    assert revoked.details == {"group": "team-etl", "added": [], "removed": [{"kind": "dag", "pattern": "etl_*"}]}
    assert unscoped.details["added"] == [{"kind": "all", "pattern": "*"}]
    assert unscoped.details["removed"] == [{"kind": "asset", "pattern": "etl.*"}]


def test_only_those_who_manage_scopes_grant_or_revoke():
    team = Group.objects.create(name="team-etl")
    admin = make_user("staff-admin", "Admin", unscoped=True)
    before = (rows(), AuditEvent.objects.count())
    with pytest.raises(scopes.Forbidden):
        grants.grant(team, dags=["etl_*"], actor=Actor(via="ui", user=admin))
    with pytest.raises(scopes.Forbidden):
        grants.revoke(admin, everything=True, actor=Actor(via="ui", user=admin))
    assert (rows(), AuditEvent.objects.count()) == before
    root = make_user("root", superuser=True)
    grants.grant(team, dags=["etl_*"], actor=Actor(via="ui", user=root))
    (event,) = scope_events(AuditEvent.Action.GRANT)[-1:]
    assert (event.actor, event.user, event.details["group"]) == ("root", root, "team-etl")


def test_scope_events_are_for_viewers_of_both_stores_and_not_restorable(client):
    from statestore_admin.core.errors import Invalid
    from statestore_admin.exports import restore as restores

    make_user("frank")
    run("grant_scope", "frank", "--dags", "etl_*")
    run("revoke_scope", "frank", "--all")
    events = [*scope_events(AuditEvent.Action.GRANT), *scope_events(AuditEvent.Action.UNGRANT)]
    assert [e.details["user"] for e in events] == ["frank", "frank"]
    task_only = make_user("task-only", unscoped=True)
    task_only.user_permissions.add(Permission.objects.get(codename="view_taskstatestore"))
    client.force_login(task_only)
    for event in events:
        assert event.viewed_with == ("task", "asset")
        assert client.get(f"/audit/{event.pk}/").status_code == 403
        with pytest.raises(Invalid, match="not a key"):
            restores.restore_event(actor=Actor.command(), event_id=event.pk)
    viewer = make_user("viewer", "Viewer", unscoped=True)
    client.force_login(viewer)
    assert client.get(f"/audit/{events[1].pk}/").status_code == 200
    page = client.get(f"/audit/{events[0].pk}/").content.decode()
    assert "its details name the group or user and the access-scope patterns" in page
    client.force_login(make_user("scoped-viewer", "Viewer", "team-etl"))
    grants.grant(Group.objects.get(name="team-etl"), dags=["*"], assets=["*"], actor=Actor.command())
    assert client.get(f"/audit/{events[0].pk}/").status_code == 404  # a scoped viewer sees no store-wide event


# Roles ----------------------------------------------------------------------------------------------
def role_permissions(name) -> set[tuple[str, str]]:
    return set(Group.objects.get(name=name).permissions.values_list("content_type__app_label", "codename").order_by())


def test_migrate_creates_the_three_roles_with_exactly_their_permissions():
    for role, wanted in roles.ROLES.items():
        assert role_permissions(role) == set(wanted), role
    assert set(roles.ROLES) == {"Viewer", "Operator", "Admin"}
    assert ("airflow", "delete_taskstatestore") not in role_permissions("Operator")
    assert ("airflow", "change_taskstatestore") not in role_permissions("Viewer")


def test_sync_roles_puts_back_a_permission_removed_by_hand_and_removes_an_extra_one():
    viewer = Group.objects.get(name="Viewer")
    viewer.permissions.remove(Permission.objects.get(content_type__app_label="airflow", codename="view_taskstatestore"))
    viewer.permissions.add(Permission.objects.get(content_type__app_label="airflow", codename="delete_taskstatestore"))
    Group.objects.get(name="Admin").delete()
    roles.sync_roles()
    for role, wanted in roles.ROLES.items():
        assert role_permissions(role) == set(wanted), role


def staff_admin():
    user = make_user("staff-admin", "Admin", unscoped=True)
    user.is_staff = True
    user.save()
    return user


def test_an_admin_with_staff_status_does_not_manage_scopes(client):
    """Scopes are a superuser's (tests/admin_site/test_scope_admin.py has the scoped Admin's attempts)."""
    team = Group.objects.create(name="team-etl")
    client.force_login(staff_admin())
    assert client.get("/admin/state/accessscope/").status_code == 403
    assert client.get("/admin/state/accessscope/add/").status_code == 403
    refused = client.post("/admin/state/accessscope/add/", {"group": team.pk, "kind": "dag", "pattern": "etl_*"})
    assert refused.status_code == 403 and rows() == [("user:staff-admin", "all", "*")]
    assert client.get("/admin/auth/group/add/").status_code == 403  # roles are given by a superuser


def test_an_admin_with_staff_status_cannot_pick_the_group_of_a_scope(client):
    Group.objects.create(name="team-etl")
    client.force_login(staff_admin())
    params = {"app_label": "state", "model_name": "accessscope", "field_name": "group", "term": "team"}
    response = client.get("/admin/autocomplete/", params)
    assert response.status_code == 403 and "team-etl" not in text(response)


def test_a_superuser_edits_scopes_in_admin(client):
    team = Group.objects.create(name="team-etl")
    root = make_user("root", superuser=True)
    root.is_staff = True
    root.save()
    client.force_login(root)
    blank = client.post("/admin/state/accessscope/add/", {"group": team.pk, "kind": "dag", "pattern": "  "})
    assert blank.status_code == 200 and "non-empty" in text(blank) and rows() == []
    added = client.post("/admin/state/accessscope/add/", {"group": team.pk, "kind": "dag", "pattern": "etl_*"})
    assert added.status_code == 302 and rows() == [("team-etl", "dag", "etl_*")]
    params = {"app_label": "state", "model_name": "accessscope", "field_name": "group", "term": "team"}
    assert "team-etl" in text(client.get("/admin/autocomplete/", params))


def test_a_superuser_gives_roles_and_scopes_on_the_users_and_groups_pages(client):
    root = make_user("root", superuser=True)
    root.is_staff = True
    root.save()
    client.force_login(root)
    group = Group.objects.get(name="Operator")
    page = text(client.get(f"/admin/auth/group/{group.pk}/change/"))
    assert "State store scope" in page
    user = make_user("gina")
    page = text(client.get(f"/admin/auth/user/{user.pk}/change/"))
    assert "State store scope" in page and 'name="groups"' in page and 'name="is_staff"' in page


@pytest.fixture
def small_run(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl_a", run_id="manual__roles")
    task_instance_factory(run, task_id="t")
    keys = [task_key_factory(run, task_id="t", key=k, value=k) for k in ("one", "two")]
    return run, keys


def listed_in(response):
    assert response.status_code == 200, response.content
    return response.content.decode().split('name="listed" value="')[1].split('"')[0]


def confirm(client, action, ids):
    dialog = client.get(f"/keys/task/{action}/", {"ids": ids}, **HX)
    if dialog.status_code != 200:
        return dialog
    return client.post(f"/keys/task/{action}/", {"ids": ids, "listed": listed_in(dialog)}, **HX)


def test_a_viewer_views_but_cannot_change(client, small_run):
    run, (one, _) = small_run
    client.force_login(make_user("vic", "Viewer", unscoped=True))
    for url in ("/", "/dags/", "/dags/etl_a/", f"/runs/{run.pk}/", f"/keys/task/{one.pk}/", "/search/?key=o"):
        assert client.get(url).status_code == 200, url
    response = client.post("/keys/task/expire/", {"ids": [one.pk], "listed": ""}, **HX)
    assert response.status_code == 403
    assert client.get(f"/keys/task/{one.pk}/edit/", **HX).status_code == 403
    assert TaskStateStore.objects.get(pk=one.pk).expires_at is None


def test_an_operator_edits_and_expires_but_does_not_delete_and_an_admin_deletes(client, small_run):
    _run, (one, two) = small_run
    client.force_login(make_user("olga", "Operator", unscoped=True))
    dialog = client.get(f"/keys/task/{one.pk}/edit/", **HX)
    assert dialog.status_code == 200
    seen = re.search(r'name="seen_updated_at" value="([^"]+)"', dialog.content.decode()).group(1)
    response = client.post(f"/keys/task/{one.pk}/edit/", {"value": '"edited"', "seen_updated_at": seen}, **HX)
    assert response.status_code == 204, response.content
    assert TaskStateStore.objects.get(pk=one.pk).value == '"edited"'
    assert confirm(client, "expire", [one.pk]).status_code == 204
    assert TaskStateStore.objects.get(pk=one.pk).expires_at <= timezone.now()  # expired now
    assert confirm(client, "delete", [two.pk]).status_code == 403
    response = client.post("/keys/task/delete/", {"ids": [two.pk], "listed": ""}, **HX)
    assert response.status_code == 403 and TaskStateStore.objects.filter(pk=two.pk).exists()
    client.force_login(make_user("ada", "Admin", unscoped=True))
    assert confirm(client, "delete", [two.pk]).status_code == 204
    assert not TaskStateStore.objects.filter(pk=two.pk).exists()


# A scoped Operator through every face -----------------------------------------------------------
RUN_ID = "manual__2026-11-30T00:00:00+00:00"
ML_MARKERS = ("ml_x", "k_ml", "ML-SECRET", "ml.two", "s3://ml/")


@pytest.fixture
def world(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    """DAGs etl_a, etl_b, ml_x and assets etl.one, ml.two, with keys; a team group scoped to etl_* / etl.*;
    an Operator and an Admin of that team; and what an unscoped admin did to both (audit events)."""
    now = timezone.now()
    runs = {}
    for dag_id in ("etl_a", "etl_b", "ml_x"):
        runs[dag_id] = dag_run_factory(dag_id=dag_id, run_id=RUN_ID)
        task_instance_factory(runs[dag_id], task_id="t")
    keys = {
        "k_etl_never": task_key_factory(runs["etl_a"], task_id="t", key="k_etl_never", value="etl-1"),
        "k_etl_expired": task_key_factory(
            runs["etl_a"], task_id="t", key="k_etl_expired", value="etl-2", expires_at=now - timedelta(hours=1)
        ),
        "k_etl_expiring": task_key_factory(
            runs["etl_b"], task_id="t", key="k_etl_expiring", value="etl-3", expires_at=now + timedelta(hours=2)
        ),
        "k_ml_never": task_key_factory(runs["ml_x"], task_id="t", key="k_ml_never", value="ML-SECRET-1"),
        "k_ml_expired": task_key_factory(
            runs["ml_x"], task_id="t", key="k_ml_expired", value="ML-SECRET-2", expires_at=now - timedelta(hours=1)
        ),
        "k_ml_expiring": task_key_factory(
            runs["ml_x"], task_id="t", key="k_ml_expiring", value="ML-SECRET-3", expires_at=now + timedelta(hours=2)
        ),
    }
    etl_asset = asset_factory(name="etl.one", uri="s3://etl/one")
    ml_asset = asset_factory(name="ml.two", uri="s3://ml/two")
    asset_key_factory(etl_asset, key="k_etl_watermark", value="etl-asset")
    asset_key_factory(ml_asset, key="k_ml_watermark", value="ML-SECRET-ASSET")
    asset_key_factory(ml_asset, key="k_ml_cursor", value="ML-SECRET-ASSET-2")
    team = Group.objects.create(name="team-etl")
    run("grant_scope", "team-etl", "--dags", "etl_*", "--assets", "etl.*")
    # An unscoped admin's changes to both teams' keys: the audit trail.
    system = Actor.command()
    services.set_task_key(
        actor=system,
        address=TaskAddress("etl_a", RUN_ID, "t"),
        key="k_etl_audited",
        value="etl-audited",
        expiry=Expiry(NEVER),
    )
    services.set_task_key(
        actor=system,
        address=TaskAddress("ml_x", RUN_ID, "t"),
        key="k_ml_audited",
        value="ML-SECRET-A",
        expiry=Expiry(NEVER),
    )
    services.delete_task_keys(actor=system, selection=services.TaskSelection(ids=(keys["k_ml_never"].pk,)))
    keys["k_ml_never"] = task_key_factory(runs["ml_x"], task_id="t", key="k_ml_never", value="ML-SECRET-1")
    services.set_asset_key(actor=system, asset_id=etl_asset.pk, key="k_etl_audited", value="etl-a")
    services.set_asset_key(actor=system, asset_id=ml_asset.pk, key="k_ml_audited", value="ML-SECRET-B")
    return {
        "runs": runs,
        "keys": keys,
        "etl_asset": etl_asset,
        "ml_asset": ml_asset,
        "team": team,
        "operator": make_user("scoped-op", "Operator", "team-etl"),
        "admin": make_user("scoped-admin", "Admin", "team-etl"),
        "ml_event": AuditEvent.objects.filter(dag_id="ml_x", action="delete").get(),
        "etl_event": AuditEvent.objects.filter(dag_id="etl_a").latest("id"),
    }


@pytest.fixture
def scoped(client, world):
    client.force_login(world["operator"])
    return client


def text(response) -> str:
    return response.content.decode()


def assert_no_ml(body: str):
    leaked = [marker for marker in ML_MARKERS if marker in body]
    assert not leaked, leaked


def test_the_world_is_as_described(world):
    """The scoped users' scope, and what an unscoped user sees of the same data."""
    assert scope_of(world["operator"]) == Scope(dags=("etl_*",), assets=("etl.*",))
    assert TaskStateStore.objects.count() == 8 and AssetStateStore.objects.count() == 5


def test_the_overview_counts_only_the_scopes_keys(scoped, world, client):
    page = text(scoped.get("/"))
    figures = dict(re.findall(r'data-testid="([a-z-]+)">([^<]*)<', page))
    assert figures == {
        "task-keys": "4",  # k_etl_never, k_etl_expired, k_etl_expiring, k_etl_audited
        "asset-keys": "2",
        "expired-keys": "1",
        "expiring-keys": "1",
        "never-keys": "2",
    }
    stats = scoped.get("/api/statestore/v1/stats").json()
    figures = ("task_keys", "asset_keys", "expired", "expiring_24h", "never_expire")
    assert [stats[name] for name in figures] == [4, 2, 1, 1, 2]
    assert stats["gc_runs"] is None  # GC spans every DAG: not shown to a scoped user
    largest = text(scoped.get("/overview/largest/", **HX))
    assert "k_etl_never" in largest or "k_etl_watermark" in largest
    assert_no_ml(largest)
    client.force_login(make_user("unscoped-op", "Operator", unscoped=True))
    everything = client.get("/api/statestore/v1/stats").json()
    assert (everything["task_keys"], everything["asset_keys"]) == (8, 5)


def test_lists_and_search_show_only_the_scope(scoped, world):
    dags = text(scoped.get("/dags/"))
    assert "etl_a" in dags and "etl_b" in dags
    assert_no_ml(dags)
    by_prefix = text(scoped.get("/dags/", {"prefix": "ml"}))
    assert "etl_a" not in by_prefix
    assert_no_ml(by_prefix)
    search = text(scoped.get("/search/", {"key": "k_"}))
    assert all(k in search for k in ("k_etl_never", "k_etl_expiring", "k_etl_watermark"))
    assert_no_ml(search)
    assert "k_ml" not in text(scoped.get("/search/", {"key": "k_", "dag_id": "ml_x"}))
    api = scoped.get("/api/statestore/v1/search/task-keys", {"key": "k_"}).json()
    assert {i["key"] for i in api["items"]} == {"k_etl_never", "k_etl_expired", "k_etl_expiring", "k_etl_audited"}
    assert scoped.get("/api/statestore/v1/search/task-keys", {"dag_id": "ml_x"}).json()["items"] == []
    api = scoped.get("/api/statestore/v1/search/asset-keys", {"key": "k_"}).json()
    assert {i["key"] for i in api["items"]} == {"k_etl_watermark", "k_etl_audited"}
    assert scoped.get("/api/statestore/v1/search/asset-keys", {"asset": "ml"}).json()["items"] == []
    assets = text(scoped.get("/assets/"))
    assert "etl.one" in assets
    assert_no_ml(assets)
    audit = text(scoped.get("/audit/"))
    assert "k_etl_audited" in audit or "etl_a" in audit
    assert_no_ml(audit)
    events = scoped.get("/api/statestore/v1/audit-events").json()["items"]
    assert events and all(e.get("dag_id") in ("etl_a", "etl_b", None) for e in events)
    assert_no_ml(json.dumps(events))
    assert scoped.get("/api/statestore/v1/audit-events", {"dag_id": "ml_x"}).json()["items"] == []


def test_a_dag_named_out_of_scope_is_403(scoped, world):
    assert scoped.get("/dags/ml_x/").status_code == 403
    assert scoped.get("/dags/ml_nonexistent/").status_code == 403
    assert scoped.get("/dags/etl_a/").status_code == 200
    lookup = scoped.get("/task-instance/", {"dag_id": "ml_x", "run_id": RUN_ID, "task_id": "t"})
    assert lookup.status_code == 403
    assert scoped.get("/audit/run/", {"dag_id": "ml_x", "run_id": RUN_ID}).status_code == 403


def without_noise(body: str, number) -> str:
    """A page with the id it names and the per-response CSRF tokens taken out."""
    body = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", body)
    body = re.sub(r'"X-CSRFToken": "[^"]+"', "", body)
    return re.sub(rf"(?<=[ /#]){number}(?!\d)", "ID", body)


def missing_id(model) -> int:
    return (model.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1000


def assert_same_404(client, url, out_of_scope_id, missing, **extra):
    hidden = client.get(url.format(out_of_scope_id), **extra)
    absent = client.get(url.format(missing), **extra)
    assert hidden.status_code == absent.status_code == 404, url
    assert without_noise(text(hidden), out_of_scope_id) == without_noise(text(absent), missing), url
    assert_no_ml(text(hidden))


def test_an_id_out_of_scope_is_404_like_a_missing_one(scoped, world):
    ml_run, ml_key, ml_asset = world["runs"]["ml_x"], world["keys"]["k_ml_expiring"], world["ml_asset"]
    run_missing, key_missing = missing_id(DagRun), missing_id(TaskStateStore)
    assert_same_404(scoped, "/runs/{}/", ml_run.pk, run_missing)
    assert_same_404(scoped, "/runs/{}/tasks/t/", ml_run.pk, run_missing)
    assert_same_404(scoped, "/keys/task/{}/", ml_key.pk, key_missing)
    assert_same_404(scoped, "/keys/task/{}/", ml_key.pk, key_missing, **HX)
    assert_same_404(scoped, "/keys/task/{}/edit/", ml_key.pk, key_missing, **HX)
    assert_same_404(scoped, "/keys/task/{}/expiry/", ml_key.pk, key_missing, **HX)
    assert_same_404(scoped, "/assets/{}/", ml_asset.pk, missing_id(Asset))
    assert_same_404(scoped, "/audit/{}/", world["ml_event"].pk, missing_id(AuditEvent))
    assert scoped.get(f"/runs/{world['runs']['etl_a'].pk}/").status_code == 200
    assert scoped.get(f"/keys/task/{world['keys']['k_etl_never'].pk}/").status_code == 200


def bearer(user) -> dict:
    _, token = ApiToken.issue(user, "tests")
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def task_url(dag_id, key=None):
    url = f"/api/v2/dags/{dag_id}/dagRuns/{RUN_ID.replace('+', '%2B')}/taskInstances/t/state-store"
    return f"{url}/{key}" if key else url


def snapshot():
    return sorted(TaskStateStore.objects.values_list("dag_id", "key", "value", "expires_at"))


@pytest.mark.parametrize("dag_id", ["ml_x", "ml_nonexistent"])
def test_airflow_api_answers_403_for_a_dag_out_of_scope(client, world, dag_id):
    before, events = snapshot(), AuditEvent.objects.count()
    operator, admin = bearer(world["operator"]), bearer(world["admin"])
    body = json.dumps({"value": "overwritten"})
    calls = [
        (operator, "get", task_url(dag_id), {}),
        (operator, "get", task_url(dag_id, "k_ml_expiring"), {}),
        (operator, "put", task_url(dag_id, "k_ml_expiring"), {"data": body, "content_type": "application/json"}),
        (operator, "put", task_url(dag_id, "k_new"), {"data": body, "content_type": "application/json"}),
        (operator, "patch", task_url(dag_id, "k_ml_expiring"), {"data": body, "content_type": "application/json"}),
        (admin, "delete", task_url(dag_id, "k_ml_expiring"), {}),
        (admin, "delete", task_url(dag_id), {}),
    ]
    for auth, method, url, extra in calls:
        response = getattr(client, method)(url, **extra, **auth)
        assert response.status_code == 403, (method, url, response.content)
        assert response.json() == {"detail": "Forbidden"}, (method, url)  # Airflow's 403, whatever the reason
        assert "ML-SECRET" not in text(response)
    assert snapshot() == before and AuditEvent.objects.count() == events


def test_airflow_api_in_scope_works(client, world):
    """The same calls on an etl DAG succeed: the 403s above are the scope's."""
    operator, admin = bearer(world["operator"]), bearer(world["admin"])
    body = json.dumps({"value": "changed"})
    assert client.get(task_url("etl_a"), **operator).json()["total_entries"] == 3
    assert client.get(task_url("etl_a", "k_etl_never"), **operator).json()["value"] == "etl-1"
    response = client.put(task_url("etl_a", "k_etl_never"), body, content_type="application/json", **operator)
    assert response.status_code == 204
    response = client.patch(task_url("etl_a", "k_etl_never"), body, content_type="application/json", **operator)
    assert response.status_code == 200
    assert client.delete(task_url("etl_a", "k_etl_never"), **operator).status_code == 403  # no delete for Operators
    assert client.delete(task_url("etl_a", "k_etl_never"), **admin).status_code == 204


def test_asset_api_answers_404_for_an_asset_out_of_scope_as_for_a_missing_one(client, world):
    operator = bearer(world["operator"])
    ml_id, missing = world["ml_asset"].pk, missing_id(Asset)
    for suffix in ("", "/k_ml_watermark"):
        hidden = client.get(f"/api/v2/assets/{ml_id}/state-store{suffix}", **operator)
        absent = client.get(f"/api/v2/assets/{missing}/state-store{suffix}", **operator)
        assert hidden.status_code == absent.status_code == 404
        assert without_noise(text(hidden), ml_id) == without_noise(text(absent), missing)
    before = sorted(AssetStateStore.objects.values_list("asset_id", "key", "value"))
    body = json.dumps({"value": "overwritten"})
    response = client.put(f"/api/v2/assets/{ml_id}/state-store/k_ml_watermark", body, "application/json", **operator)
    assert response.status_code == 404
    admin = bearer(world["admin"])
    assert client.delete(f"/api/v2/assets/{ml_id}/state-store/k_ml_watermark", **admin).status_code == 404
    assert client.delete(f"/api/v2/assets/{ml_id}/state-store", **admin).status_code == 404
    assert sorted(AssetStateStore.objects.values_list("asset_id", "key", "value")) == before
    etl = client.get(f"/api/v2/assets/{world['etl_asset'].pk}/state-store", **operator)
    assert etl.status_code == 200 and etl.json()["total_entries"] == 2


def test_bulk_actions_by_ids_change_only_the_scopes_keys(client, world):
    keys = world["keys"]
    etl, ml = keys["k_etl_never"], keys["k_ml_never"]
    ids = [etl.pk, ml.pk]
    client.force_login(world["operator"])
    dialog = client.get("/keys/task/expire/", {"ids": ids}, **HX)
    assert_no_ml(text(dialog))
    response = client.post("/keys/task/expire/", {"ids": ids, "listed": listed_in(dialog)}, **HX)
    assert response.status_code == 204, response.content
    assert TaskStateStore.objects.get(pk=etl.pk).expires_at <= timezone.now()  # expired now
    assert TaskStateStore.objects.get(pk=ml.pk).expires_at is None
    export = client.get("/keys/task/export/", {"ids": ids, "confirmed_at": timezone.now().isoformat()})
    assert_no_ml(b"".join(export.streaming_content).decode())
    client.force_login(world["admin"])
    other = keys["k_etl_expiring"]
    dialog = client.get("/keys/task/delete/", {"ids": [other.pk, ml.pk]}, **HX)
    response = client.post("/keys/task/delete/", {"ids": [other.pk, ml.pk], "listed": listed_in(dialog)}, **HX)
    assert response.status_code == 204, response.content
    assert not TaskStateStore.objects.filter(pk=other.pk).exists()
    assert TaskStateStore.objects.filter(pk=ml.pk).exists()
    # Even a listing of the out-of-scope key (which no dialog of this user gives) is answered as for a key
    # that does not exist, and nothing changes.
    listing = services.list_keys(TaskStateStore.objects.filter(pk=ml.pk)).token
    only_ml = client.post("/keys/task/delete/", {"ids": [ml.pk], "listed": listing}, **HX)
    gone = missing_id(TaskStateStore)
    absent = client.post("/keys/task/delete/", {"ids": [gone], "listed": listing}, **HX)
    assert only_ml.status_code == absent.status_code == 204
    assert (
        only_ml["HX-Trigger"] == absent["HX-Trigger"]
        and "Deleted 0 keys; 1 key listed was already gone" in only_ml["HX-Trigger"]
    )
    assert TaskStateStore.objects.filter(pk=ml.pk).exists()


def restore_document(*entries):
    return {"format": "statestore-admin/keys", "version": 1, "exported_at": timezone.now().isoformat(), "keys": entries}


def task_entry(dag_id, key, value):
    return {
        "store": "task",
        "dag_id": dag_id,
        "run_id": RUN_ID,
        "task_id": "t",
        "map_index": -1,
        "key": key,
        "value": value,
        "expires_at": None,
        "updated_at": timezone.now().isoformat(),
    }


def test_restores_touching_keys_out_of_scope_restore_nothing(client, world):
    admin = bearer(world["admin"])
    before, events = snapshot(), AuditEvent.objects.count()
    document = restore_document(task_entry("etl_a", "k_etl_restored", "x"), task_entry("ml_x", "k_ml_restored", "y"))
    response = client.post("/api/statestore/v1/restore", json.dumps(document), "application/json", **admin)
    assert response.status_code == 403, response.content
    assert snapshot() == before and AuditEvent.objects.count() == events
    asset_entry = {
        "store": "asset",
        "asset_id": world["ml_asset"].pk,
        "asset_name": "ml.two",
        "asset_uri": "s3://ml/two",
        "key": "k_ml_restored",
        "value": "z",
        "updated_at": timezone.now().isoformat(),
    }
    response = client.post(
        "/api/statestore/v1/restore", json.dumps(restore_document(asset_entry)), "application/json", **admin
    )
    # An asset out of scope answers as a missing one (tests/exports/test_restore_files.py): reported, not restored.
    assert response.status_code == 200 and response.json()["restored"] == 0
    assert response.json()["missing"][0]["reason"] == f"the asset with id {world['ml_asset'].pk} no longer exists"
    assert not AssetStateStore.objects.filter(key="k_ml_restored").exists()
    # The event of the ml key's delete: as if it did not exist (an id out of scope), nothing restored.
    event = world["ml_event"]
    assert client.post(f"/api/statestore/v1/audit-events/{event.pk}/restore", **admin).status_code == 404
    client.force_login(world["admin"])
    assert client.post(f"/audit/{event.pk}/restore/", **HX).status_code == 404
    assert snapshot() == before and AuditEvent.objects.count() == events
    # In scope, the same document restores.
    ok = restore_document(task_entry("etl_a", "k_etl_restored", "x"))
    response = client.post("/api/statestore/v1/restore", json.dumps(ok), "application/json", **admin)
    assert response.status_code == 200, response.content
    assert TaskStateStore.objects.filter(dag_id="etl_a", key="k_etl_restored").exists()


def test_gc_dry_run_needs_an_unscoped_user(client, world):
    for user in (world["operator"], world["admin"]):
        response = client.get("/api/statestore/v1/gc/dry-run", **bearer(user))
        assert response.status_code == 403, response.content
        assert response.json() == {"detail": "Forbidden"}
    assert (
        client.get(
            "/api/statestore/v1/gc/dry-run", **bearer(make_user("unscoped", "Operator", unscoped=True))
        ).status_code
        == 200
    )


def test_a_dag_or_asset_differing_only_in_case_is_out_of_scope(
    client, world, dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory
):
    """On SQLite too, where a prefix match (LIKE) would ignore case."""
    other = dag_run_factory(dag_id="ETL_secret", run_id=RUN_ID)
    task_instance_factory(other, task_id="t")
    secret = task_key_factory(other, task_id="t", key="k_secret", value="SECRET")
    asset = asset_factory(name="ETL.secret", uri="s3://secret/x")
    asset_key_factory(asset, key="k_secret_asset", value="SECRET")
    client.force_login(world["operator"])
    failures = []
    if "ETL.secret" in text(client.get("/assets/")):
        failures.append("asset list shows ETL.secret")
    if client.get(f"/assets/{asset.pk}/").status_code != 404:
        failures.append("asset page of ETL.secret is not 404")
    dialog = client.get("/keys/task/expire/", {"ids": [secret.pk, world["keys"]["k_etl_never"].pk]}, **HX)
    client.post(
        "/keys/task/expire/",
        {"ids": [secret.pk, world["keys"]["k_etl_never"].pk], "listed": listed_in(dialog)},
        **HX,
    )
    if TaskStateStore.objects.get(pk=secret.pk).expires_at is not None:
        failures.append("bulk expire by ids expired ETL_secret's key")
    assert failures == []


def test_revoking_the_last_grant_shows_nothing_and_unscoped_everything(client, world):
    """Fail closed: an account whose last grant goes sees nothing (it used to see every DAG), until an
    administrator grants it every DAG and asset."""
    run("revoke_scope", "team-etl", "--all")
    client.force_login(world["operator"])
    for dag_id in ("ml_x", "etl_a"):
        assert client.get(f"/dags/{dag_id}/").status_code == 403
        assert client.get(f"/api/v2/dags/{dag_id}/dagRuns/{RUN_ID}/taskInstances/t/state-store").status_code == 403
    assert "etl_a" not in text(client.get("/dags/")) and "ml_x" not in text(client.get("/dags/"))
    assert client.get("/api/statestore/v1/stats").json()["task_keys"] == 0
    assert client.get("/api/statestore/v1/search/task-keys", {"key": "k_"}).json()["items"] == []
    assert client.get("/api/statestore/v1/search/asset-keys", {"key": "k_"}).json()["items"] == []
    run("grant_scope", "scoped-op", "--unscoped")
    assert client.get("/dags/ml_x/").status_code == 200
    assert client.get("/api/statestore/v1/stats").json()["task_keys"] == 8


@pytest.mark.parametrize("holder_kind", ["user", "group"])
def test_deleting_a_holder_records_the_grants_it_took_with_it(holder_kind):
    holder = make_user("gone") if holder_kind == "user" else Group.objects.create(name="team-gone")
    run("grant_scope", "gone" if holder_kind == "user" else "team-gone", "--dags", "etl_*", "--assets", "s3://raw/*")
    holder.delete()
    assert not AccessScope.objects.exists()
    (event,) = scope_events(AuditEvent.Action.UNGRANT)
    rule = Actor.rule()
    assert (event.actor, event.user, event.via, event.status) == (rule.name, None, "rule", "done")
    assert (event.details[holder_kind], event.details["added"]) == (
        "gone" if holder_kind == "user" else "team-gone",
        [],
    )
    assert sorted(event.details["removed"], key=lambda grant: grant["kind"]) == [
        {"kind": "asset", "pattern": "s3://raw/*"},
        {"kind": "dag", "pattern": "etl_*"},
    ]


def test_deleting_a_holder_without_grants_records_nothing():
    make_user("plain").delete()
    Group.objects.create(name="plain-team").delete()
    assert not scope_events(AuditEvent.Action.UNGRANT)
