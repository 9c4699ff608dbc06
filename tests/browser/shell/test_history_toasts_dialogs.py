"""Back after an action, toasts, confirmation dialogs, API tokens and ARIA references, in a real browser (issue 14
items 1, 12 and 13)."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.tokens.models import ApiToken
from tests.browser.conftest import row_action, settled
from tests.conftest import BOTH_DATABASES
from tests.factories import make_deployment

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
LONG_KEY = "k" * 2000


@pytest.fixture
def deployment():
    now = timezone.now()
    return make_deployment(
        {"checkpoint": {"epoch": 3}, "job_id": {"job": "spark-7"}},
        {"watermark": ("2026-11-30", "watcher"), "cursor": ({"id": 991}, "api")},
        expires_at={"checkpoint": now + timedelta(days=30), "job_id": now + timedelta(days=3)},
    )


def last_toast(page):
    return page.locator("#toasts .toast").last


def row_of(page, key: str):
    return page.locator("#keys-panel tr", has=page.locator("td.key code", has_text=re.compile(f"^{key}$")))


def expect_full_page(page, heading: str):
    """The whole page: its title, stylesheets, navigation and heading, not a bare panel."""
    expect(page).to_have_title(re.compile(r"· statestore-admin$"))
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    expect(page.locator("h1")).to_contain_text(heading)
    assert page.evaluate("document.styleSheets.length") >= 1
    assert page.evaluate("getComputedStyle(document.querySelector('header.topbar')).display") != "inline"


def expire_now(page, key: str):
    """An action on the page: its panel is then refreshed by htmx at the page's own URL."""
    row_action(row_of(page, key), f"Expire now: {key}").click()
    dialog = page.locator("dialog#modal")
    dialog.get_by_role("button", name="Expire 1 key").click()
    expect(last_toast(page)).to_have_text(re.compile("Expired 1 key"))
    expect(row_of(page, key).locator(".badge")).to_have_text("expired")


def leave_and_come_back(page):
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Audit").click()
    expect(page.locator("h1")).to_contain_text("Audit")
    page.go_back()


def test_back_after_an_action_shows_the_full_task_instance_page(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/train/")
    expire_now(page, "job_id")
    leave_and_come_back(page)
    expect_full_page(page, "train")
    expect(row_of(page, "job_id").locator(".badge")).to_have_text("expired")  # the page as it is now


def test_back_after_an_action_shows_the_full_run_page(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/")
    expire_now(page, "checkpoint")
    leave_and_come_back(page)
    expect_full_page(page, "manual__2026-11-29")


def test_back_after_an_action_shows_the_full_search_page(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/search/?key=job")
    expire_now(page, "job_id")
    leave_and_come_back(page)
    expect_full_page(page, "Search")
    expect(page.get_by_label("Key", exact=True)).to_have_value("job")


def test_back_after_an_action_shows_the_full_asset_page(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/assets/{deployment['asset'].pk}/")
    row_of(page, "cursor").get_by_role("button", name="Delete cursor").click()
    page.locator("dialog#modal").get_by_role("button", name="Delete 1 key").click()
    expect(last_toast(page)).to_contain_text("Deleted 1 key")
    expect(row_of(page, "cursor")).to_have_count(0)
    leave_and_come_back(page)
    expect_full_page(page, "orders_raw")
    assert not AssetStateStore.objects.filter(key="cursor").exists()


# 12. Toasts ----------------------------------------------------------------------------------------
def fire_toast(page, message: str, level: str):
    """The event an htmx answer's HX-Trigger raises (dashboard/http/htmx.py): {"toast": {"message": …, "level": …}}."""
    page.evaluate(
        "([message, level]) => document.body.dispatchEvent(new CustomEvent('toast', {detail: {message, level}}))",
        [message, level],
    )


def test_a_long_keys_toast_is_clipped_in_the_corner_and_closable(signed_in, live_server, deployment):
    page = signed_in
    task_key = TaskStateStore.objects.get(key="job_id")
    TaskStateStore.objects.filter(pk=task_key.pk).update(key=LONG_KEY[:500])
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/train/")
    row_action(page.locator("#keys-panel tr").last, "Edit").click()
    dialog = page.locator("dialog#modal")
    dialog.locator("textarea").fill('{"job": "spark-8"}')
    dialog.get_by_role("button", name="Save value").click()
    shown = last_toast(page)
    expect(shown).to_contain_text("Saved the value of")
    assert LONG_KEY[:500] in shown.inner_text()  # all of it for screen readers and copying; the rest clipped
    box, viewport = shown.bounding_box(), page.viewport_size
    assert box["height"] <= 130 and box["width"] <= 24 * 16 + 1, box  # four lines at most, 24rem
    assert viewport["width"] - 40 <= box["x"] + box["width"] <= viewport["width"]  # bottom right corner
    assert viewport["height"] - 40 <= box["y"] + box["height"] <= viewport["height"]
    menu = row_of(page, "checkpoint").locator("summary")
    menu.click(trial=True)  # the rows' action menus stay clickable: nothing lies over them
    shown.get_by_role("button", name="Dismiss notification").click()
    expect(page.locator("#toasts .toast")).to_have_count(0)


def test_success_goes_errors_stay_until_closed_and_both_are_announced(signed_in, live_server, deployment):
    page = signed_in
    page.clock.install()
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/train/")
    toasts = page.locator("#toasts")
    expect(toasts).to_have_attribute("aria-live", "polite")
    edit = row_action(row_of(page, "checkpoint"), "Edit checkpoint")  # the menu fetches its buttons when opened
    TaskStateStore.objects.filter(key="checkpoint").delete()  # deleted meanwhile: the dialog's GET is a 404
    edit.click()
    error = toasts.locator(".toast-error")
    expect(error).to_have_text(re.compile("it may have been deleted"))
    expect(error).to_have_attribute("role", "alert")  # assertive
    expire_now(page, "job_id")
    success = toasts.locator(".toast-success")
    expect(success).to_have_count(1)
    page.mouse.move(0, 0)  # a hovered toast stays (static/js/app.js): the pointer is not the reader here
    page.clock.run_for(16_000)  # an expiry's toast offers Undo, so it stays UNDO_MS (15 s) rather than 6 s
    expect(success).to_have_count(0)
    page.clock.run_for(120_000)
    expect(error).to_be_visible()  # an error waits for the reader
    error.get_by_role("button", name="Dismiss notification").click()
    expect(toasts.locator(".toast")).to_have_count(0)


def test_a_toast_shown_while_a_dialog_is_open_can_be_read_and_closed(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/train/")
    row_action(row_of(page, "job_id"), "Edit job_id").click()
    dialog = page.locator("dialog#modal")
    expect(dialog).to_be_visible()
    fire_toast(page, "The server cannot be reached.", "error")
    error = page.locator("#toasts .toast-error")
    expect(error).to_be_visible()
    error.get_by_role("button", name="Dismiss notification").click()  # not inert behind the modal dialog
    expect(error).to_have_count(0)
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    fire_toast(page, "Back on the page.", "info")
    expect(page.locator("body > #toasts .toast")).to_have_text("Back on the page.")


def test_dismissing_a_toast_from_the_keyboard_moves_focus_to_the_next(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/search/")
    fire_toast(page, "First failure", "error")
    fire_toast(page, "Second failure", "error")
    closes = page.get_by_role("button", name="Dismiss notification")
    closes.first.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#toasts .toast")).to_have_text(["Second failure"])
    expect(closes.first).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#toasts .toast")).to_have_count(0)


def test_at_most_a_few_toasts_pile_up(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/search/")
    for number in range(8):
        fire_toast(page, f"Message {number}", "success")
    expect(page.locator("#toasts .toast")).to_have_count(4)
    expect(page.locator("#toasts .toast").last).to_have_text("Message 7")


# 13. Confirmations focus Cancel; row buttons name their key ------------------------------------------
def test_enter_in_a_task_delete_confirmation_does_not_delete(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/train/")
    row_action(row_of(page, "job_id"), "Delete job_id").click()
    dialog = page.locator("dialog#modal")
    expect(dialog.get_by_role("button", name="Delete 1 key")).to_be_visible()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()
    assert TaskStateStore.objects.filter(key="job_id").exists()
    page.get_by_role("button", name="Clear all keys").click()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()
    assert TaskStateStore.objects.count() == 2


def test_enter_in_an_asset_clear_confirmation_does_not_delete(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/assets/{deployment['asset'].pk}/")
    page.get_by_role("button", name="Clear all state").click()
    dialog = page.locator("dialog#modal")
    expect(dialog.get_by_role("button", name="Clear 2 keys")).to_be_visible()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()
    assert AssetStateStore.objects.count() == 2


def test_a_form_dialog_still_focuses_its_field(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/train/")
    row_action(row_of(page, "job_id"), "Edit job_id").click()
    textarea = page.locator("dialog#modal textarea")
    expect(textarea).to_be_focused()
    textarea.fill("{")
    page.locator("dialog#modal").get_by_role("button", name="Save value").click()
    expect(page.locator("dialog#modal .field-error")).to_be_visible()
    expect(textarea).to_be_focused()  # the replaced form: focus back on the field in error


def test_row_buttons_say_which_key(signed_in, live_server, deployment):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{deployment['run'].pk}/tasks/train/")
    for key in ("checkpoint", "job_id"):
        for name in (f"Edit {key}", f"Expiry of {key}", f"Expire now: {key}", f"Delete {key}"):
            expect(row_action(row_of(page, key), name, exact=True)).to_have_count(1)
    page.goto(f"{live_server.url}/assets/{deployment['asset'].pk}/")
    for key in ("watermark", "cursor"):
        for name in (f"Edit {key}", f"Delete {key}"):
            expect(page.get_by_role("button", name=name, exact=True)).to_have_count(1)


# 13. API tokens: revoke asks; a reload after creating creates nothing ----------------------------------
def test_token_revoke_asks_first_and_enter_keeps_the_token(signed_in, live_server, operator):
    page = signed_in
    record, _ = ApiToken.issue(operator, "ci")
    page.goto(f"{live_server.url}/account/tokens/")
    page.get_by_role("link", name=f"Revoke token {record.prefix}…").click()
    expect(page.locator("h1")).to_contain_text(f"Revoke API token {record.prefix}")
    expect(page.get_by_role("link", name="Cancel")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_have_text("API tokens")
    assert ApiToken.objects.get(pk=record.pk).revoked_at is None
    page.get_by_role("link", name=f"Revoke token {record.prefix}…").click()
    page.get_by_role("button", name="Revoke").click()
    expect(last_toast(page)).to_contain_text(f"Revoked token {record.prefix}")
    assert ApiToken.objects.get(pk=record.pk).revoked_at is not None


def test_a_reload_after_creating_a_token_creates_no_other(signed_in, live_server, operator):
    page = signed_in
    page.goto(f"{live_server.url}/account/tokens/")
    page.get_by_label("Name").fill("laptop")
    page.get_by_role("button", name="Create token").click()
    token = page.get_by_test_id("new-token").inner_text()
    assert token.startswith("ssa_")
    page.reload()
    expect(page.locator("h1")).to_have_text("API tokens")
    expect(page.get_by_test_id("new-token")).to_have_count(0)  # shown once
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Search").click()
    page.go_back()
    expect(page.get_by_test_id("new-token")).to_have_count(0)  # not from the browser's cache either
    assert ApiToken.objects.filter(user=operator).count() == 1


# 13. aria-describedby and every other id reference point at an id that exists ---------------------------
DANGLING = """() => {
  const attributes = ["aria-describedby", "aria-labelledby", "aria-controls", "aria-owns", "aria-errormessage",
    "aria-details", "aria-flowto", "aria-activedescendant"];
  const problems = [];
  const check = (element, name, ids) => ids.split(/\\s+/).filter(Boolean).forEach((id) => {
    const count = document.querySelectorAll(`[id="${CSS.escape(id)}"]`).length;
    if (count !== 1) problems.push(`${element.tagName.toLowerCase()} ${name}=${id}: ${count} elements`);
  });
  for (const name of attributes) {
    document.querySelectorAll(`[${name}]`).forEach((e) => check(e, name, e.getAttribute(name)));
  }
  document.querySelectorAll("label[for]").forEach((e) => check(e, "for", e.htmlFor));
  return problems;
}"""


def test_aria_references_exist_on_every_page_and_in_every_dialog(signed_in, live_server, deployment):
    page = signed_in
    run, asset = deployment["run"], deployment["asset"]
    seen, queue, problems = set(), ["/"], {}
    while queue:  # every page linked from the overview, and from those, on this site
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        page.goto(live_server.url + url)
        settled(page)
        problems[url] = page.evaluate(DANGLING)
        for href in page.eval_on_selector_all("a[href^='/']:not([download])", "links => links.map(a => a.pathname)"):
            if not href.startswith(("/api/", "/admin/", "/static/")) and "/export" not in href:
                queue.append(href)
    assert {"/", "/dags/", f"/runs/{run.pk}/", f"/assets/{asset.pk}/", "/search/", "/account/tokens/"} <= seen
    page.goto(f"{live_server.url}/runs/{run.pk}/tasks/train/")
    dialogs = {
        "edit": ("Edit job_id", "Save value", "{"),
        "expiry": ("Expiry of job_id", None, None),
        "expire": ("Expire now: job_id", None, None),
        "delete": ("Delete job_id", None, None),
        "add": ("Add key", "Add key", "{"),
    }
    for name, (opener, submit, bad_value) in dialogs.items():
        if name == "add":
            page.get_by_role("button", name=opener, exact=True).first.click()
        else:  # a key row's action: in its menu
            row_action(row_of(page, "job_id"), opener, exact=True).click()
        dialog = page.locator("dialog#modal")
        expect(dialog).to_be_visible()
        problems[f"dialog {name}"] = page.evaluate(DANGLING)
        if submit:
            if name == "add":
                dialog.get_by_label("Key", exact=True).fill("new_key")
            dialog.locator("textarea").fill(bad_value)
            dialog.get_by_role("button", name=submit, exact=True).click()
            expect(dialog.locator(".error").first, f"the {name} dialog shows its error").to_be_visible()
            problems[f"dialog {name} with errors"] = page.evaluate(DANGLING)
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()
    assert not {where: found for where, found in problems.items() if found}
