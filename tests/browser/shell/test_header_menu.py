"""The header on a phone (issue 42, item 7): at 390 px it wrapped into three rows, 221 px of an 844 px screen before
the content. Now the menu folds behind a disclosure button, the search stays in the header (one tap), the header is
at most 140 px high and nothing scrolls sideways, in light and dark; opening the menu shows every link, the
account and the language, by mouse or keyboard. At a desktop's width everything shows as before, nothing to open."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in
from tests.conftest import ALL_PERMS, BOTH_DATABASES
from tests.factories import make_deployment

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 860}
SIDEWAYS = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
ON_SCREEN = """(e) => { const r = e.getBoundingClientRect();
  return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= innerWidth && r.top >= 0
    && r.bottom <= innerHeight; }"""


@pytest.fixture
def deployment():
    return make_deployment({"job_id": "spark-7"}, run_id="scheduled__2026-11-29T00:00:00+00:00", task_id="submit")


@pytest.fixture
def chief(user_factory):
    """Every link the menu can hold: the stores' pages, the API's, and the admin's (staff)."""
    return user_factory("chief", perms=ALL_PERMS, is_staff=True)


def open_at(page, live_server, user, viewport, scheme):
    page.emulate_media(color_scheme=scheme)
    page.set_viewport_size(viewport)
    sign_in(page, live_server, user)
    header = page.locator("header.topbar")
    return header, header.get_by_role("button", name="Menu"), page.get_by_role("navigation", name="Main")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_on_a_phone_the_menu_folds_and_the_search_stays(page, live_server, chief, deployment, scheme, screenshot):
    header, toggle, nav = open_at(page, live_server, chief, PHONE, scheme)
    expect(toggle).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(nav).to_be_hidden()
    box = header.bounding_box()
    assert box["y"] + box["height"] <= 140, box
    assert page.evaluate(SIDEWAYS) <= 0
    colours = toggle.evaluate("b => [getComputedStyle(b).color, getComputedStyle(b).backgroundColor]")
    assert colours[0] != colours[1], colours  # readable in this scheme
    screenshot(f"header-phone-closed-{scheme}")

    search = header.get_by_role("searchbox", name="Search keys")
    assert search.evaluate(ON_SCREEN)  # one tap away, nothing to open first
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    links = nav.get_by_role("link")
    assert links.count() >= 9  # Overview, DAGs, Assets, Insights, Search, Audit, API tokens, API docs, Admin
    for link in links.all():
        assert link.evaluate(ON_SCREEN), link.inner_text()
    for control in (header.get_by_role("button", name="Sign out"), header.locator("form.language select")):
        assert control.evaluate(ON_SCREEN)
    assert page.evaluate(SIDEWAYS) <= 0
    screenshot(f"header-phone-open-{scheme}")
    nav.get_by_role("link", name="Audit").click()
    expect(page).to_have_url(re.compile(r"/audit/$"))
    expect(toggle).to_have_attribute("aria-expanded", "false")  # a new page starts folded
    search.click()
    search.fill("job")
    search.press("Enter")
    expect(page).to_have_url(re.compile(r"/search/\?key=job$"))


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_phone_menu_works_from_the_keyboard(page, live_server, chief, deployment, scheme):
    header, toggle, nav = open_at(page, live_server, chief, PHONE, scheme)
    header.locator("a.brand").focus()
    page.keyboard.press("Tab")
    expect(toggle).to_be_focused()
    assert toggle.evaluate("b => getComputedStyle(b).outlineStyle") != "none"  # visible focus
    page.keyboard.press("Enter")
    expect(toggle).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("Tab")
    expect(nav.get_by_role("link").first).to_be_focused()
    page.keyboard.press("Escape")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(toggle).to_be_focused()
    expect(nav).to_be_hidden()
    page.keyboard.press("Space")
    expect(nav).to_be_visible()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_at_a_desktop_width_everything_shows_with_nothing_to_open(page, live_server, chief, deployment, scheme):
    header, toggle, nav = open_at(page, live_server, chief, DESKTOP, scheme)
    expect(toggle).to_be_hidden()
    links = nav.get_by_role("link")
    assert links.count() >= 9
    for link in links.all():
        assert link.evaluate(ON_SCREEN), link.inner_text()
    for control in (
        header.get_by_role("searchbox", name="Search keys"),
        header.get_by_role("button", name="Sign out"),
        header.locator("form.language select"),
        header.locator(".time-zone"),
    ):
        assert control.evaluate(ON_SCREEN)
    # One row as before: the name, the links, the search and the account side by side.
    tops = header.evaluate(
        "h => [...h.querySelectorAll('.brand, nav a, .quick-search, .logout')].map(e => e.getBoundingClientRect().top)"
    )
    assert max(tops) - min(tops) < 40, tops
    assert page.evaluate(SIDEWAYS) <= 0
