"""A fragment's address opened as a page (issue 42, item 6), in Chromium at 1280 and 390 px, light and dark:
``/overview/largest/`` (the overview loads it with htmx) and a dialog's address (a key's edit form) show a whole
page, styled, with its title, a heading and the header's navigation, not a bare unstyled part; the overview
still loads the same part into its card."""

import re

import pytest
from playwright.sync_api import expect

from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
LAYOUTS = [(scheme, size) for scheme in ("light", "dark") for size in ((1280, 860), (390, 844))]


@pytest.fixture
def deployment(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl_orders")
    task_instance_factory(run, task_id="extract")
    return task_key_factory(run, task_id="extract", key="manifest", value={"files": list(range(300))})


def test_a_fragments_address_opens_a_whole_page(signed_in, live_server, deployment, screenshot):
    page = signed_in
    expect(page.locator("table.largest")).to_contain_text("manifest")  # the overview's card, loaded by htmx
    for scheme, (width, height) in LAYOUTS:
        page.emulate_media(color_scheme=scheme)
        page.set_viewport_size({"width": width, "height": height})
        for path, title in (("/overview/largest/", "Largest values"), (f"/keys/task/{deployment.pk}/edit/", None)):
            page.goto(f"{live_server.url}{path}")
            expect(page.locator("header.topbar")).to_be_visible()
            expect(page.locator("header.topbar nav:visible, header.topbar .menu-toggle:visible").first).to_be_visible()
            expect(page.locator("h1, h2").first).to_be_visible()
            if title:
                expect(page).to_have_title(re.compile(rf"^{title} · "))
                expect(page.locator("h1")).to_have_text(title)
                expect(page.locator("table.largest")).to_contain_text("manifest")
            # Styled: the layout's stylesheet applies (a bare part has the browser's default 8 px margin and serif).
            assert page.evaluate("getComputedStyle(document.body).fontFamily") != '"Times New Roman"'
            assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{path} scrolls sideways"
            screenshot(f"fragment-page{path.replace('/', '-').rstrip('-')}-{width}-{scheme}")
