"""Browser tests: Playwright driving Debian's Chromium (tests/chromium.py: its headless shell, else the browser)
against a live server.

In CI (CI=true) a missing browser fails the run: .ci/run installs it. Elsewhere they are skipped
with the install command, so `make test` still works on a machine without a browser. Screenshots go to
test-artifacts/screenshots/.
"""

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

from tests import chromium

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"

# CI runs four test stages and real Airflow side by side on two cores: a dialog's request to the live server can
# take longer than Playwright's default 5 s wait. A wait is not a speed target (those are in bench/).
expect.set_options(timeout=15_000)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {
        **browser_type_launch_args,
        "executable_path": str(chromium.required()),
        "args": [
            *chromium.ARGS,
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


@pytest.fixture(autouse=True)
def htmx_settled(request):
    """A test's page has no htmx request in flight when its database is emptied. A fragment the last page loads
    (the overview's largest values, say) writes to the dashboard's SQLite database from the live server's thread;
    the flush after the test reads and then writes in one transaction, and such a write in between makes it fail
    with "database is locked". The database is set up first so that it is emptied last, after this wait."""
    if "page" not in request.fixturenames or "live_server" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("transactional_db")
    page = request.getfixturevalue("page")
    yield
    try:
        page.wait_for_function("() => !document.querySelector('.htmx-request')", timeout=15_000)
    except PlaywrightError:  # the page is closed or navigating: nothing of it is in flight
        pass


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1280, "height": 860}}


@pytest.fixture
def screenshot(page):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


def sign_in(page, live_server, user, start: str = "/login/"):
    """``user`` signs in through the login page and lands on the overview, its scripts run."""
    page.goto(f"{live_server.url}{start}")
    expect(page).to_have_url(re.compile(r"/login/"))
    page.fill("#id_username", user.username)
    page.fill("#id_password", user.raw_password)
    page.click("form.login button[type=submit]")  # not the header's language menu
    expect(page.locator("h1")).to_have_text("Task & asset state")
    # The heading shows before the deferred scripts have run: a key pressed then reaches no handler.
    page.wait_for_load_state()


@pytest.fixture
def signed_in(page, live_server, operator, deployment):
    """The operator signed in through the login page (``deployment`` is each test module's data)."""
    sign_in(page, live_server, operator, start="/")
    return page


# Run and task pages (H1, issue 23 item 4): a task key row's actions are one menu (includes/_task_keys_table.html).
def row_action(row, name: str, exact: bool = False):
    """The button ``name`` of the key ``row``'s actions menu, the menu opened first (again, if a refresh of the
    panel after an action replaced the row meanwhile)."""
    button = row.get_by_role("button", name=name, exact=exact)
    for _ in range(3):
        menu = row.locator("details.row-menu")
        if not menu.evaluate("(details) => details.open"):
            menu.locator("summary").click()
        try:
            button.first.wait_for(state="visible", timeout=2000)
            break
        except PlaywrightTimeoutError:
            continue
    return button


# --- Browser-wide console check (H5) -------------------------------------------------------------------------
# Every test that drives a page fails at teardown when the browser logged an error: a console message of type
# "error" (CSP violations, failed requests, htmx's own errors, a script's console.error) or an uncaught
# exception ("pageerror"). CSP violations are also caught as events, with the directive and what was blocked.
# Chromium also logs every answer of 400 or more as "Failed to load resource", whatever the page does with it;
# an answer of 400 to 499 is the server's deliberate word (a form re-shown with its messages is 422, a key
# deleted meanwhile 404, a page out of scope 403) that the page shows, so those lines are no fault. 5xx are.
# A test that provokes other errors on purpose says so with @pytest.mark.console_errors_expected.
FAILED_LOAD = "Failed to load resource: the server responded with a status of "
REPORT_CSP = """document.addEventListener("securitypolicyviolation", (e) => window.reportConsoleCsp(
  [e.violatedDirective, e.blockedURI, e.sourceFile + ":" + e.lineNumber, e.sample].join(" | ")));"""


@pytest.fixture(autouse=True)
def console_errors(request):
    """The page's console errors, uncaught exceptions and CSP violations, checked when the test ends."""
    if "page" not in request.fixturenames:
        yield None
        return
    page = request.getfixturevalue("page")
    found: list[str] = []
    answered_on_purpose: set[str] = set()  # the URLs answered 4xx

    def response(answer):
        if 400 <= answer.status < 500:
            answered_on_purpose.add(answer.url)

    def console(msg):
        if msg.type == "error":
            found.append((msg.text, msg.location.get("url", "")))

    page.on("response", response)
    page.on("console", console)
    page.on("pageerror", lambda error: found.append((f"pageerror: {error}", "")))
    page.expose_function("reportConsoleCsp", lambda text: found.append((f"CSP violation: {text}", "")))
    page.add_init_script(REPORT_CSP)
    yield found
    # Filtered once the test is done: a response event may arrive after the console line it explains.
    found[:] = [
        f"{text} ({url})" for text, url in found if not (text.startswith(FAILED_LOAD) and url in answered_on_purpose)
    ]
    if found and not request.node.get_closest_marker("console_errors_expected"):
        pytest.fail("the browser logged errors:\n" + "\n".join(found), pytrace=False)


# htmx marks the element of a request in flight (or its indicator) with htmx-request, and swapped content with
# htmx-swapping/htmx-settling until it is in place; a part loaded on "load" has started by the time the page is.
HTMX_SETTLED = (
    "() => document.readyState === 'complete'"
    " && !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
)


def settled(page) -> None:
    """Wait until the page has loaded and htmx has nothing in flight: every lazily loaded part is in."""
    page.wait_for_function(HTMX_SETTLED)
