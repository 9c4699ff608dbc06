"""Fragments answer as pages (issue 42, item 6): every address htmx fetches a part of a page from (a dialog, the
overview's largest values) answers a whole page to a normal request (the base layout, its <title> and the
navigation), or a redirect, 404 or 405, never the bare part; with HX-Request it still answers the bare part.

The routes are those whose view is marked ``@fragment`` (dashboard/http/fragments.py), read from the URL conf,
so a new fragment is covered as soon as it is marked; and every ``{% url %}`` a template's hx-get or hx-post
names must be so marked, so a new dialog cannot be forgotten."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from statestore_admin.dashboard.http.fragments import is_fragment
from statestore_admin.records.models import AuditEvent
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
HX = {"HTTP_HX_REQUEST": "true"}
NAV = '<nav aria-label="'
# A fragment's query, where its part needs one to show what it is about (else none): {kind} is filled in below.
QUERIES = {
    "task-key-add": "map_index=-1",
    "task-keys-action": "ids={key}",
    "task-keys-expiry": "ids={key}",
    "asset-key-edit": "key=k",
    "asset-keys-delete": "keys=k",
    "gc-run": "batch_size=10",
    "browse-task-action": "dag_id=etl&run_id={run_id}&task_id=t&key=k",
    "browse-asset-action": "key=k",
}


def _routes(patterns, prefix=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _routes(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern) and entry.name:
            yield entry


FRAGMENTS = sorted({route.name for route in _routes(get_resolver().url_patterns) if is_fragment(route.callback)})


def test_the_fragments_are_found_in_the_url_conf():
    assert {"largest-values", "task-key-edit", "asset-keys-delete", "audit-restore", "gc-run"} <= set(FRAGMENTS)


def test_every_address_htmx_fetches_from_a_template_is_a_marked_fragment():
    named = set()
    for template in Path(settings.BASE_DIR, "templates").rglob("*.html"):
        for attribute in re.findall(r'hx-(?:get|post)="([^"]*)"', template.read_text()):
            named.update(re.findall(r"^{% url '([\w-]+)'", attribute))  # where it goes, not a next= it carries
    assert named and named <= set(FRAGMENTS), named - set(FRAGMENTS)


@pytest.fixture
def scene(
    client, user_factory, dag_run_factory, task_instance_factory, task_key_factory, asset_factory, asset_key_factory
):
    root = user_factory("root", is_superuser=True, is_staff=True)
    client.force_login(root)
    run = dag_run_factory(dag_id="etl")
    task_instance_factory(run, task_id="t")
    key = task_key_factory(run, task_id="t", key="k", value={"a": 1})
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="k", value=[1])
    saved = client.post(reverse("task-key-edit", args=[key.pk]), {"value": '{"a": 2}'}, **HX)  # an event to restore
    assert saved.status_code == 204, saved.content
    event = AuditEvent.objects.latest("pk")
    assert event.restorable
    return {
        "run_pk": run.pk,
        "task_id": "t",
        "key_id": key.pk,
        "asset_id": asset.pk,
        "event_id": event.pk,
        "action": "expire",
        "key": key.pk,
        "run_id": run.run_id,
        "op": "edit",
    }


def _url(name: str, scene: dict) -> str:
    route = next(route for route in _routes(get_resolver().url_patterns) if route.name == name)
    kwargs = {arg: scene[arg] for arg in route.pattern.converters}  # a new argument: add it to the scene
    query = QUERIES.get(name, "").format(**scene)
    return reverse(name, kwargs=kwargs) + (f"?{query}" if query else "")


def _is_page(html: str) -> bool:
    return "<title>" in html and NAV in html and '<header class="topbar"' in html


def _answer(client, url: str, **headers):
    """GET ``url``; a route that only takes a POST (405) is asked with an empty POST, which shows its form's errors."""
    response = client.get(url, **headers)
    if response.status_code == 405:
        response = client.post(url, **headers)
    return response


@pytest.mark.parametrize("name", FRAGMENTS)
def test_a_fragment_opened_at_its_address_is_a_whole_page(client, scene, name):
    response = _answer(client, _url(name, scene))
    if response.status_code in (301, 302, 303, 404, 405):
        return
    html = response.content.decode()
    assert response.status_code in (200, 422), (response.status_code, html[:300])
    assert _is_page(html), html[:300]
    assert html.count("<html") == 1


@pytest.mark.parametrize("name", FRAGMENTS)
def test_a_fragment_fetched_by_htmx_is_still_the_bare_part(client, scene, name):
    response = _answer(client, _url(name, scene), **HX)
    html = response.content.decode()
    assert response.status_code in (200, 422), (response.status_code, html[:300])
    assert html.strip() and "<title>" not in html and NAV not in html and "<html" not in html


def test_the_largest_values_at_their_address_have_a_title_and_the_table(client, scene):
    html = client.get(reverse("largest-values")).content.decode()
    assert re.search(r"<title>\s*Largest values ·", html) and "<h1>Largest values</h1>" in html
    assert '<table class="largest">' in html
