"""Issue 14 items 1 and 13 through Django's test client: caching headers that keep htmx's partials away from Back,
the tokens page's POST-redirect-GET, and ARIA references that point at ids that exist, on every page reachable
from the overview (links and htmx requests followed) and in every dialog's error state."""

import html
import re
from collections import Counter
from datetime import timedelta
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
PANEL = {**HX, "HTTP_HX_TARGET": "keys-panel"}


@pytest.fixture
def world(dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory):
    now = timezone.now()
    run = dag_run_factory(dag_id="etl_orders", run_id="manual__2026-11-29", state="success")
    for map_index in (0, 1):
        task_instance_factory(run, task_id="train", map_index=map_index)
        task_key_factory(run, task_id="train", map_index=map_index, key="checkpoint", value={"epoch": map_index})
    task_instance_factory(run, task_id="submit")
    job = task_key_factory(run, task_id="submit", key="job_id", value="spark-1", expires_at=now + timedelta(days=1))
    asset = asset_factory(name="orders_raw", uri="s3://warehouse/orders")
    asset_key_factory(asset, key="watermark", value="2026-11-30", kind="watcher")
    return {"run": run, "job": job, "asset": asset}


def page_urls(world):
    run, asset = world["run"], world["asset"]
    return {
        "DAGs": "/dags/",
        "DAG runs": "/dags/etl_orders/",
        "run": f"/runs/{run.pk}/",
        "task instance": f"/runs/{run.pk}/tasks/submit/",
        "assets": "/assets/",
        "asset": f"/assets/{asset.pk}/",
        "search": "/search/?key=job",
        "audit": "/audit/",
    }


def vary(response) -> set[str]:
    return {name.strip().lower() for name in response.get("Vary", "").split(",") if name.strip()}


# 1. Back shows the full page ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["DAGs", "DAG runs", "run", "task instance", "assets", "asset", "search", "audit"])
def test_a_page_and_its_panel_vary_on_hx_request_and_the_panel_is_never_stored(client, operator, world, name):
    client.force_login(operator)
    url = page_urls(world)[name]
    page = client.get(url)
    assert page.status_code == 200 and "<html" in page.content.decode()
    assert "hx-request" in vary(page) and "cookie" in vary(page)
    assert "no-store" not in page.get("Cache-Control", "")  # the full page may be kept (Back, bfcache)
    panel = client.get(url, **PANEL)
    assert panel.status_code == 200 and "<html" not in panel.content.decode()
    assert 'id="keys-panel"' in panel.content.decode()
    assert "hx-request" in vary(panel)
    assert "no-store" in panel["Cache-Control"]


def test_htmx_answers_of_every_kind_are_never_stored(client, operator, world):
    client.force_login(operator)
    dialog = client.get(f"/keys/task/{world['job'].pk}/edit/", **HX)
    missing = client.get("/keys/task/999999/edit/", **HX)  # a one-line text for a toast
    invalid = client.post(f"/keys/task/{world['job'].pk}/edit/", {"value": "{"}, **HX)
    assert (dialog.status_code, missing.status_code, invalid.status_code) == (200, 404, 422)
    for response in (dialog, missing, invalid):
        assert "no-store" in response["Cache-Control"] and "hx-request" in vary(response)


def test_the_api_is_left_alone(client, operator, world):
    client.force_login(operator)
    response = client.get("/api/statestore/v1/stats", **HX)
    assert response.status_code == 200
    assert "hx-request" not in vary(response) and "no-store" not in response.get("Cache-Control", "")


# 13. Tokens: POST-redirect-GET, the token shown once and never cached; revoke asks, Cancel focused ------
def test_creating_a_token_redirects_and_a_reload_creates_no_other(client, operator):
    client.force_login(operator)
    created = client.post("/account/tokens/", {"name": "ci", "expires_in_days": "30"}, follow=True)
    assert created.redirect_chain == [("/account/tokens/", 302)]
    shown = re.search(r'data-testid="new-token">([^<]+)<', created.content.decode()).group(1)
    assert "no-store" in created["Cache-Control"]  # a secret: not in the browser's cache for Back to show
    reloaded = client.get("/account/tokens/")  # what a reload of the page after the redirect sends
    assert shown not in reloaded.content.decode() and "no-store" not in reloaded.get("Cache-Control", "")
    assert ApiToken.objects.filter(user=operator).count() == 1


def test_revoke_is_a_confirmation_with_cancel_focused_and_each_link_names_its_token(client, operator):
    client.force_login(operator)
    first, _ = ApiToken.issue(operator, "ci")
    second, _ = ApiToken.issue(operator, "laptop")
    listing = html.unescape(client.get("/account/tokens/").content.decode())
    for record in (first, second):
        assert f'aria-label="Revoke token {record.prefix}…"' in listing
    confirm = client.get(f"/account/tokens/{first.pk}/revoke/").content.decode()
    assert re.search(r'<a href="/account/tokens/" autofocus>Cancel</a>', confirm)
    assert ApiToken.objects.active().count() == 2  # asking revokes nothing


# 13. aria-describedby (and every other id reference) points at an id that exists ----------------------
IDREF_ATTRIBUTES = (
    "aria-describedby",
    "aria-labelledby",
    "aria-controls",
    "aria-owns",
    "aria-errormessage",
    "aria-details",
    "aria-flowto",
    "aria-activedescendant",
    "for",
    "list",
    "form",
)


class _Html(HTMLParser):
    """The ids of a document, the id references of its elements, its links and its htmx GETs."""

    def __init__(self):
        super().__init__()
        self.ids: Counter = Counter()
        self.references: list[tuple[str, str, str]] = []
        self.links: list[str] = []
        self.htmx_gets: list[tuple[str, str]] = []
        self.whole = False  # a whole page, not a partial

    def handle_starttag(self, tag, attrs):
        self.whole = self.whole or tag == "html"
        attrs = {name: value or "" for name, value in attrs}
        if attrs.get("id"):
            self.ids[attrs["id"]] += 1
        for name in IDREF_ATTRIBUTES:
            if name in attrs and not (name == "for" and tag not in ("label", "output")):
                self.references += [(tag, name, ref) for ref in attrs[name].split()]
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if attrs.get("hx-get"):
            self.htmx_gets.append((attrs["hx-get"], attrs.get("hx-target", "").lstrip("#")))


def parse(text: str) -> _Html:
    parser = _Html()
    parser.feed(text)
    return parser


def dangling(document: _Html, context: _Html | None = None) -> list[str]:
    """References to ids that do not exist or exist more than once. A partial's may point into the page it is
    swapped into (``context``); a whole page stands alone."""
    problems = []
    for tag, name, ref in document.references:
        count = document.ids[ref] or (context.ids[ref] if context and not document.whole else 0)
        if count != 1:
            problems.append(f"<{tag} {name}={ref!r}>: " + (f"{count} elements have it" if count else "no such id"))
    return problems


def _local(url: str) -> str | None:
    """A same-site URL worth following, normalised (query sorted), or None."""
    parts = urlsplit(html.unescape(url))
    if parts.scheme or parts.netloc or not parts.path.startswith("/"):
        return None
    if parts.path.startswith(("/api/v2", "/api/statestore", "/admin/", "/static/", "/logout")):
        return None
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return parts.path + (f"?{query}" if query else "")


def crawl(client: Client, start: str = "/", limit: int = 400) -> dict[str, list[str]]:
    """Every page reachable from ``start`` by links, and every htmx GET they make (a dialog, a panel), with
    the problems found in each HTML answer."""
    problems: dict[str, list[str]] = {}
    queue: list[tuple[str, str, _Html | None]] = [(start, "", None)]
    seen = {(start, "")}
    while queue and len(seen) <= limit:
        url, target, context = queue.pop(0)
        headers = {**HX, "HTTP_HX_TARGET": target} if target else {}
        response = client.get(url, **headers)
        if not response.get("Content-Type", "").startswith("text/html") or response.status_code >= 300:
            continue
        document = parse(b"".join(response) if response.streaming else response.content.decode())
        problems[f"{url} (htmx → #{target})" if target else url] = dangling(document, context)
        page = None if target else document
        follow = [(link, "") for link in document.links] + document.htmx_gets
        for link, into in follow:
            local = _local(link)
            if local and (local, into) not in seen:
                seen.add((local, into))
                queue.append((local, into, page or context))
    assert len(seen) <= limit, "the crawl stopped early: raise the limit"
    return problems


def test_every_page_and_dialog_refers_only_to_ids_that_exist(client, user_factory, world):
    root = user_factory("root", is_superuser=True, is_staff=True)
    client.force_login(root)
    client.post(f"/keys/task/{world['job'].pk}/edit/", {"value": '"spark-2"'}, **HX)  # an audit event to visit
    ApiToken.issue(root, "ci")  # a token to revoke
    problems = crawl(client)
    problems["/login/"] = dangling(parse(Client().get("/login/").content.decode()))  # signed out
    problems["404"] = dangling(parse(client.get("/no-such-page/").content.decode()))
    assert len(problems) > 30, sorted(problems)  # overview, lists, run, task instances, keys, dialogs, audit…
    assert {f"/runs/{world['run'].pk}/", "/search/", "/account/tokens/", "/audit/"} <= set(problems)
    assert not {url: found for url, found in problems.items() if found}


def test_dialogs_with_errors_refer_only_to_ids_that_exist(client, operator, world):
    client.force_login(operator)
    run, job, asset = world["run"], world["job"], world["asset"]
    page = parse(client.get(f"/runs/{run.pk}/tasks/submit/").content.decode())
    answers = [
        client.post(f"/keys/task/{job.pk}/edit/", {"value": "{"}, **HX),
        client.post(f"/keys/task/{job.pk}/expiry/", {"expiry": "at", "expires_at": "soon"}, **HX),
        client.post(f"/runs/{run.pk}/tasks/submit/add/", {"key": "", "value": "{", "expiry": "default"}, **HX),
        client.post(f"/assets/{asset.pk}/add/", {"key": "", "value": "{"}, **HX),
        client.post(f"/assets/{asset.pk}/key/edit/?key=watermark", {"value": "{"}, **HX),
    ]
    for response in answers:
        text = response.content.decode()
        assert response.status_code == 422 and "aria-describedby" in text, text
        assert not dangling(parse(text), page), text
