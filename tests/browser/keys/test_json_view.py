"""The JSON view of a value (issue 23 item 14), in a real browser: selecting the unfolded tree copies valid JSON,
"Copy JSON" copies the value, "Raw" shows its text, collapse all / expand all, a search that highlights matches
and unfolds them, and a large value (23 KB) opening folded beyond its first levels. No console error."""

import json

import pytest
from playwright.sync_api import expect

from statestore_admin.airflow.models import TaskStateStore
from tests.conftest import BOTH_DATABASES
from tests.factories import make_deployment

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
SMALL = {"job": {"id": 7, "tags": ["a", "b"], "ok": True}, "rows": [1, 2, 3], "empty": {}, "note": "<b>hi</b>"}
LARGE = {
    "partitions": [
        {
            "name": f"p{i}",
            "stats": {"rows": i * 100, "bytes": i * 4096, "files": [f"part-{i}-{j}.parquet" for j in range(4)]},
        }
        for i in range(150)
    ],
    "owner": "etl",
}


@pytest.fixture
def deployment():
    made = make_deployment({"small": SMALL, "large": LARGE})
    assert 20_000 < len(json.dumps(LARGE)) < 30_000
    return made


def open_key(page, live_server, name):
    page.goto(f"{live_server.url}/keys/task/{TaskStateStore.objects.get(key=name).pk}/")
    return page.locator("section.value-view")


def test_selecting_the_tree_copies_valid_json(signed_in, live_server, deployment, console_errors):
    page = signed_in
    view = open_key(page, live_server, "small")
    selected = view.locator(".json-tree").evaluate(
        "tree => { const r = document.createRange(); r.selectNodeContents(tree); const s = getSelection();"
        " s.removeAllRanges(); s.addRange(r); return s.toString(); }"
    )
    assert json.loads(selected) == SMALL


def test_copy_json_and_the_raw_view(signed_in, live_server, deployment, console_errors):
    page = signed_in
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    view = open_key(page, live_server, "small")
    view.get_by_role("button", name="Copy JSON").click()
    expect(page.locator("#toasts .toast", has_text="copied")).to_be_visible()
    assert json.loads(page.evaluate("navigator.clipboard.readText()")) == SMALL
    raw = view.get_by_role("button", name="Raw")
    raw.click()
    expect(raw).to_have_attribute("aria-pressed", "true")
    expect(view.locator(".json-tree")).to_be_hidden()
    assert json.loads(view.locator("pre.json-raw").inner_text()) == SMALL
    raw.click()
    expect(view.locator(".json-tree")).to_be_visible()


def test_a_large_value_opens_folded_and_expands_collapses_and_searches(
    signed_in, live_server, deployment, console_errors, screenshot
):
    page = signed_in
    view = open_key(page, live_server, "large")
    tree = view.locator(".json-tree")
    expect(tree.locator("details.j-fold").first).to_have_attribute("open", "")
    expect(tree.get_by_text('"part-57-3.parquet"')).to_be_hidden()  # deep levels start folded
    assert tree.locator("details[open]").count() <= 2
    view.get_by_role("button", name="Expand all").click()
    expect(tree.get_by_text('"part-57-3.parquet"')).to_be_visible()
    view.get_by_role("button", name="Collapse all").click()
    expect(tree.get_by_text('"part-57-3.parquet"')).to_be_hidden()
    assert tree.locator("details[open]").count() == 1
    view.get_by_role("searchbox", name="Search in the value").fill("part-57-")
    expect(view.locator("[data-json-matches]")).to_have_text("4 matches")
    expect(tree.locator("mark.j-match")).to_have_count(4)
    expect(tree.locator("mark.j-match").first).to_be_visible()  # its levels unfolded
    expect(tree.locator("mark.j-current")).to_have_count(1)
    screenshot("json-view-search")
    view.get_by_role("searchbox", name="Search in the value").fill("")
    expect(tree.locator("mark.j-match")).to_have_count(0)
    assert json.loads(page.evaluate("document.getElementById('raw-value').value")) == LARGE
