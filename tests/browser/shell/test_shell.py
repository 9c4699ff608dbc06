"""The app's shell in a real browser (issue 23, "Where am I" and item 15): the environment's band and title,
the staff's link to Django's admin, the Viewer's "Read-only" badge, the Orphans menu only with a worker-side
backend, and the keyboard shortcuts ("/" searches, "?" shows the help)."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in
from tests.conftest import ALL_PERMS, BOTH_DATABASES, VIEW_PERMS
from tests.factories import make_deployment
from tests.objects_helpers import file_storage

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]


@pytest.fixture
def deployment():
    made = make_deployment({"job_id": "spark-7"}, run_id="scheduled__2026-11-29T00:00:00+00:00", task_id="submit")
    return made["run"]


def test_the_environment_is_on_every_page_and_in_the_title(page, live_server, settings, operator, deployment):
    settings.STATESTORE_ENVIRONMENT = "production"
    settings.STATESTORE_ENVIRONMENT_COLOR = "red"
    page.goto(f"{live_server.url}/login/")
    band = page.get_by_test_id("environment")
    expect(band).to_have_text(re.compile("production"))
    expect(page).to_have_title(re.compile(r"^\[production\] "))
    sign_in(page, live_server, operator)
    for path in ("/", "/dags/", "/search/?key=job", "/audit/", "/account/tokens/", "/api/docs/"):
        page.goto(f"{live_server.url}{path}")
        expect(page).to_have_title(re.compile(r"^\[production\] "))
        expect(band).to_be_visible()
        assert band.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(179, 38, 30)", path  # .env-red
    settings.STATESTORE_ENVIRONMENT = ""
    page.goto(f"{live_server.url}/")
    expect(band).to_have_count(0)
    expect(page).to_have_title("Overview · statestore-admin")


def test_staff_see_a_link_to_the_admin_and_others_do_not(page, live_server, user_factory, operator, deployment):
    sign_in(page, live_server, operator)
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Admin")).to_have_count(0)
    page.get_by_role("button", name="Sign out").click()
    staff = user_factory("staff", perms=ALL_PERMS, is_staff=True)
    sign_in(page, live_server, staff)
    nav.get_by_role("link", name="Admin").click()
    expect(page).to_have_url(re.compile(r"/admin/$"))


def test_a_viewer_sees_read_only(page, live_server, user_factory, operator, deployment):
    viewer = user_factory("viewer", perms=VIEW_PERMS)
    sign_in(page, live_server, viewer)
    badge = page.locator("header .badge-read-only")
    expect(badge).to_have_text("Read-only")
    expect(badge).to_have_attribute("title", re.compile("not change"))
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, live_server, operator)
    expect(badge).to_have_count(0)


def test_the_orphans_menu_needs_a_worker_side_backend(
    page, live_server, tmp_path, monkeypatch, user_factory, deployment
):
    admin = user_factory("admin", perms=ALL_PERMS)
    sign_in(page, live_server, admin)
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="GC")).to_be_visible()
    expect(nav.get_by_role("link", name="Orphans")).to_have_count(0)
    file_storage(tmp_path, monkeypatch)
    page.reload()
    nav.get_by_role("link", name="Orphans").click()
    expect(page.locator("h1")).to_contain_text("Orphans")


def test_slash_focuses_the_search_and_question_mark_shows_the_shortcuts(page, live_server, operator, deployment):
    sign_in(page, live_server, operator)
    search = page.get_by_role("searchbox", name="Search keys")
    expect(search).not_to_be_focused()
    page.keyboard.press("/")
    expect(search).to_be_focused()
    expect(search).to_have_value("")  # the slash is not typed into it
    page.keyboard.type("job/")  # typing in the field: "/" is a character there
    expect(search).to_have_value("job/")
    page.keyboard.press("Backspace")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/search/\?key=job$"))
    expect(page.locator("main")).to_contain_text("job_id")
    expect(search).to_have_value("job")  # the header's field shows what was searched
    page.wait_for_load_state()  # the search page's shortcuts.js has run before "?" is pressed

    page.locator("main h1").click()  # focus leaves the field
    page.keyboard.press("?")
    help_ = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(help_).to_be_visible()
    expect(help_).to_contain_text("Search keys")
    page.keyboard.press("Escape")
    expect(help_).to_be_hidden()
