"""Take the README's gallery (docs/screenshots/) from the demo as a newcomer sees it, in Debian's Chromium.

Run `make run` first (the demo on http://127.0.0.1:8000/, its password in var/demo/demo_password), then:

    .venv/bin/python scripts/readme_screenshots.py [--url http://127.0.0.1:8000] [--out docs/screenshots]

It signs in as `demo` (an Admin: every menu shows, Orphans included when the demo's worker-side storage is on)
and takes each page at 1440x900, light, and Insights and GC dark too. It only reads pages and opens a dialog
that it cancels: the demo's data is left as it was. (The audit trail's shots need changes to show:
tests/browser/audit/test_audit_page.py takes them, with UPDATE_DOC_SCREENSHOTS=1.)
"""

import argparse
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def sign_in(page, url: str, password: str) -> None:
    page.goto(f"{url}/login/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Task & asset state")


def shoot(page, out: Path, name: str) -> None:
    page.screenshot(path=str(out / f"{name}.png"))
    print(out / f"{name}.png")


def take(page, url: str, out: Path) -> None:
    page.goto(f"{url}/")
    shoot(page, out, "overview")
    page.goto(f"{url}/dags/etl_orders/")
    page.locator("#keys-panel a[href^='/runs/']").first.click()
    expect(page.locator("table.keys").first).to_be_visible()
    shoot(page, out, "dag-run")
    page.locator("table.keys td.key a").first.click()
    expect(page.locator("h1.key-title")).to_be_visible()
    shoot(page, out, "key-detail")
    page.goto(f"{url}/assets/")
    page.locator("#keys-panel a[href^='/assets/']").first.click()
    page.get_by_role("button", name="Clear all state").click()
    dialog = page.locator("dialog#modal")
    expect(dialog.locator("h2")).to_be_visible()
    shoot(page, out, "confirm-clear-asset")
    dialog.get_by_role("button", name="Cancel").click()
    page.goto(f"{url}/orphans/")
    shoot(page, out, "orphans")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    url = args.url.rstrip("/")
    password = (ROOT / "var" / "demo" / "demo_password").read_text().strip()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for scheme in ("light", "dark"):
            page = browser.new_context(viewport={"width": 1440, "height": 900}, color_scheme=scheme).new_page()
            sign_in(page, url, password)
            if scheme == "light":
                take(page, url, args.out)
            for name in ("insights", "gc"):
                page.goto(f"{url}/{name}/")
                shoot(page, args.out, f"{name}-{scheme}")
        browser.close()


if __name__ == "__main__":
    main()
