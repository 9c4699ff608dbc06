import pytest
from django.contrib.auth import get_user_model
from django.db import connections

from statestore_admin.airflow.schema import create_airflow_schema

from . import factories

BOTH_DATABASES = ["default", "airflow"]


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test Airflow database gets Airflow's own DDL (the committed `airflow db migrate` output)."""
    with django_db_blocker.unblock():
        create_airflow_schema(connections["airflow"])


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
def asset_factory():
    return factories.make_asset


@pytest.fixture
def asset_key_factory():
    return factories.make_asset_key


@pytest.fixture
def user_factory(db):
    def make(username="operator", password="pw-for-tests", **fields):
        user = get_user_model().objects.create_user(username=username, password=password, **fields)
        user.raw_password = password
        return user

    return make


@pytest.fixture
def postgres_only():
    if connections["airflow"].vendor != "postgresql":
        pytest.skip("PostgreSQL only: runs in the STATESTORE_TEST_DB=postgres pass")
