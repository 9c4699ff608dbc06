"""Browser tests: Playwright driving Debian's Chromium (/usr/bin/chromium) against a live server.

In CI (CI=true) a missing browser fails the run: .ci/run installs chromium. Elsewhere they are skipped
with the install command, so `make test` still works on a machine without a browser. Screenshots go to
test-artifacts/screenshots/.
"""

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not Path(CHROMIUM).exists():
        message = f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


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


@pytest.fixture
def signed_in(page, live_server, operator, deployment):
    """The operator signed in through the login page (``deployment`` is each test module's data)."""
    page.goto(f"{live_server.url}/")
    expect(page).to_have_url(re.compile(r"/login/"))
    page.fill("#id_username", operator.username)
    page.fill("#id_password", operator.raw_password)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Task & asset state")
    return page


# --- Browser-wide console check (H5) -------------------------------------------------------------------------
# Every test that drives a page fails at teardown when the browser logged an error: a console message of type
# "error" (CSP violations, failed requests, a script's console.error) or an uncaught exception ("pageerror").
# A test that provokes errors on purpose says so with @pytest.mark.console_errors_expected.


@pytest.fixture(autouse=True)
def console_errors(request):
    """The page's console errors and uncaught exceptions, checked when the test ends."""
    if "page" not in request.fixturenames:
        yield None
        return
    page = request.getfixturevalue("page")
    found: list[str] = []
    page.on("console", lambda msg: msg.type == "error" and found.append(f"console: {msg.text} ({msg.location})"))
    page.on("pageerror", lambda error: found.append(f"pageerror: {error}"))
    yield found
    if found and not request.node.get_closest_marker("console_errors_expected"):
        pytest.fail("the browser logged errors:\n" + "\n".join(found), pytrace=False)
