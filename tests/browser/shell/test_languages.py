"""Languages in a real browser (issue 38): a Korean browser reads the pages in Korean, in Airflow's words; the
header's menu changes the language for the account, in this browser and in another one; the scripts' strings, the
dates and the numbers follow the language; a Chinese browser (zh-CN) gets Simplified Chinese; every language's pages
fit a phone. What a page should say is read from the catalogues (Django's gettext), so a test fails when a page
shows a string the catalogues do not translate."""

import html
import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone, translation
from django.utils.translation.trans_real import DjangoTranslation
from playwright.sync_api import expect

from statestore_admin.airflow.models import TaskStateStore
from tests.conftest import BOTH_DATABASES
from tests.factories import make_deployment

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]

OVERVIEW = "Task &amp; asset state"  # the msgid holds the template's entity
BROWSER_LOCALES = {"ko": "ko-KR", "ja": "ja-JP", "zh-hans": "zh-CN", "de": "de-DE", "fr": "fr-FR", "es": "es-ES"}


def said(code: str, english: str, context: str | None = None) -> str:
    """``english`` as the catalogue of ``code`` has it, as a page shows it (entities read)."""
    with translation.override(code):
        return html.unescape(translation.pgettext(context, english) if context else translation.gettext(english))


@pytest.fixture
def deployment():
    return make_deployment(
        {"job_id": {"job": "spark-7"}, "manifest": ["x" * 100] * 15},
        {"watermark": ("2026-11-30", "watcher")},
        expires_at=timezone.now() + timedelta(days=3, hours=1),
    )


@pytest.fixture
def browser_in(browser, live_server):
    """A new browser whose language (Accept-Language, navigator.language) is ``locale``."""
    contexts = []

    def open_page(locale: str, width: int = 1280):
        context = browser.new_context(locale=locale, viewport={"width": width, "height": 860})
        contexts.append(context)
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()


def sign_in_as(page, live_server, user, code: str, before: str | None = None):
    """Signs in on a sign-in page in ``before`` (default ``code``), landing on the overview in ``code``."""
    page.goto(f"{live_server.url}/login/")
    expect(page.locator("html")).to_have_attribute("lang", before or code)
    page.fill("#id_username", user.username)
    page.fill("#id_password", user.raw_password)
    page.locator("form.login button[type=submit]").click()
    expect(page.locator("h1")).to_have_text(said(code, OVERVIEW))
    page.wait_for_load_state()


def test_a_korean_browser_reads_the_dashboard_in_korean_in_airflows_words(browser_in, live_server, operator,
                                                                         deployment):  # fmt: skip
    page = browser_in("ko-KR")
    page.goto(f"{live_server.url}/login/")
    expect(page).to_have_title(re.compile(f"^{re.escape(said('ko', 'Sign in'))} "))
    sign_in_as(page, live_server, operator, "ko")
    assert said("ko", OVERVIEW) != said("en", OVERVIEW)
    nav = page.get_by_role("navigation", name=said("ko", "Main", "navigation"))
    expect(nav.get_by_role("link", name=said("ko", "Assets"), exact=True)).to_be_visible()
    assert "에셋" in said("ko", "Assets")  # Airflow's word for an asset in Korean
    # A task instance's keys: the headings in Korean, the data as it is, the expiry a Korean relative time.
    run = deployment["run"]
    page.goto(f"{live_server.url}/runs/{run.pk}/tasks/train/")
    expect(page.locator("html")).to_have_attribute("lang", "ko")
    expect(page.locator("#keys-panel")).to_contain_text("job_id")
    expect(page.locator("#keys-panel tr", has_text="job_id")).to_contain_text(re.compile(r"3일\s후"))  # in 3 days
    assert "태스크" in said("ko", OVERVIEW)  # Airflow's word for a task in Korean, in the heading seen above


def test_the_menu_changes_the_language_for_the_account_everywhere(browser_in, live_server, operator, deployment):
    page = browser_in("ko-KR")
    sign_in_as(page, live_server, operator, "ko")
    page.locator("header form.language select").select_option("ja")
    expect(page.locator("html")).to_have_attribute("lang", "ja")
    expect(page.locator("h1")).to_have_text(said("ja", OVERVIEW))
    # Another browser, set to German: the account's choice wins once signed in.
    elsewhere = browser_in("de-DE")
    sign_in_as(elsewhere, live_server, operator, "ja", before="de")
    # Signed out, the sign-in page of the first browser keeps the language chosen there (its cookie)...
    page.locator("header form.logout button[type=submit]").click()
    expect(page.locator("html")).to_have_attribute("lang", "ja")
    # ...until its menu goes back to the browser's language.
    page.locator("header form.language select").select_option("")
    expect(page.locator("html")).to_have_attribute("lang", "ko")


def test_numbers_and_times_follow_the_language(browser_in, live_server, operator, deployment):
    page = browser_in("de-DE")
    sign_in_as(page, live_server, operator, "de")
    key = TaskStateStore.objects.get(key="manifest")
    page.goto(f"{live_server.url}/keys/task/{key.pk}/")
    facts = page.locator("main").inner_text()
    assert re.search(r"\b1,\d KiB\b", facts), facts  # a decimal comma
    page.goto(f"{live_server.url}/audit/")
    expect(page.locator("html")).to_have_attribute("lang", "de")


@pytest.mark.parametrize("code", list(BROWSER_LOCALES))
def test_every_language_fits_a_phone_and_says_where_you_are(browser_in, live_server, operator, deployment, code):
    page = browser_in(BROWSER_LOCALES[code], width=390)
    sign_in_as(page, live_server, operator, code)
    run = deployment["run"]
    for path, title in (
        ("/", "Overview"),
        (f"/runs/{run.pk}/tasks/train/", None),
        ("/gc/", "Garbage collection"),
        ("/audit/", "Audit"),
        ("/search/?key=job", "Search"),
    ):
        page.goto(f"{live_server.url}{path}")
        expect(page.locator("html")).to_have_attribute("lang", code)
        if title:
            expect(page).to_have_title(re.compile(f"^{re.escape(said(code, title))} "))
        overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, f"{code} {path}: {overflow}px wider than the phone"


def test_the_scripts_speak_the_language_of_the_page(browser_in, live_server, operator, deployment):
    page = browser_in("fr-FR")
    sign_in_as(page, live_server, operator, "fr")
    catalogue = page.evaluate("() => [typeof gettext, gettext('Value copied to the clipboard.')]")
    french = DjangoTranslation("fr", domain="djangojs").gettext("Value copied to the clipboard.")
    assert catalogue == ["function", french] and french != "Value copied to the clipboard."


def test_languages_offered_are_the_settings_ones():
    assert [code for code, _name in settings.LANGUAGES] == ["en", *BROWSER_LOCALES]
