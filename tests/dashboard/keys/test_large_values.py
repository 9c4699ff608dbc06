"""A large value's page is bounded (issue 42 item 2): the JSON tree shows the first entries of each array or
object and loads the rest on demand ("show N more", a folded level opened), so a key page stays under 150 KB
whatever the value's size; the raw text and the copy are loaded too, not inlined. Task keys and asset keys."""

import json

import pytest

from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
PAGE_LIMIT = 150 * 1024
HUGE = [
    {
        "<script>path</script>": f"<b>part-{i:05d}</b>",
        "meta": {"rows": i, "tags": ["x", "<i>y</i>"], "n": list(range(12))},
    }
    for i in range(5000)
] + ["z" * 300_000]
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def huge_task_key(dag_run_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="manual__huge")
    return task_key_factory(run, task_id="t", key="manifest", value=HUGE)


@pytest.fixture
def huge_asset_key(asset_factory, asset_key_factory):
    return asset_key_factory(asset_factory(name="orders"), key="manifest", value=HUGE)


def test_a_huge_task_value_gives_a_bounded_page_and_loads_the_rest(client, operator, huge_task_key):
    client.force_login(operator)
    page = client.get(f"/keys/task/{huge_task_key.pk}/")
    html = page.content.decode()
    assert page.status_code == 200 and len(page.content) < PAGE_LIMIT, len(page.content)
    assert "part-00049" in html and "part-00050" not in html
    assert 'aria-label="Show 50 more"' in html
    assert "&lt;script&gt;path&lt;/script&gt;" in html and "<script>path" not in html
    url = f"/keys/task/{huge_task_key.pk}/value/"
    more = client.get(url, {"path": "[]", "from": 50}, **HX)
    text = more.content.decode()
    assert more.status_code == 200
    assert "&lt;b&gt;part-00050&lt;/b&gt;" in text and "part-00099" in text and "part-00100" not in text
    assert "<b>" not in text and 'aria-label="Show 50 more"' in text
    nested = client.get(url, {"path": json.dumps([4321, "meta", "tags"]), "from": 0}, **HX).content.decode()
    assert "&lt;i&gt;y&lt;/i&gt;" in nested and "<i>" not in nested
    whole = client.get(url, {"path": "[]", "all": "1"}, **HX).content.decode()
    assert "part-04999" in whole and "z" * 300_000 in whole and "Show 50 more" not in whole
    raw = client.get(url, {"raw": "1"}, **HX)
    assert json.loads(raw.content) == HUGE and raw.content.decode().startswith('[\n  {\n    "<script>')
    assert client.get(url, {"copy": "1"}, **HX).content.decode() == huge_task_key.value  # as stored
    assert client.get(url, {"path": "[]", "from": 50}).status_code == 404  # not htmx
    assert client.get(url, {"path": json.dumps([5, "nope"])}, **HX).status_code == 404
    assert client.get(url, {"path": "not json"}, **HX).status_code == 404


def test_a_huge_asset_value_gives_a_bounded_page_and_loads_the_rest(client, operator, huge_asset_key):
    client.force_login(operator)
    asset_id = huge_asset_key.asset_id
    page = client.get(f"/assets/{asset_id}/key/", {"key": "manifest"})
    assert page.status_code == 200 and len(page.content) < PAGE_LIMIT, len(page.content)
    assert 'aria-label="Show 50 more"' in page.content.decode()
    more = client.get(f"/assets/{asset_id}/key/value/", {"key": "manifest", "path": "[]", "from": 4960}, **HX)
    text = more.content.decode()
    assert "&lt;b&gt;part-04960&lt;/b&gt;" in text and "part-04999" in text and "part-04959" not in text
    assert "Show" not in text and "zzz</bdi>…" in text and "298,002 more characters" in text  # the last: a cut string
