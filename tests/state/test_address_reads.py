"""The plain statements behind Airflow's key list and key routes (``address_key_page``, ``address_key``) read
what the ORM's ``address_keys`` reads: the same rows, with the same Python values, and the same count."""

import uuid
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from statestore_admin.airflow.versions import SENTINEL_REGION_ID, schema_of
from statestore_admin.state.addresses import TaskAddress, address_key, address_key_page, address_keys

from ..conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
LATER = timezone.now() + timedelta(days=3)


def fields(row) -> dict:
    return {f.attname: getattr(row, f.attname) for f in type(row)._meta.concrete_fields}


@pytest.fixture
def address(dag_run_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="scheduled__2026-01-01T00:00:00+00:00")
    for n in range(7):
        task_key_factory(run, task_id="t", key=f"k{n}", value={"n": n, "é": "☃"}, expires_at=LATER if n % 2 else None)
    task_key_factory(run, task_id="t", map_index=0, key="k0", value="another index")
    task_key_factory(run, task_id="other", key="k0", value="another task")
    return TaskAddress("etl", run.run_id, "t")


@pytest.mark.parametrize(("offset", "limit"), [(0, 50), (0, 3), (2, 3), (6, 3), (7, 3), (100, 3), (0, 0), (3, 0)])
def test_a_page_and_its_count_are_the_orms(address, offset, limit):
    rows, total = address_key_page(address, offset, limit)
    expected = list(address_keys(address).order_by("key")[offset : offset + limit])
    assert [fields(row) for row in rows] == [fields(row) for row in expected]
    assert total == address_keys(address).count() == 7
    assert all(not row._state.adding and row._state.db == "airflow" for row in rows)
    assert all(row.region_id == SENTINEL_REGION_ID and row.updated_at.tzinfo is not None for row in rows)


def test_one_key_is_the_orms(address):
    assert fields(address_key(address, "k3")) == fields(address_keys(address).get(key="k3"))
    assert address_key(address, "missing") is None


@pytest.mark.parametrize(
    "elsewhere",
    [
        {"map_index": 5},
        {"map_index": 2**31},  # beyond an integer column: no row, no query error
        {"task_id": "nothing"},
        {"run_id": "another"},
    ],
)
def test_an_address_without_keys_has_none(address, elsewhere):
    other = TaskAddress(**{**address.__dict__, **elsewhere})
    assert address_key_page(other, 0, 50) == ([], 0)
    assert address_key(other, "k0") is None


def test_another_region_has_none_of_them(address):
    """On 3.3 no key sits in a region; on 3.4 this region has none of these."""
    other = TaskAddress(**{**address.__dict__, "region_id": uuid.uuid4()})
    assert address_key_page(other, 0, 50) == ([], 0)
    assert address_key(other, "k0") is None
    assert schema_of(connections["airflow"]).regions or not address_keys(other).exists()
