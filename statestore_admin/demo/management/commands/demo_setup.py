import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections

from statestore_admin import grants
from statestore_admin.access.actors import Actor
from statestore_admin.airflow.management.setup import SetupCommand
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.schema import has_state_tables
from statestore_admin.demo.accounts import (
    DEMO_OPERATOR_USERNAME,
    DEMO_TEAM_GROUP,
    DEMO_USERNAME,
    DEMO_VIEWER_USERNAME,
    mark,
)
from statestore_admin.demo.data import README_RUN_ID
from statestore_admin.identity.roles import OPERATOR, VIEWER
from statestore_admin.stats import history

# Users to try the roles and a scope with (the same password): (name, role, team group or None)
DEMO_ROLE_USERS = ((DEMO_VIEWER_USERNAME, VIEWER, None), (DEMO_OPERATOR_USERNAME, OPERATOR, DEMO_TEAM_GROUP))
DEMO_TEAM_SCOPE = {"dags": ["etl_*"], "assets": ["s3://warehouse/raw/*"]}


class Command(SetupCommand):
    help = (
        "Prepare the embedded demo in var/demo/: Airflow's schema and demo data in its airflow.sqlite3 and "
        "the demo's logins in its dashboard.sqlite3. Prints the login."
    )

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="The URL to print.")

    def handle(self, *args, url, **options):
        if not (settings.AIRFLOW_DATABASE.embedded and settings.EMBEDDED_DASHBOARD_DB):
            raise CommandError(
                "demo_setup only prepares the embedded demo; unset DATABASE_URL, AIRFLOW_DATABASE_URL and "
                "Airflow's [database] sql_alchemy_conn to use it."
            )
        if has_state_tables(connections[airflow_alias()]):
            self.stdout.write(
                "Keeping the existing demo database with your changes (`STATESTORE_DEMO=1 python manage.py "
                "demo_data` refreshes the demo keys; `make clean-demo` starts afresh)."
            )
        else:
            call_command("create_airflow_schema", stdout=self.stdout)
            call_command("demo_data", stdout=self.stdout)
            history.seed_history(actor=Actor.command())  # Insights draws days of history on a fresh demo
        password_file = settings.DEMO_DIR / "demo_password"
        if not password_file.exists():
            password_file.write_text(secrets.token_urlsafe(12))
            password_file.chmod(0o600)
        password = password_file.read_text().strip()
        create_demo_users(password)
        self.stdout.write(self.style.SUCCESS(start_message(url, password)))


def start_message(url: str, password: str) -> str:
    """The logins, and how to try the API (the README's example, which the demo's fixed run id makes work)."""
    others = ", ".join(f"{name} ({role}{_scope_text(team)})" for name, role, team in DEMO_ROLE_USERS)
    api = f"{url.rstrip('/')}/api/v2/dags/etl_orders/dagRuns/{README_RUN_ID}/taskInstances/submit_spark_job/state-store"
    return (
        f"\nstatestore-admin demo: {url}\n  login: {DEMO_USERNAME} / {password}\n"
        f"  also, with the same password: {others}\n"
        f"  the API: TOKEN=$(STATESTORE_DEMO=1 .venv/bin/python manage.py create_api_token {DEMO_USERNAME} "
        "--name try-the-api)\n"
        f'           curl -H "Authorization: Bearer $TOKEN" "{api}"\n'
    )


def _scope_text(team: str | None) -> str:
    """What a team's scope reaches, by its patterns (the group's name says nothing of it)."""
    if not team:
        return ""
    return f", scoped to DAGs {' '.join(DEMO_TEAM_SCOPE['dags'])} and assets {' '.join(DEMO_TEAM_SCOPE['assets'])}"


def create_demo_users(password: str) -> None:
    """The demo login (a superuser) and the users to try the roles with, all with ``password``, each marked as
    the demo's (statestore.E050 keeps them out of any other deployment)."""
    user, _ = get_user_model().objects.get_or_create(username=DEMO_USERNAME)
    user.is_staff = user.is_superuser = True
    if not user.check_password(password):  # a new hash of the same password would revoke the demo's tokens
        user.set_password(password)
    user.save()
    mark(user)
    for name, role, team in DEMO_ROLE_USERS:
        _role_user(name, role, team, password)


def _role_user(name: str, role: str, team: str | None, password: str) -> None:
    """A user in a role group, and a team group whose scope is ``DEMO_TEAM_SCOPE`` or, without a team, unscoped (an
    account without any grant would see nothing)."""
    user, created = get_user_model().objects.get_or_create(username=name)
    if created:
        user.set_password(password)
        user.save()
    mark(user)
    user.groups.add(Group.objects.get(name=role))
    if team:
        group, _ = Group.objects.get_or_create(name=team)
        grants.grant(group, **DEMO_TEAM_SCOPE, actor=Actor.command())
        user.groups.add(group)
    elif created:
        grants.grant(user, unscoped=True, actor=Actor.command())
