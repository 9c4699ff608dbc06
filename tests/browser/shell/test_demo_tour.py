"""A tour of the demo as a new user takes it (issue 42): every page reachable by links from the overview, in
Chromium, as an administrator, on the demo's own data. What a user reads must never hold template syntax: a
``{# … #}`` that spans lines, or a tag broken across lines, is printed as text by Django, not removed (the DAG
runs page once showed a developer's note above its Compare button). And a key page stays light whatever its
value's size (the demo's 37 KB ``manifest`` once made a 409 KB page): under ``KEY_PAGE_LIMIT`` of HTML; a key
whose value is a worker-side object (the demo writes them to a file:// storage, as ``make run`` does) shows the
object's size beside the reference's bytes.

The pages are read in turn at 1280 and 390 px, light and dark (``LAYOUTS``), so every layout is taken and no page
is read four times; at 390 px no page is wider than the screen.

The crawl follows same-site links of GET pages only (never a download, an export, the API or sign-out) and
visits each path once, its query aside, so that filtered lists of one page are not counted as new pages."""

import re
from urllib.parse import urljoin, urlsplit

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from tests.browser.conftest import sign_in
from tests.conftest import ALL_PERMS, BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]

SYNTAX = re.compile(r"\{#|#\}|\{%|%\}")
# Pages a link may name that are not pages to read: files, the API, Django's admin, leaving.
SKIP = re.compile(r"/(api|admin|static|logout|jsi18n)/|/export/|/download/|/raw/|\.(json|csv|ndjson)$")
KEY_PAGE = re.compile(r"^/keys/task/\d+/$|^/assets/\d+/key/$")
KEY_PAGE_LIMIT = 150_000
LIMIT = 120
LAYOUTS = [
    (scheme, size) for scheme in ("light", "dark") for size in ((1280, 860), (390, 844))
]  # the demo has about 100 distinct page paths; the cap keeps a loop of links from running forever


@pytest.fixture
def deployment(monkeypatch, settings, tmp_path):
    """The demo as ``make run`` loads it: its offloaded values are objects in a file:// storage, gzip-compressed."""
    monkeypatch.setenv("AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_PATH", f"file://{tmp_path}/state/")
    monkeypatch.setenv("AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_COMPRESSION", "gzip")
    settings.WORKER_BACKEND_READ = True
    call_command("demo_data", allow_any_database=True, verbosity=0)


@pytest.fixture
def administrator(user_factory):
    return user_factory("admin", perms=ALL_PERMS, is_superuser=True, is_staff=True)


def page_paths(page, origin: str) -> set[str]:
    hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.getAttribute('href'))")
    found = set()
    for href in hrefs:
        url = urlsplit(urljoin(page.url, href))
        if f"{url.scheme}://{url.netloc}" == origin and not SKIP.search(url.path):
            found.add(url.path + (f"?{url.query}" if url.query else ""))
    return found


def test_no_page_of_the_demo_shows_template_syntax_and_key_pages_stay_light(
    page, live_server, deployment, administrator
):
    sign_in(page, live_server, administrator, start="/")
    origin = live_server.url
    queue, seen_paths, shown, heavy, wide, sized = ["/"], set(), [], [], [], 0
    while queue and len(seen_paths) < LIMIT:
        target = queue.pop(0)
        path = target.split("?")[0]
        if path in seen_paths:
            continue
        seen_paths.add(path)
        scheme, (width, height) = LAYOUTS[len(seen_paths) % len(LAYOUTS)]
        page.emulate_media(color_scheme=scheme)
        page.set_viewport_size({"width": width, "height": height})
        response = page.goto(f"{origin}{target}")
        assert response.status < 500, f"{target} answered {response.status}"
        if "text/html" not in (response.headers.get("content-type") or ""):
            continue
        expect(page.locator("body")).to_be_visible()
        if KEY_PAGE.search(path) and len(response.body()) > KEY_PAGE_LIMIT:
            heavy.append(f"{target}: {len(response.body()):,} bytes")
        if KEY_PAGE.search(path) and page.get_by_test_id("db-size").count():  # a worker-side reference
            # read by this page: its size is known (unless the object is out of reach: an s3:// reference here)
            sized += bool(re.search(r"\d", page.get_by_test_id("object-size").inner_text()))
        if width < 400 and page.evaluate("document.documentElement.scrollWidth") > width:
            wide.append(f"{target} ({scheme})")
        text = page.locator("body").inner_text()
        shown.extend(f"{target}: …{text[max(m.start() - 40, 0) : m.end() + 40]}…" for m in SYNTAX.finditer(text))
        queue.extend(p for p in sorted(page_paths(page, origin)) if p.split("?")[0] not in seen_paths)
    # The tour reached the pages a user reads: a DAG's runs, a run, a task instance, a key, an asset, the audit.
    for pattern in (r"^/dags/[^/]+/$", r"^/runs/\d+/$", r"^/runs/\d+/tasks/", r"^/keys/task/\d+/$", r"^/assets/\d+/$"):
        assert any(re.search(pattern, p) for p in seen_paths), f"the tour never reached {pattern}: {sorted(seen_paths)}"
    assert shown == []
    assert heavy == []
    assert wide == []
    assert sized, "no key page showed the size of a worker-side object it read"
