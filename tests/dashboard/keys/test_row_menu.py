"""A task key row's actions menu, fetched when it opens (``/keys/task/<id>/actions/``, keys/_row_menu.html), through
Django's test client on both schema series: it needs a session and the view permission, shows each user the
buttons their permissions allow (none to a read-only user: the key's page instead), answers 404 out of scope like a
missing key, escapes the key, and sends a normal request to the key's page. The rows of the run and task pages carry
the menu's address, not its buttons."""

import re

import pytest
from django.test import Client

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.records.models import AccessScope
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
XSS = "<script>alert(1)</script>"


@pytest.fixture
def world(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl_orders", run_id="manual__menu")
    task_instance_factory(run, task_id="extract")
    job = task_key_factory(run, task_id="extract", key="job_id", value={"job": 7})
    xss = task_key_factory(run, task_id="extract", key=XSS, value=1)
    other = dag_run_factory(dag_id="ml_train", run_id="manual__other")
    task_instance_factory(other, task_id="fit")
    hidden = task_key_factory(other, task_id="fit", key="secret_key", value=1)
    return {"run": run, "job": job, "xss": xss, "hidden": hidden}


def menu(client, key_id: int, **headers):
    return client.get(f"/keys/task/{key_id}/actions/", **{**HX, **headers})


def buttons(html: str) -> dict[str, str]:
    """Each button's accessible name → the address it opens."""
    return dict(
        (label, url)
        for url, label in re.findall(r'<button[^>]*hx-get="([^"]+)"[^>]*\s+aria-label="([^"]+)"', html, re.S)
    )


def test_an_operator_gets_every_action_of_the_key(client, operator, world):
    client.force_login(operator)
    job = world["job"].pk
    response = menu(client, job)
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html and "<title>" not in html
    assert "no-store" in response["Cache-Control"]  # a part of a page is never cached
    assert buttons(html) == {
        "Edit job_id": f"/keys/task/{job}/edit/",
        "Expiry of job_id": f"/keys/task/{job}/expiry/",
        "Expire now: job_id": f"/keys/task/expire/?ids={job}",
        "Delete job_id": f"/keys/task/delete/?ids={job}",
    }
    assert html.count('hx-target="#modal-body"') == 4


def test_each_action_is_offered_only_with_its_permission(client, user_factory, world):
    client.force_login(user_factory("changer", perms=["task.view", "task.change"]))
    assert set(buttons(menu(client, world["job"].pk).content.decode())) == {
        "Edit job_id",
        "Expiry of job_id",
        "Expire now: job_id",
    }
    client.force_login(user_factory("deleter", perms=["task.view", "task.delete"]))
    assert set(buttons(menu(client, world["job"].pk).content.decode())) == {"Delete job_id"}


def test_a_read_only_user_gets_no_mutating_action_but_the_keys_page(client, viewer, world):
    client.force_login(viewer)
    response = menu(client, world["job"].pk)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<button" not in html and "hx-get" not in html and "?ids=" not in html
    for label in (">Edit<", ">Delete<", "Expire now", "Set expiry"):
        assert label not in html
    assert f'href="/keys/task/{world["job"].pk}/"' in html
    # and the run page gives them no menu at all
    page = client.get(f"/runs/{world['run'].pk}/").content.decode()
    assert "row-menu" not in page and "/actions/" not in page


def test_the_menu_needs_a_session_and_the_view_permission(client, nobody, world):
    anonymous = menu(client, world["job"].pk)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/?next=")
    assert "job_id" not in anonymous.content.decode()
    client.force_login(nobody)
    refused = menu(client, world["job"].pk)
    assert refused.status_code == 403 and "job_id" not in refused.content.decode()


def test_a_key_out_of_scope_is_not_found_as_a_missing_one(client, user_factory, world):
    scoped = user_factory("scoped", perms=["task.view", "task.change", "task.delete"], unscoped=False)
    AccessScope.objects.create(user=scoped, kind=AccessScope.Kind.DAG, pattern="etl_*")
    client.force_login(scoped)
    assert menu(client, world["job"].pk).status_code == 200
    hidden = menu(client, world["hidden"].pk)
    missing = menu(client, 999_999)
    assert hidden.status_code == missing.status_code == 404
    assert "secret_key" not in hidden.content.decode()


def test_the_key_is_escaped(client, operator, world):
    client.force_login(operator)
    html = menu(client, world["xss"].pk).content.decode()
    assert XSS not in html and "<script" not in html
    assert "Delete &lt;script&gt;alert(1)&lt;/script&gt;" in html
    page = client.get(f"/runs/{world['run'].pk}/").content.decode()
    assert XSS not in page and 'aria-label="Actions for &lt;script&gt;alert(1)&lt;/script&gt;"' in page


def test_a_normal_request_goes_to_the_keys_page(client, operator, world):
    client.force_login(operator)
    response = client.get(f"/keys/task/{world['job'].pk}/actions/")
    assert response.status_code == 302 and response["Location"] == f"/keys/task/{world['job'].pk}/"


@pytest.mark.parametrize("page", ["run", "task"])
def test_the_rows_carry_the_menus_address_not_its_buttons(client, operator, world, page):
    client.force_login(operator)
    run = world["run"]
    url = f"/runs/{run.pk}/" if page == "run" else f"/runs/{run.pk}/tasks/extract/"
    html = client.get(url).content.decode()
    for key in (world["job"], world["xss"]):
        assert f'<details class="row-menu" hx-get="/keys/task/{key.pk}/actions/"' in html
        assert f'<div class="row-menu-items"><a href="/keys/task/{key.pk}/">' in html
    assert "/edit/" not in html and "/keys/task/delete/?ids=" not in html


def test_the_actions_the_menu_opens_still_need_the_csrf_token(operator, world):
    """The menu is a GET; what it opens is a confirmation, whose POST is refused without Django's CSRF token."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    html = browser.get(f"/keys/task/{world['job'].pk}/actions/", **HX).content.decode()
    delete = buttons(html)["Delete job_id"]
    dialog = browser.get(delete, **HX)
    assert dialog.status_code == 200 and 'name="csrfmiddlewaretoken"' in dialog.content.decode()
    refused = browser.post(delete.split("?")[0], {"ids": world["job"].pk}, **HX)
    assert refused.status_code == 403
    assert TaskStateStore.objects.filter(pk=world["job"].pk).exists()
