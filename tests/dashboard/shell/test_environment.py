"""STATESTORE_ENVIRONMENT and its colour ("Where am I"): the system check refuses a colour outside the palette,
and every page names the environment in its title and band, escaped."""

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from statestore_admin.dashboard.checks import ENVIRONMENT_COLORS, check_environment


@pytest.mark.parametrize("color", ENVIRONMENT_COLORS)
def test_every_colour_of_the_palette_passes(settings, color):
    settings.STATESTORE_ENVIRONMENT_COLOR = color
    assert check_environment() == []


@pytest.mark.django_db(databases=["default", "airflow"])
def test_a_colour_outside_the_palette_is_refused_by_manage_py_check(settings):
    settings.STATESTORE_ENVIRONMENT_COLOR = "#ff0000"
    [error] = check_environment()
    assert error.id == "statestore.E020" and "'#ff0000'" in error.msg and "red, orange" in error.msg
    with pytest.raises(SystemCheckError, match="statestore.E020"):
        call_command("check", "--tag", "statestore")


@pytest.mark.django_db
def test_the_title_and_band_name_the_environment_escaped(client, settings):
    settings.STATESTORE_ENVIRONMENT = "<prod>"
    settings.STATESTORE_ENVIRONMENT_COLOR = "orange"
    html = client.get("/login/").content.decode()
    assert "<title>[&lt;prod&gt;] " in html and "{#" not in html and "{%" not in html
    assert 'class="env-band env-orange"' in html and "&lt;prod&gt;</div>" in html
    settings.STATESTORE_ENVIRONMENT = ""
    assert "env-band" not in client.get("/login/").content.decode()
