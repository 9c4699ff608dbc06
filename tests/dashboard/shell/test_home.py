"""The home page: behind the login, with the real counts of the configured Airflow database."""

import pytest
from django.urls import reverse

from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


def test_anonymous_users_are_sent_to_the_login(client):
    response = client.get(reverse("home"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_login_page_is_public_and_has_csrf(client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b"csrfmiddlewaretoken" in response.content


def test_home_shows_the_counts(client, viewer, dag_run_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory()
    for n in range(3):
        task_key_factory(run, key=f"k{n}")
    asset = asset_factory()
    asset_key_factory(asset, key="<script>alert(1)</script>")
    assert client.login(username=viewer.username, password=viewer.raw_password)
    response = client.get(reverse("home"))
    assert response.status_code == 200
    html = response.content.decode()
    assert '<div class="figure" data-testid="task-keys">3</div>' in html
    assert '<div class="figure" data-testid="asset-keys">1</div>' in html
    # The home page shows only counts; the asset's page is where the key is rendered, escaped.
    detail = client.get(reverse("asset-detail", args=[asset.id])).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail
    assert "<script>alert(1)</script>" not in detail


def test_sign_in_through_the_form(client, user_factory):
    user = user_factory()
    response = client.post(reverse("login"), {"username": user.username, "password": user.raw_password})
    assert response.status_code == 302
    response = client.post(reverse("login"), {"username": user.username, "password": "wrong"})
    # Every page says "error" somewhere (htmx's configuration); the form's own alert is what counts.
    assert response.status_code == 200
    assert '<p class="error" role="alert">Please enter a correct username and password.' in response.content.decode()


def test_static_htmx_is_served_locally(client, user_factory):
    user = user_factory()
    client.force_login(user)
    html = client.get(reverse("home")).content.decode()
    assert "/static/django_htmx/htmx-2.min.js" in html
    assert "https://" not in html
