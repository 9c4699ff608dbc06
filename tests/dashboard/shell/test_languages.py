"""Which language the pages speak (dashboard/languages.py): the account's choice, else the cookie, else the
browser's Accept-Language, else LANGUAGE_CODE; the APIs always English; the menu's bad input changes nothing."""

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import translation

from statestore_admin.records.models import AccountPreferences
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


def lang_of(response) -> str:
    html = response.content.decode()
    start = html.index("<html lang=") + len('<html lang="')
    return html[start : html.index('"', start)]


@pytest.mark.parametrize(
    ("accept", "served"),
    [
        ("ko-KR,ko;q=0.9,en;q=0.5", "ko"),
        ("ja", "ja"),
        ("zh-CN,zh;q=0.9", "zh-hans"),
        ("zh", "zh-hans"),
        ("de-AT", "de"),
        ("fr-CA", "fr"),
        ("es-MX", "es"),
        ("xx-YY", "en"),
        ("", "en"),
    ],
)
def test_the_browser_language_is_served_and_named_in_html_lang(client, accept, served):
    response = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE=accept)
    assert response.status_code == 200
    assert lang_of(response) == served
    assert response["Content-Language"] == served


def test_language_code_is_the_default_when_the_browser_says_nothing(client, settings):
    settings.LANGUAGE_CODE = "de"
    assert lang_of(client.get(reverse("login"))) == "de"


def test_the_accounts_choice_wins_over_the_browser_and_follows_it_to_another_browser(client, viewer):
    client.force_login(viewer)
    response = client.post(reverse("choose-language"), {"language": "ja", "next": reverse("dag-list")})
    assert response.status_code == 302 and response["Location"] == reverse("dag-list")
    assert AccountPreferences.objects.get(user=viewer).language == "ja"
    assert lang_of(client.get(reverse("home"), HTTP_ACCEPT_LANGUAGE="de")) == "ja"
    elsewhere = Client()  # another browser: no cookie, another Accept-Language
    elsewhere.force_login(viewer)
    assert lang_of(elsewhere.get(reverse("home"), HTTP_ACCEPT_LANGUAGE="fr")) == "ja"
    # Back to the browser's language: the account's choice is cleared, and so is the cookie.
    response = client.post(reverse("choose-language"), {"language": "", "next": "/"})
    assert AccountPreferences.objects.get(user=viewer).language == ""
    assert response.cookies["django_language"].value == ""
    assert lang_of(elsewhere.get(reverse("home"), HTTP_ACCEPT_LANGUAGE="fr")) == "fr"


def test_before_signing_in_the_choice_is_a_cookie_for_the_sign_in_page(client):
    response = client.post(reverse("choose-language"), {"language": "ko", "next": reverse("login")})
    assert response.status_code == 302
    cookie = response.cookies["django_language"]
    assert cookie.value == "ko" and cookie["httponly"] and cookie["samesite"] == "Lax"
    assert lang_of(client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="en")) == "ko"
    assert not AccountPreferences.objects.exists()


@pytest.mark.parametrize("language", ["xx", "ko-KR-evil", "en\x00", "<script>"])
def test_a_language_not_offered_is_refused_and_changes_nothing(client, viewer, language):
    client.force_login(viewer)
    client.post(reverse("choose-language"), {"language": "de", "next": "/"})
    response = client.post(reverse("choose-language"), {"language": language, "next": "/"})
    assert response.status_code == 400
    # In the account's language (German, chosen just before), as plain text.
    with translation.override("de"):
        said = translation.gettext("Unknown language %(code)s.") % {"code": language}
    assert response.content.decode() == said if "\x00" not in language else "NUL" in response.content.decode()
    assert said.startswith("Unbekannte Sprache")
    assert "django_language" not in response.cookies
    assert AccountPreferences.objects.get(user=viewer).language == "de"


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/", "javascript:alert(1)"])
def test_the_menu_returns_only_to_a_page_of_ours(client, viewer, target):
    client.force_login(viewer)
    response = client.post(reverse("choose-language"), {"language": "fr", "next": target})
    assert response.status_code == 302 and response["Location"] == "/"


def test_the_menu_needs_a_post_with_the_csrf_token(viewer):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(viewer)
    assert browser.get(reverse("choose-language")).status_code == 405
    assert browser.post(reverse("choose-language"), {"language": "fr"}).status_code == 403
    assert not AccountPreferences.objects.filter(user=viewer).exists()


def test_pages_offer_the_menu_with_the_served_language_selected(client, viewer):
    client.force_login(viewer)
    html = client.get(reverse("home"), HTTP_ACCEPT_LANGUAGE="ko").content.decode()
    assert '<form class="language" method="post" action="/language/">' in html
    assert '<option value="ko" lang="ko"\n      selected>한국어</option>' in html
    for name in ("English", "日本語", "简体中文", "Deutsch", "Français", "Español"):  # capitalised, as Airflow's menu
        assert f">{name}</option>" in html


def test_the_api_answers_in_english_whatever_the_callers_language(client, viewer):
    response = client.get(reverse("api-stats"), HTTP_ACCEPT_LANGUAGE="ko")  # Content-Language: the active language
    assert response.status_code in (401, 403)
    assert response.json()["detail"] == "Not authenticated"
    assert response["Content-Language"] == "en"
    client.force_login(viewer)
    AccountPreferences.objects.create(user=viewer, language="ja")
    response = client.get(reverse("api-stats"), HTTP_ACCEPT_LANGUAGE="ja")
    assert response.status_code == 200 and response["Content-Language"] == "en"


def test_the_javascript_catalogue_is_served_before_sign_in(client):
    response = client.get(reverse("javascript-catalog"), {"language": "ko"}, HTTP_ACCEPT_LANGUAGE="ko")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    assert "django.gettext" in response.content.decode()
