"""A scoped Operator in a real browser (issue 12): a member of Operator and of a team group scoped to
``etl_*`` sees only etl DAGs in the DAG list, the search results and the overview's numbers, and an
``ml_*`` run opened by its URL is the not-found page."""

import io
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.identity import roles
from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]


@pytest.fixture
def operator(db):
    """The ``signed_in`` fixture signs this user in: an Operator of the team-etl group (DAGs ``etl_*``,
    assets ``s3://etl-bucket/*``), as the README's example grants it."""
    roles.sync_roles()  # a transactional test's flush may have emptied the groups' permissions
    Group.objects.get_or_create(name="team-etl")
    call_command("grant_scope", "team-etl", "--dags", "etl_*", "--assets", "s3://etl-bucket/*", stdout=io.StringIO())
    user = get_user_model().objects.create_user(username="etl-operator", password="pw-for-tests")
    user.groups.add(Group.objects.get(name="Operator"), Group.objects.get(name="team-etl"))
    user.raw_password = "pw-for-tests"
    return user


@pytest.fixture
def deployment(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    now = timezone.now()
    runs = {}
    for dag_id, keys in (("etl_orders", 2), ("etl_billing", 1), ("ml_training", 3), ("ml_features", 1)):
        run = dag_run_factory(dag_id=dag_id, run_id="scheduled__2026-11-29T00:00:00+00:00")
        task_instance_factory(run, task_id="t")
        for number in range(keys):
            expires_at = now - timedelta(hours=1) if number == 1 else None  # the second key of a DAG: expired
            task_key_factory(run, task_id="t", key=f"cursor_{dag_id}_{number}", value=number, expires_at=expires_at)
        runs[dag_id] = run
    etl = asset_factory(name="etl_orders_raw", uri="s3://etl-bucket/orders")
    asset_key_factory(etl, key="cursor_watermark", value="2026-11-30")
    ml = asset_factory(name="ml_embeddings", uri="s3://ml-bucket/embeddings")
    asset_key_factory(ml, key="cursor_ml_watermark", value="secret")
    asset_key_factory(ml, key="cursor_ml_offset", value=7)
    return runs


def test_a_scoped_operator_sees_only_their_dags(signed_in, live_server, deployment, screenshot):
    page = signed_in
    # Overview: the etl DAGs' 3 keys (1 expired, 2 never expire) and the etl asset's key; not 7 and 3.
    expect(page.get_by_test_id("task-keys")).to_have_text("3")
    expect(page.get_by_test_id("asset-keys")).to_have_text("1")
    expect(page.get_by_test_id("expired-keys")).to_have_text("1")
    expect(page.get_by_test_id("never-keys")).to_have_text("2")
    screenshot("scoped-overview")

    page.get_by_role("link", name="DAGs", exact=True).click()
    dag_links = page.locator("#keys-panel tbody tr td:first-child a")
    expect(dag_links).to_have_text(["etl_billing", "etl_orders"])
    expect(page.get_by_text("ml_training")).to_have_count(0)

    page.goto(f"{live_server.url}/search/")
    page.fill("#key", "cursor")
    page.get_by_role("button", name="Search").click()
    expect(page).to_have_url(re.compile(r"key=cursor"))
    keys = page.locator("#keys-panel td.key code")
    expect(keys).to_have_text(
        ["cursor_etl_billing_0", "cursor_etl_orders_1", "cursor_etl_orders_0", "cursor_watermark"], timeout=10_000
    )
    expect(page.locator("#keys-panel")).not_to_contain_text("ml_")
    screenshot("scoped-search")

    # An ml run by its URL: the not-found page, as for a run that does not exist.
    page.goto(f"{live_server.url}/runs/{deployment['ml_training'].pk}/")
    expect(page.locator("h1")).to_have_text("Page not found")
    expect(page.locator("main, body").first).not_to_contain_text("ml_training")
    page.goto(f"{live_server.url}/runs/{deployment['etl_orders'].pk}/")
    expect(page.locator("h1")).to_have_text("scheduled__2026-11-29T00:00:00+00:00")
