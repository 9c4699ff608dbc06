"""The plugin in Airflow 3.3.2's own UI, in a real browser (issue 25): Airflow's Browse menu has the "State
store" entry; the mapped task instance ``fold[1]`` has a "State store" tab that shows, inside Airflow's frame,
the dashboard's page of that task instance with its keys; and the dashboard, framed by Airflow's origin only,
still refuses any other. On Airflow 3.4.0b2, the asset page's tab (a destination 3.3 does not have).
Screenshots of the entries go to test-artifacts/screenshots/; with UPDATE_DOC_SCREENSHOTS=1 also to
docs/screenshots/ (the README shows them), as the browser tests do.
"""

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from .conftest import ROOT, Dashboard, free_port, query, wait_for

pytestmark = pytest.mark.compat
CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
DOCS = ROOT / "docs" / "screenshots"


@pytest.fixture
def chromium():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        yield browser
        browser.close()


def framed_stack(airflow, golden: dict, name: str, servers, plugins: Path) -> tuple[str, str, str]:
    """(db, dashboard URL, Airflow's origin): a copy of ``golden``, the dashboard allowing Airflow's origin to
    frame it, and Airflow's API server (its UI) with the plugin of ``airflow_plugin --embed``."""
    db = airflow.copy(golden["db"], name)
    airflow_port = free_port()
    airflow_origin = f"http://127.0.0.1:{airflow_port}"
    dashboard = Dashboard(airflow, db)
    dashboard.setup()
    process, url = dashboard.server(STATESTORE_FRAME_ANCESTORS=airflow_origin)
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


def signed_in_page(chromium, url):
    """A browser page whose context has the dashboard's session, as an operator who signed in before."""
    from playwright.sync_api import expect

    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.goto(f"{url}/login/")
    page.fill("input[name=username]", "compat")
    page.fill("input[name=password]", "compat-pw-1")
    page.click("button[type=submit]")
    expect(page.get_by_text("Sign out")).to_be_visible()
    return context, page


def test_the_plugin_in_airflows_ui_opens_the_task_instance_framed(airflow, golden, servers, chromium, tmp_path):
    from playwright.sync_api import expect

    db, url, airflow_origin = framed_stack(airflow, golden, "pluginui", servers, tmp_path / "plugins")

    # What the dashboard answers to a framing request: Airflow's origin only, on its own pages too.
    login = requests.get(f"{url}/login/", headers={"Sec-Fetch-Dest": "iframe"}, timeout=30)
    assert f"frame-ancestors {airflow_origin}" in login.headers["Content-Security-Policy"]
    assert "X-Frame-Options" not in login.headers

    keys = {"checkpoint", "stale"}  # fold[1]'s own keys (the DAG); map index 0 and 2 have the same names
    assert keys <= {
        r[0] for r in query(db, "SELECT key FROM task_state_store WHERE task_id = 'fold' AND map_index = 1")
    }
    run_id = golden["run_id"]
    context, page = signed_in_page(chromium, url)
    page.goto(f"{airflow_origin}/dags/{golden['dag_id']}/runs/{quote(run_id, safe='')}/tasks/fold/mapped/1")
    tab = (
        page.get_by_role("tab", name="State store", exact=True)
        .or_(page.get_by_role("link", name="State store", exact=True))
        .first
    )
    expect(tab).to_be_visible(timeout=60_000)
    expect(page.get_by_text("No Task Instance found")).to_have_count(0, timeout=60_000)  # loaded
    page.get_by_role("button", name="Browse").click()
    expect(page.get_by_role("menuitem", name="State store")).to_be_visible()
    shot(page, "airflow-plugin-nav.png")
    page.keyboard.press("Escape")

    tab.click()
    frame = page.frame_locator('iframe[title="State store"]')
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
    other.set_content(f'<iframe src="{url}/dags/" width="600" height="400"></iframe>')
    other.wait_for_timeout(3000)  # the frame's answer, refused or not, has arrived by then
    inner = [f for f in other.frames if f != other.main_frame]
    assert len(inner) == 1 and golden["dag_id"] not in _text(inner[0]), inner[0].url
    assert any("frame-ancestors" in text and "blocked" in text for text in said), said  # by the CSP
    context.close()


def test_on_airflow_34_the_asset_page_has_the_tab(airflow34, golden34, servers, chromium, tmp_path):
    """Airflow 3.4 offers the ``asset`` destination: its asset page has the tab, showing the asset's keys."""
    from playwright.sync_api import expect

    db, url, airflow_origin = framed_stack(airflow34, golden34, "pluginui", servers, tmp_path / "plugins")
    keys = [r[0] for r in query(db, "SELECT key FROM asset_state_store WHERE asset_id = %s", [golden34["asset_id"]])]
    assert keys
    context, page = signed_in_page(chromium, url)
    page.goto(f"{airflow_origin}/assets/{golden34['asset_id']}")
    tab = (
        page.get_by_role("tab", name="State store", exact=True)
        .or_(page.get_by_role("link", name="State store", exact=True))
        .first
    )
    expect(tab).to_be_visible(timeout=60_000)
    tab.click()
    frame = page.frame_locator('iframe[title="State store"]')
    for key in keys:
        expect(frame.get_by_text(key, exact=True).first).to_be_visible(timeout=60_000)
    assert any(f.url.startswith(f"{url}/assets/{golden34['asset_id']}/") for f in page.frames)
    shot(page, "airflow-plugin-asset-34.png")
    context.close()


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
