"""How many keys a search finds (issue 23, item 13): exact when one page holds them all, a capped count when an
index serves the search ("More than N"), and said to be not counted for a budgeted scan that stopped before the
end, whose count would read every key again."""

import re

import pytest

from statestore_admin.state import search as searching
from tests.conftest import BOTH_DATABASES
from tests.html import flat

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


def count_of(client, params) -> list[str]:
    html = flat(client.get("/search/", params).content.decode())
    return [re.sub(r"<[^>]+>|\s+", " ", m).split() for m in re.findall(r'data-testid="result-count">(.*?)</p>', html)]


@pytest.fixture
def many(dag_run_factory, task_key_factory, asset_factory, asset_key_factory):
    run = dag_run_factory(dag_id="etl_orders", run_id="manual__1")
    for n in range(60):
        task_key_factory(run, key=f"cursor_{n}")
    task_key_factory(dag_run_factory(dag_id="ml_train", run_id="manual__1"), key="cursor_ml")
    asset = asset_factory(name="orders", uri="s3://warehouse/orders")
    asset_key_factory(asset, key="cursor")
    asset_key_factory(asset, key="watermark")


def test_one_page_is_counted_exactly_in_each_store(client, operator, many):
    client.force_login(operator)
    assert count_of(client, {"key": "cursor_ml"}) == ["1 key matches.".split(), "0 keys match.".split()]
    assert count_of(client, {"asset": "orders"}) == [["2", "keys", "match."]]


def test_an_indexed_search_over_several_pages_is_counted_up_to_the_cap(client, operator, many, monkeypatch):
    client.force_login(operator)
    assert count_of(client, {"dag_id": "orders", "store": "task"}) == [["60", "keys", "match."]]
    monkeypatch.setattr(searching, "COUNT_CAP", 55)
    assert count_of(client, {"dag_id": "orders", "store": "task"}) == ["More than 55 keys match.".split()]


def test_a_budgeted_scan_that_goes_on_is_not_counted_and_says_so(client, operator, many):
    client.force_login(operator)
    (counted,) = count_of(client, {"key": "cursor", "store": "task"})  # 61 matches, no DAG: a scan, two pages
    assert " ".join(counted).startswith("Not counted: a key or value search without a DAG filter reads every key.")
    html = client.get("/search/", {"key": "cursor", "store": "task"}).content.decode()
    assert html.count('name="ids"') == 50
