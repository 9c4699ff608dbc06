"""Links into Airflow's UI: the address (``AIRFLOW_UI_URL``, else Airflow's ``[api] base_url``), the routes of
Airflow 3.3's UI with each id one percent-encoded segment, and the link on each page (escaped, or absent)."""

import pytest
from django.test import Client
from django.urls import reverse

from statestore_admin.airflow import ui_links
from tests.conftest import BOTH_DATABASES

UI = "https://airflow.example.com/ui-root"
RUN_ID = "manual__2026-01-01T00:00:00+00:00"


@pytest.fixture
def no_airflow_ui(settings, monkeypatch, tmp_path):
    """Neither the setting nor Airflow's [api] base_url (an empty AIRFLOW_HOME)."""
    settings.AIRFLOW_UI_URL = ""
    monkeypatch.delenv("AIRFLOW__API__BASE_URL", raising=False)
    monkeypatch.delenv("AIRFLOW_CONFIG", raising=False)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))


@pytest.fixture
def airflow_ui(no_airflow_ui, settings):
    settings.AIRFLOW_UI_URL = UI + "/"


def test_the_routes_of_airflow_3_3_ui_with_each_id_one_encoded_segment(airflow_ui):
    assert ui_links.dag_url("etl_orders") == f"{UI}/dags/etl_orders"
    assert (
        ui_links.run_url("etl_orders", RUN_ID) == f"{UI}/dags/etl_orders/runs/manual__2026-01-01T00%3A00%3A00%2B00%3A00"
    )
    run = f"{UI}/dags/d/runs/r%2Fx%20y%23z%3Fq%25"
    assert ui_links.task_instance_url("d", "r/x y#z?q%", "group.task", -1) == f"{run}/tasks/group.task/task-state-store"
    assert ui_links.task_instance_url("d", "r/x y#z?q%", "t", 3) == f"{run}/tasks/t/mapped/3/task-state-store"
    assert ui_links.task_instance_url("d", "r/x y#z?q%", "t", None) == f"{run}/tasks/t/mapped"
    assert ui_links.asset_url(42) == f"{UI}/assets/42/asset-state-store"
    assert ui_links.dag_url("Grüße") == f"{UI}/dags/Gr%C3%BC%C3%9Fe"


def test_no_address_no_links(no_airflow_ui):
    assert ui_links.ui_base_url() == ""
    assert ui_links.dag_url("d") == ui_links.run_url("d", "r") == ui_links.asset_url(1) == ""
    assert ui_links.task_instance_url("d", "r", "t", 0) == ""


def test_airflow_base_url_is_used_and_the_setting_wins(no_airflow_ui, settings, monkeypatch, tmp_path):
    (tmp_path / "airflow.cfg").write_text("[api]\nbase_url = http://airflow.internal:8080/\n")
    assert ui_links.dag_url("d") == "http://airflow.internal:8080/dags/d"
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://from-env.example.com")
    assert ui_links.dag_url("d") == "https://from-env.example.com/dags/d"
    settings.AIRFLOW_UI_URL = "https://setting.example.com"
    assert ui_links.dag_url("d") == "https://setting.example.com/dags/d"


@pytest.mark.parametrize(
    "address",
    [
        "javascript:alert(1)//",
        "ftp://airflow.example.com",
        "/relative/path",
        "https://",
        "https://a.b/?x=1",
        "https://a.b/#f",
    ],
)
def test_only_an_absolute_http_address_gives_links(no_airflow_ui, settings, address):
    settings.AIRFLOW_UI_URL = address
    assert ui_links.dag_url("d") == ""


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_pages_link_to_the_same_object_in_airflow(
    airflow_ui, operator, dag_run_factory, task_instance_factory, task_key_factory, asset_factory
):
    run = dag_run_factory(dag_id="etl_orders", run_id=RUN_ID)
    task_instance_factory(run, task_id="train", map_index=0)
    task_instance_factory(run, task_id="train", map_index=1)
    task_key_factory(run, task_id="train", map_index=1, key="fold")
    asset = asset_factory(name="warehouse")
    client = Client()
    client.force_login(operator)
    encoded_run = "manual__2026-01-01T00%3A00%3A00%2B00%3A00"
    pages = {
        reverse("dag-runs", args=["etl_orders"]): f"{UI}/dags/etl_orders",
        reverse("run-detail", args=[run.pk]): f"{UI}/dags/etl_orders/runs/{encoded_run}",
        reverse("task-instance", args=[run.pk, "train"])
        + "?map_index=1": f"{UI}/dags/etl_orders/runs/{encoded_run}/tasks/train/mapped/1/task-state-store",
        reverse("task-instance", args=[run.pk, "train"])
        + "?map_index=all": f"{UI}/dags/etl_orders/runs/{encoded_run}/tasks/train/mapped",
        reverse("asset-detail", args=[asset.pk]): f"{UI}/assets/{asset.pk}/asset-state-store",
    }
    for page, url in pages.items():
        body = client.get(page).content.decode()
        assert f'href="{url}"' in body, page
        assert 'rel="noopener noreferrer"' in body


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_pages_have_no_link_without_an_address(no_airflow_ui, operator, dag_run_factory):
    run = dag_run_factory(dag_id="etl_orders")
    client = Client()
    client.force_login(operator)
    for page in (reverse("dag-runs", args=["etl_orders"]), reverse("run-detail", args=[run.pk])):
        assert 'data-testid="airflow-link"' not in client.get(page).content.decode()


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_a_link_escapes_what_it_holds(no_airflow_ui, settings, operator, dag_run_factory):
    settings.AIRFLOW_UI_URL = 'https://airflow.example.com/a"b<c>'
    run = dag_run_factory(dag_id="etl_orders")
    client = Client()
    client.force_login(operator)
    body = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'href="https://airflow.example.com/a&quot;b&lt;c&gt;/dags/etl_orders/runs/' in body
