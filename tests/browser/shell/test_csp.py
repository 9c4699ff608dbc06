"""The Content-Security-Policy in a real browser: every page, htmx and our JS work under it, and the browser
reports no violation (it would report every inline script or style, eval, or file from another origin)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.airflow.models import TaskStateStore
from tests.conftest import BOTH_DATABASES
from tests.factories import make_deployment

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]

# Runs in every document before its own scripts: each violation goes to Python, across navigations.
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (e) => {
  window.reportCspViolation([e.violatedDirective, e.blockedURI, e.sourceFile, e.lineNumber, e.sample].join(" | "));
});
"""


@pytest.fixture
def deployment():
    made = make_deployment(
        {"job_id": {"job": "spark-7"}},
        {"watermark": ("2026-11-30", "watcher")},
        expires_at=timezone.now() + timedelta(days=3),
        run_id="scheduled__2026-11-29T00:00:00+00:00",
        state="running",
        task_id="submit",
    )
    return {**made, "key": made["keys"]["job_id"]}


@pytest.fixture
def violations(page):
    """CSP violations the browser reports, as events and as console messages."""
    found = []
    page.expose_function("reportCspViolation", lambda text: found.append(text))
    page.add_init_script(REPORT_VIOLATIONS)
    page.on("console", lambda msg: "Content Security Policy" in msg.text and found.append(f"console: {msg.text}"))
    return found


@pytest.fixture
def signed_in(violations, signed_in):
    """Signed in with the violation listener installed before the first page."""
    return signed_in


def test_pages_and_an_htmx_dialog_work_without_violations(signed_in, live_server, deployment, violations):
    page = signed_in
    run, key, asset = deployment["run"], deployment["key"], deployment["asset"]
    expect(page.locator("table.largest")).to_be_visible()  # htmx loaded it after the page
    stylesheet_applied = "getComputedStyle(document.querySelector('header.topbar')).display"
    assert page.evaluate(stylesheet_applied) != "inline"  # app.css is applied: a header is a block by default

    pages = {
        "/dags/": "etl_orders",
        "/dags/etl_orders/": run.run_id,
        f"/runs/{run.pk}/": run.run_id,
        f"/runs/{run.pk}/tasks/submit/": "job_id",
        f"/keys/task/{key.pk}/": "spark-7",
        "/assets/": "orders_raw",
        f"/assets/{asset.pk}/": "watermark",
        f"/assets/{asset.pk}/key/?key=watermark": "2026-11-30",
        "/search/?key=job": "job_id",
        "/account/tokens/": "API tokens",
    }
    for path, text in pages.items():
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        assert "script-src 'self'" in response.headers["content-security-policy"], path
        expect(page.locator("main")).to_contain_text(text)

    # An htmx dialog: "Set expiry" on the key page, submitted with htmx, the toast from our JS.
    page.goto(f"{live_server.url}/keys/task/{key.pk}/")
    page.get_by_role("button", name="Set expiry").click()
    dialog = page.locator("dialog#modal")
    expect(dialog).to_be_visible()
    expect(dialog.locator("h2")).to_contain_text("job_id")
    dialog.get_by_label("Never expires").check()
    dialog.get_by_role("button", name="Set expiry").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#toasts .toast").last).to_contain_text("never expires")
    assert TaskStateStore.objects.get(pk=key.pk).expires_at is None

    page.goto(f"{live_server.url}/audit/")
    event_link = page.locator("main table a[href*='/audit/']").first
    expect(event_link).to_be_visible()
    event_link.click()
    expect(page.locator("main")).to_contain_text("job_id")

    assert violations == []


def test_swagger_ui_works_without_violations(signed_in, live_server, violations):
    page = signed_in
    response = page.goto(f"{live_server.url}/api/docs/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("statestore-admin API")
    expect(page.locator(".opblock-summary-path").first).to_be_visible()  # the schema loaded and rendered
    assert violations == []
    assert page.evaluate("getComputedStyle(document.body).margin") == "0px"  # the app's page (static/css/app.css)


def test_django_admin_works_without_violations(page, live_server, user_factory, deployment, violations):
    admin = user_factory("admin", is_staff=True, is_superuser=True)
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", admin.username)
    page.fill("#id_password", admin.raw_password)
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()
    for path, text in {
        "/admin/airflow/taskstatestore/": "job_id",
        f"/admin/airflow/taskstatestore/{deployment['key'].pk}/change/": "job_id",
        "/admin/auth/user/": "admin",
    }.items():
        assert page.goto(f"{live_server.url}{path}").status == 200, path
        expect(page.locator("#content")).to_contain_text(text)
    page.locator("#action-toggle").check()  # the admin's own JavaScript runs
    expect(page.locator(".action-counter")).to_contain_text("1 of 1 selected")
    assert violations == []


@pytest.mark.console_errors_expected
def test_the_policy_is_enforced_and_violations_are_seen(signed_in, live_server, violations, console_errors):
    """The checks above can fail: an inline script and an inline style are blocked, and reported (here and by
    the browser-wide console check of tests/browser/conftest.py, which fails any test without this mark)."""
    page = signed_in
    page.goto(f"{live_server.url}/search/")
    seen = page.evaluate(
        """() => new Promise((resolve) => {
        const seen = new Set();
        document.addEventListener("securitypolicyviolation", (e) => {
          seen.add(e.effectiveDirective);
          if (seen.size === 2) resolve([...seen].sort());
        });
        setTimeout(() => resolve([...seen].sort()), 10000);  // a generous bound, never reached when it works
        const script = document.createElement("script");
        script.textContent = "window.inlineRan = true";
        document.body.appendChild(script);
        const style = document.createElement("style");
        style.textContent = "body { background: red; }";
        document.head.appendChild(style);
    })"""
    )
    assert seen == ["script-src-elem", "style-src-elem"]
    assert page.evaluate("window.inlineRan") is None
    assert any("script-src" in v for v in violations) and any("style-src" in v for v in violations), violations
    assert any("Content Security Policy" in text for text, _ in console_errors), console_errors
