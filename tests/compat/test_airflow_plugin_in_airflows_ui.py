"""The plugin in Airflow 3.3.2's own UI, in a real browser (issue 25): Airflow's Browse menu has the "State
store" entry; the mapped task instance ``fold[1]`` has a "State store" tab that shows, inside Airflow's frame,
the dashboard's page of that task instance with its keys; and the dashboard, framed by Airflow's origin only,
still refuses any other, and never frames its sign-in form. On Airflow 3.4.0b2, the asset page's tab (a
destination 3.3 does not have).
Screenshots of the entries go to test-artifacts/screenshots/; with UPDATE_DOC_SCREENSHOTS=1 also to
docs/screenshots/ (the README shows them), as the browser tests do.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from tests import chromium as test_chromium
from tests.ports import free_port

from .conftest import ROOT, Dashboard, query, stop, wait_for

pytestmark = pytest.mark.compat
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
DOCS = ROOT / "docs" / "screenshots"


@pytest.fixture
def chromium():
    executable = test_chromium.required()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(executable), args=test_chromium.ARGS)
        yield browser
        browser.close()


def framed_stack(
    airflow, golden: dict, name: str, servers, plugins: Path, *, airflow_host="127.0.0.1", tls: Path | None = None
) -> tuple[str, str, str]:
    """(db, dashboard URL, Airflow's origin): a copy of ``golden``, the dashboard allowing Airflow's origin to
    frame it, and Airflow's API server (its UI) with the plugin of ``airflow_plugin --embed``. Airflow's UI is
    opened at ``airflow_host`` (``localhost`` makes it another site than the dashboard's 127.0.0.1); with a
    folder ``tls`` the dashboard is served over HTTPS (``https_server``), as framing across sites needs."""
    db = airflow.copy(golden["db"], name)
    airflow_port = free_port()
    airflow_origin = f"http://{airflow_host}:{airflow_port}"
    dashboard = Dashboard(airflow, db)
    dashboard.setup()
    if tls is None:
        process, url = dashboard.server(STATESTORE_FRAME_ANCESTORS=airflow_origin)
    else:
        process, url = https_server(dashboard, tls, STATESTORE_FRAME_ANCESTORS=airflow_origin)
    servers.append(process)

    plugins.mkdir()
    made = dashboard.manage("airflow_plugin", "--url", url, "--embed")
    assert made.returncode == 0, made.stderr
    (plugins / "statestore_admin.py").write_text(made.stdout)
    airflow.extra_cfg[db] = f"plugins_folder = {plugins}\n"
    process = subprocess.Popen(
        [str(airflow.venv / "bin" / "airflow"), "api-server", "--host", "127.0.0.1", "--port", str(airflow_port)],
        env=airflow.env(db),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    servers.append(process)
    wait_for(f"{airflow_origin}/api/v2/version", process)
    return db, url, airflow_origin


def https_server(dashboard: Dashboard, folder: Path, **extra: str) -> tuple[subprocess.Popen, str]:
    """The dashboard under gunicorn with TLS of its own (a self-signed certificate for 127.0.0.1 made in
    ``folder``), as production behind HTTPS: runserver has no TLS. gunicorn's threaded worker, because the
    asyncio worker of gunicorn.conf.py does not do TLS (production terminates it in a proxy)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--config", "gunicorn.conf.py", "--bind", f"127.0.0.1:{port}",
         "--worker-class", "gthread", "--workers", "1", "--certfile", str(cert), "--keyfile", str(key)],
        cwd=ROOT,
        env=dashboard.env(**extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"https://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        assert process.poll() is None, f"gunicorn exited with {process.returncode}"
        try:
            requests.get(f"{url}/login/", timeout=2, verify=str(cert))
            return process, url
        except requests.RequestException:
            assert time.monotonic() < deadline, f"{url} did not answer within 90 s"
            time.sleep(0.3)


def signed_in_page(chromium, url):
    """A browser page whose context has the dashboard's session, as an operator who signed in before."""
    from playwright.sync_api import expect

    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.goto(f"{url}/login/")
    page.fill("input[name=username]", "compat")
    page.fill("input[name=password]", "compat-pw-1")
    page.click("form.login button[type=submit]")  # not the header's language menu
    expect(page.get_by_text("Sign out")).to_be_visible()
    return context, page


def test_the_plugin_in_airflows_ui_opens_the_task_instance_framed(airflow, golden, servers, chromium, tmp_path):
    from playwright.sync_api import expect

    db, url, airflow_origin = framed_stack(airflow, golden, "pluginui", servers, tmp_path / "plugins")

    # What the dashboard answers to a framing request: Airflow's origin only, on the read pages only; the sign-in
    # form refuses every frame.
    framed = {"Sec-Fetch-Dest": "iframe"}
    read = requests.get(f"{url}/dags/?embed=1", headers=framed, timeout=30, allow_redirects=False)
    assert f"frame-ancestors {airflow_origin}" in read.headers["Content-Security-Policy"]
    assert "X-Frame-Options" not in read.headers
    login = requests.get(f"{url}/login/", headers=framed, timeout=30)
    assert "frame-ancestors 'none'" in login.headers["Content-Security-Policy"]
    assert login.headers["X-Frame-Options"] == "DENY"

    keys = {"checkpoint", "stale"}  # fold[1]'s own keys (the DAG); map index 0 and 2 have the same names
    assert keys <= {
        r[0] for r in query(db, "SELECT key FROM task_state_store WHERE task_id = 'fold' AND map_index = 1")
    }
    run_id = golden["run_id"]
    context, page = signed_in_page(chromium, url)
    page.goto(f"{airflow_origin}/dags/{golden['dag_id']}/runs/{quote(run_id, safe='')}/tasks/fold/mapped/1")
    state_store_tab(page)
    expect(page.get_by_text("No Task Instance found")).to_have_count(0, timeout=60_000)  # loaded
    page.get_by_role("button", name="Browse").click()
    expect(page.get_by_role("menuitem", name="State store")).to_be_visible()
    shot(page, "airflow-plugin-nav.png")
    page.keyboard.press("Escape")

    frame = open_state_store_tab(page)
    for key in keys:
        expect(frame.get_by_text(key, exact=True).first).to_be_visible(timeout=60_000)
    expect(frame.locator("header.topbar")).to_have_count(0)  # the compact layout: Airflow's header is above
    framed_url = next(f.url for f in page.frames if f.url.startswith(url))
    assert "/tasks/fold/?map_index=1" in framed_url, framed_url
    shot(page, "airflow-plugin-task-instance.png")

    # Any other origin (here a page of its own, about:blank's opaque origin) is refused the frame: the same page
    # that Airflow's frame shows stays empty there.
    other = context.new_page()
    said: list[str] = []
    other.on("console", lambda message: said.append(message.text))
    refused = lambda message: "frame-ancestors" in message.text and "blocked" in message.text  # noqa: E731
    with other.expect_console_message(refused, timeout=30_000):  # the frame's answer has arrived: refused
        other.set_content(f'<iframe src="{url}/dags/" width="600" height="400"></iframe>')
    inner = [f for f in other.frames if f != other.main_frame]
    assert len(inner) == 1 and golden["dag_id"] not in _text(inner[0]), inner[0].url
    assert any("frame-ancestors" in text and "blocked" in text for text in said), said  # by the CSP
    context.close()


def test_a_tab_not_signed_in_says_to_sign_in_on_the_dashboards_own_tab(
    airflow34, golden34, servers, chromium, tmp_path
):
    """Airflow's UI on http://localhost, the dashboard on https://127.0.0.1: two sites, so the dashboard's cookies
    in the tab's frame are third-party ones. The sign-in form is never framed (issue 36): an operator not signed
    in to the dashboard gets, inside the frame, a page saying to sign in on the dashboard's own tab, with no
    password field, in the compact layout."""
    from playwright.sync_api import expect

    tls = tmp_path / "tls"
    tls.mkdir()
    _, url, airflow_origin = framed_stack(
        airflow34, golden34, "pluginsites", servers, tmp_path / "plugins", airflow_host="localhost", tls=tls
    )
    # The self-signed certificate is the test's; an operator's dashboard has a real one.
    context = chromium.new_context(viewport={"width": 1400, "height": 900}, ignore_https_errors=True)
    page = context.new_page()
    page.goto(f"{airflow_origin}/dags/{golden34['dag_id']}/runs/{quote(golden34['run_id'], safe='')}/tasks/plain")
    frame = open_state_store_tab(page)
    expect(frame.get_by_role("heading", name="Sign in to the dashboard first")).to_be_visible(timeout=60_000)
    expect(frame.locator("input[type=password]")).to_have_count(0)
    expect(frame.locator("header.topbar")).to_have_count(0)
    # The tab's own link, to open on its own (an href selector: Playwright cannot pass a regex holding "/").
    expect(frame.locator('a[href*="/airflow/task_instance/?dag_id="]')).to_be_visible()
    shot(page, "airflow-plugin-sign-in.png")
    assert page.url.startswith(airflow_origin)  # Airflow's page around it
    cookies = {c["name"]: c for c in context.cookies(url)}
    assert cookies["tz"]["sameSite"] == "None", cookies  # the browser's zone reaches the framed pages too
    context.close()


@pytest.fixture(scope="module")
def stack34(airflow34, golden34, tmp_path_factory):
    """One framed stack on 3.4's database for the two tests below, which only read through it: a dashboard and an
    Airflow api-server started once, not once a test (some 10 s of CPU each time)."""
    started: list = []
    try:
        yield framed_stack(airflow34, golden34, "pluginui", started, tmp_path_factory.mktemp("stack34") / "plugins")
    finally:
        for process in started:
            stop(process)


def test_on_airflow_34_the_asset_page_has_the_tab(stack34, golden34, chromium):
    """Airflow 3.4 offers the ``asset`` destination: its asset page has the tab, showing the asset's keys."""
    from playwright.sync_api import expect

    db, url, airflow_origin = stack34
    keys = [r[0] for r in query(db, "SELECT key FROM asset_state_store WHERE asset_id = %s", [golden34["asset_id"]])]
    assert keys
    context, page = signed_in_page(chromium, url)
    page.goto(f"{airflow_origin}/assets/{golden34['asset_id']}")
    frame = open_state_store_tab(page)
    for key in keys:
        expect(frame.get_by_text(key, exact=True).first).to_be_visible(timeout=60_000)
    assert any(f.url.startswith(f"{url}/assets/{golden34['asset_id']}/") for f in page.frames)
    shot(page, "airflow-plugin-asset-34.png")
    context.close()


def test_on_airflow_34_a_task_instance_inside_a_loop_has_the_tab(stack34, golden34, chromium):
    """``refine.work[1]`` of one loop iteration: Airflow's page is ``/mapped/1`` with the region in its own query,
    which no template carries (docs/airflow-plugin.md). The tab lands on every iteration and map position of
    ``refine.work``, names those at map index 1, and one click shows Airflow's task instance's own keys."""
    from playwright.sync_api import expect

    db, url, airflow_origin = stack34
    region_id, iteration = query(
        db,
        "SELECT ti.region_id, r.parent_region_index FROM task_instance ti JOIN dynamic_region r ON r.id = ti.region_id"
        " WHERE ti.task_id = 'refine.work' AND ti.region_index = 1 ORDER BY r.parent_region_index DESC LIMIT 1",
    )[0]
    keys = query(
        db,
        "SELECT key, value FROM task_state_store WHERE region_id = %s AND region_index = 1",
        [region_id],
    )
    assert "cursor" in [k for k, _ in keys], keys
    context, page = signed_in_page(chromium, url)
    run_path = f"/dags/{golden34['dag_id']}/runs/{quote(golden34['run_id'], safe='')}"
    page.goto(f"{airflow_origin}{run_path}/tasks/refine.work/mapped/1?region_id={region_id}&region_index=1")
    frame = open_state_store_tab(page)
    named = frame.get_by_test_id("from-airflow")
    expect(named).to_contain_text("map index 1 of refine.work", timeout=60_000)
    expect(frame.get_by_text("cursor", exact=True).first).to_be_visible()
    framed_url = next(f.url for f in page.frames if f.url.startswith(url))
    assert "/tasks/refine.work/?map_index=all&airflow_map_index=1" in framed_url, framed_url
    shot(page, "airflow-plugin-region-34.png")

    named.get_by_role("link", name=re.compile(rf"iteration {iteration} › map 1$")).click()
    expect(frame.get_by_text(f'"iteration": {iteration}, "item": "b"').first).to_be_visible(timeout=30_000)
    expect(frame.locator("td.value", has_text='"item": "a"')).to_have_count(0)  # map index 0's keys are not shown
    framed_url = next(f.url for f in page.frames if f.url.startswith(url))
    assert f"region_id={region_id}" in framed_url and "map_index=1" in framed_url, framed_url
    context.close()


def state_store_tab(page):
    """The plugin's tab on an Airflow page (a tab, or a link where Airflow draws it so), once it shows."""
    from playwright.sync_api import expect

    tab = (
        page.get_by_role("tab", name="State store", exact=True)
        .or_(page.get_by_role("link", name="State store", exact=True))
        .first
    )
    expect(tab).to_be_visible(timeout=60_000)
    return tab


def open_state_store_tab(page):
    """Click the plugin's tab: the frame that shows the dashboard's page inside Airflow. A click while Airflow's
    page is still loading its task instance can be lost to the page's own navigation to its default tab (a CI
    run saw the logs shown, no frame): then the tab is clicked again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    tab = state_store_tab(page)
    frame = page.locator('iframe[title="State store"]')
    for attempt in range(3):
        tab.click()
        try:
            frame.wait_for(state="attached", timeout=15_000)
            return frame.content_frame
        except PlaywrightTimeoutError:
            if attempt == 2:
                raise


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name))
    if os.environ.get("UPDATE_DOC_SCREENSHOTS") == "1":
        shutil.copy(SCREENSHOTS / name, DOCS / name)


def _text(frame) -> str:
    try:
        return frame.content()
    except Exception:  # a refused frame may have no document to read
        return ""
