import socket

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.servers.basehttp import ThreadedWSGIServer
from django.db import connections
from django.test.testcases import LiveServerThread
from django.utils import translation

from statestore_admin.access import permissions
from statestore_admin.access.actors import Actor
from statestore_admin.airflow.schema import create_airflow_schema
from statestore_admin.airflow.versions import schema_of
from statestore_admin.records.models import AccessScope

from . import factories

BOTH_DATABASES = ["default", "airflow"]


class NoDelayWSGIServer(ThreadedWSGIServer):
    """The live server (pytest-django's ``live_server``), answering without Nagle's algorithm: Django's server
    writes a response's headers and its body in two sends, and the second waited for the client's delayed ACK,
    40 ms a request (the API fuzz: 45 ms a request instead of 3, half of its time)."""

    def get_request(self):
        sock, address = super().get_request()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, address


LiveServerThread.server_class = NoDelayWSGIServer


def pytest_runtest_setup(item):
    """``@pytest.mark.any_database``: the test's processes get environments of their own (no test database, no
    series), so it passes or fails the same in every pass. It runs in the default pass, SQLite on Airflow 3.3's
    schema (the README's `make test`), and is skipped, saying so, in the passes on PostgreSQL or on 3.4's schema,
    where it would repeat that run exactly (CI runs all three: docs/testing.md)."""
    if item.get_closest_marker("any_database") is None:
        return
    if settings.TEST_DB != "sqlite" or settings.AIRFLOW_FIXTURE_SERIES != "3.3":
        pytest.skip("the same on any test database and schema: runs in the SQLite pass on Airflow 3.3's schema")


@pytest.fixture(autouse=True)
def _default_language():
    """Each test starts in LANGUAGE_CODE: Django's LocaleMiddleware leaves the language of the last request it
    served active in the thread (a server activates one at every request; a test calls functions between them)."""
    translation.deactivate()
    yield
    translation.deactivate()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test Airflow database gets Airflow's own DDL (the committed `airflow db migrate` output).

    At the end, on PostgreSQL, the sessions that live-server threads left open on this run's own test databases
    are ended first: Django's DROP DATABASE refuses a database in use, and the test databases of a worker were
    left behind on the shared cluster."""
    with django_db_blocker.unblock():
        create_airflow_schema(connections["airflow"])
    yield
    with django_db_blocker.unblock():
        for alias in BOTH_DATABASES:
            if connections[alias].vendor == "postgresql":
                with connections[alias].cursor() as cursor:
                    cursor.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                connections[alias].close()


@pytest.fixture
def dag_factory():
    return factories.make_dag


@pytest.fixture
def dag_run_factory():
    return factories.make_dag_run


@pytest.fixture
def task_instance_factory():
    return factories.make_task_instance


@pytest.fixture
def task_key_factory():
    return factories.make_task_key


@pytest.fixture
def region_factory():
    """Airflow 3.4's dynamic regions (``factories.make_region``); skips the test on the 3.3 schema."""
    from statestore_admin.airflow.versions import schema_of

    if not schema_of(connections["airflow"]).regions:
        pytest.skip("Airflow 3.4 only: runs with AIRFLOW_FIXTURE_SERIES=3.4")
    return factories.make_region


@pytest.fixture
def asset_factory():
    return factories.make_asset


@pytest.fixture
def asset_key_factory():
    return factories.make_asset_key


@pytest.fixture
def user_factory(db):
    """Users with the given store permissions, e.g. ``perms=["task.view", "asset.delete"]``; local accounts that an
    administrator made unscoped (every DAG and asset) unless ``unscoped=False`` (then: no grant, so nothing)."""

    def make(username="operator", password="pw-for-tests", perms=(), unscoped=True, **fields):
        user = get_user_model().objects.create_user(username=username, password=password, **fields)
        if unscoped and not user.is_superuser:  # a superuser is never scoped
            # the row itself, not grants.grant: a fixture's account is no audited change of the test's
            AccessScope.objects.create(user=user, kind=AccessScope.Kind.ALL, pattern="*")
        for perm in perms:
            store, action = perm.split(".")
            app_label, codename = permissions.codename(store, action).split(".")
            user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
        user = get_user_model().objects.get(pk=user.pk)  # a fresh permission cache
        user.raw_password = password
        return user

    return make


ALL_PERMS = [f"{store}.{action}" for store in ("task", "asset") for action in ("view", "add", "change", "delete")]
VIEW_PERMS = ["task.view", "asset.view"]


@pytest.fixture
def operator(user_factory):
    return user_factory("operator", perms=ALL_PERMS)


@pytest.fixture
def viewer(user_factory):
    return user_factory("viewer", perms=VIEW_PERMS)


@pytest.fixture
def nobody(user_factory):
    return user_factory("nobody")


@pytest.fixture
def ui(operator):
    """The operator acting through the pages."""
    return Actor(via="ui", user=operator, host="127.0.0.1")


@pytest.fixture
def system():
    return Actor.command()


@pytest.fixture
def regions_schema():
    if not schema_of(connections["airflow"]).regions:
        pytest.skip("Airflow 3.3's schema has no dynamic regions: run with AIRFLOW_FIXTURE_SERIES=3.4")


@pytest.fixture
def postgres_only():
    if connections["airflow"].vendor != "postgresql":
        pytest.skip("PostgreSQL only: runs in the STATESTORE_TEST_DB=postgres pass")


@pytest.fixture
def committed_airflow_tables():
    """For transactional tests (live server, other processes): Django flushes only the dashboard database,
    so this empties the Airflow tables afterwards."""
    yield
    with connections["airflow"].cursor() as cursor:
        for table in ("task_state_store", "asset_state_store", "task_instance", "dag_run", "asset_active", "asset"):
            cursor.execute(f"DELETE FROM {table}")


# Worker-side objects (tests/objects_helpers.py): the object_storage and read_objects fixtures everywhere.
from .objects_helpers import object_storage, read_objects  # noqa: E402,F401
