"""No demo account outside the demo (issue 24): statestore.E050 while the dashboard's database holds the demo's
accounts and the dashboard is on another Airflow database than the demo's; `remove_demo_accounts` clears it.

The test settings put the dashboard on an Airflow database of their own, not the demo's: the check applies."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import override_settings

from statestore_admin.airflow.dburl import resolve_airflow_database
from statestore_admin.demo.accounts import DEMO_ACCOUNTS_GROUP
from statestore_admin.demo.checks import check_demo_accounts
from statestore_admin.demo.management.commands.demo_setup import create_demo_users
from statestore_admin.identity import roles
from statestore_admin.records.models import AuditEvent
from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES
from tests.operations.test_settings import run_manage

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

User = get_user_model()


@pytest.fixture
def demo_users():
    roles.sync_roles()
    create_demo_users("the-demos-shared-password")


def test_demo_accounts_on_another_airflow_database_are_an_error(demo_users):
    [error] = check_demo_accounts()
    assert error.id == "statestore.E050" and error.is_serious()
    assert "(demo, demo-etl, demo-viewer)" in error.msg
    assert "manage.py remove_demo_accounts" in error.hint and "DATABASE_URL" in error.hint


def test_the_demo_itself_may_hold_them(tmp_path, demo_users):
    demo_database = resolve_airflow_database({}, embedded_path=tmp_path / "airflow.sqlite3", demo=True)
    with override_settings(AIRFLOW_DATABASE=demo_database):
        assert check_demo_accounts() == []


def test_no_demo_account_no_error():
    User.objects.create_superuser("alice", "alice@example.com", "pw")
    assert check_demo_accounts() == []


def test_the_marker_finds_a_renamed_demo_account_and_the_names_a_demo_from_before_the_marker(demo_users):
    User.objects.filter(username="demo-viewer").update(username="someone")
    # A demo made before the marker existed: its users only have the demo's names.
    User.objects.get(username="demo").groups.clear()
    [error] = check_demo_accounts()
    assert "(demo, demo-etl, someone)" in error.msg


def test_remove_demo_accounts_deletes_them_and_their_tokens_keeps_the_audit_and_is_idempotent(demo_users):
    alice = User.objects.create_superuser("alice", "alice@example.com", "pw")
    demo = User.objects.get(username="demo")
    ApiToken.issue(demo, name="try-the-api")
    ApiToken.issue(User.objects.get(username="demo-etl"), name="etl")
    ApiToken.issue(alice, name="alice's")
    event = AuditEvent.objects.create(actor="demo", user=demo, via="ui", action="set", store="task")

    out = io.StringIO()
    call_command("remove_demo_accounts", stdout=out)
    assert out.getvalue().strip() == (
        "Deleted the demo's accounts demo, demo-etl, demo-viewer and their 2 API token(s). "
        "Their audit events stay, under their names."
    )
    assert list(User.objects.values_list("username", flat=True)) == ["alice"]
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["alice's"]
    event.refresh_from_db()
    assert (event.actor, event.user) == ("demo", None)
    assert not Group.objects.filter(name=DEMO_ACCOUNTS_GROUP).exists()
    assert check_demo_accounts() == []

    again = io.StringIO()
    call_command("remove_demo_accounts", stdout=again)
    assert again.getvalue().strip() == "No demo account in the dashboard's database."
    assert list(User.objects.values_list("username", flat=True)) == ["alice"]


def manage(*args, env):
    return run_manage(*args, env=env, timeout=180)  # demo_setup writes the whole demo


@pytest.mark.any_database  # its processes' environments are its own: the same in every pass (tests/conftest.py)
def test_the_demos_files_are_its_own_and_a_real_airflow_database_stops_on_its_accounts(tmp_path):
    """`make run`'s steps in a fresh var/: everything in var/demo/, `check` passes on the demo. The same
    dashboard database on another Airflow database: `check` and `migrate` stop with E050."""
    var = tmp_path / "var"
    demo = {"HOME": str(tmp_path), "STATESTORE_DEMO": "1", "STATESTORE_VAR_DIR": str(var)}
    assert manage("migrate", "--noinput", "--verbosity", "0", env=demo).returncode == 0
    setup = manage("demo_setup", env=demo)
    assert setup.returncode == 0, setup.stderr
    assert sorted(p.name for p in var.iterdir()) == ["demo"]
    assert {"dashboard.sqlite3", "airflow.sqlite3", "demo_password", "secret_key", "state"} <= {
        p.name for p in (var / "demo").iterdir()
    }
    on_demo = manage("check", env=demo)
    assert on_demo.returncode == 0 and "E050" not in on_demo.stderr, on_demo.stderr

    other_airflow = {"HOME": str(tmp_path), "STATESTORE_VAR_DIR": str(var)}
    other_airflow["AIRFLOW_DATABASE_URL"] = f"sqlite:///{tmp_path / 'real-airflow.sqlite3'}"
    assert manage("create_airflow_schema", env=other_airflow).returncode == 0
    # Without DATABASE_URL: var/dashboard.sqlite3, a new database of its own, not the demo's.
    assert manage("migrate", "--noinput", "--verbosity", "0", env=other_airflow).returncode == 0
    assert (var / "dashboard.sqlite3").exists()
    assert manage("check", env=other_airflow).returncode == 0
    # With DATABASE_URL pointed at the demo's dashboard database: refused, by `check` and by `migrate`.
    reused = {**other_airflow, "DATABASE_URL": f"sqlite:///{var / 'demo' / 'dashboard.sqlite3'}", "SECRET_KEY": "x"}
    for command in (["check"], ["migrate", "--noinput"]):
        refused = manage(*command, env=reused)
        assert refused.returncode == 1 and "statestore.E050" in refused.stderr, refused.stderr
        assert "(demo, demo-etl, demo-viewer)" in refused.stderr
