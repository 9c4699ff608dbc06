"""The overview at 1440×900 with a worker-side backend configured (issue 23, item 1): the Configuration table
stays in its column, beside the Garbage collection and Largest values tables, and no table leaves its column;
long values (class paths, object storage URLs) wrap at dots and slashes, not every few characters."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from statestore_admin.access.actors import Actor
from statestore_admin.gc import GcPlan, run_gc
from statestore_admin.stats.snapshots import take_snapshot
from tests.conftest import BOTH_DATABASES
from tests.objects_helpers import file_storage

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]

# Every rendered line of a value ends at a dot, a slash, or where the value ends (or at a blank, a dash, an
# underscore, a colon or a plus sign: the separators of the wrap_at_separators filter).
BREAKS = """
(code) => {
  const text = code.textContent, node = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
  const chars = [];
  for (let t = node.nextNode(); t; t = node.nextNode()) {
    for (let i = 0; i < t.length; i++) {
      const r = document.createRange(); r.setStart(t, i); r.setEnd(t, i + 1);
      const box = r.getBoundingClientRect();
      if (box.width || box.height) chars.push({c: t.data[i], top: Math.round(box.top)});
    }
  }
  const bad = [];
  for (let i = 1; i < chars.length; i++) {
    if (chars[i].top > chars[i - 1].top && !"./ -_:+".includes(chars[i - 1].c)) bad.push(text);
  }
  return bad;
}
"""


@pytest.fixture
def deployment(dag_run_factory, task_key_factory, tmp_path, monkeypatch):
    """A worker-side backend (common.io's object storage, at a deep path) and a GC history, as on the demo."""
    deep = tmp_path / "var" / "lib" / "statestore-admin" / "worker-side-objects" / "production-eu-west-1"
    file_storage(deep, monkeypatch)
    now = timezone.now()
    run = dag_run_factory(dag_id="etl_orders_with_a_rather_long_dag_id_for_the_tables")
    for i in range(6):
        task_key_factory(
            run, task_id="extract", key=f"cursor_{i}", value="x" * 2000 * i, expires_at=now - timedelta(hours=1)
        )
    run_gc(GcPlan(cutoff=now - timedelta(days=1)), actor=Actor.command())
    take_snapshot(actor=Actor.command())


def test_no_table_leaves_its_column_and_values_wrap_at_dots_and_slashes(signed_in, live_server, deployment, screenshot):
    page = signed_in
    found = []
    page.on("console", lambda msg: msg.type == "error" and found.append(msg.text))
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{live_server.url}/")
    expect(page.locator("table.config")).to_be_visible()
    expect(
        page.locator("table.largest, [data-testid=largest-values], .columns section:nth-child(2) table").first
    ).to_be_visible()
    screenshot("overview-layout-1440")
    sections = page.locator(".columns > section")
    assert sections.count() == 2
    left, right = (sections.nth(i).bounding_box() for i in range(2))
    assert left["x"] + left["width"] <= right["x"], "the two columns overlap"
    for i in range(2):
        box = sections.nth(i).bounding_box()
        for table in sections.nth(i).locator("table").all():
            t = table.bounding_box()
            assert t["x"] >= box["x"] - 0.5 and t["x"] + t["width"] <= box["x"] + box["width"] + 0.5, (
                f"a table of column {i + 1} leaves it: {t} in {box}"
            )
    codes = page.locator("table.config td:nth-child(2) code")
    texts = codes.all_text_contents()
    assert any("common.io" in t or "ObjectStorage" in t for t in texts), texts
    bad = [b for code in codes.all() for b in code.evaluate(BREAKS)]
    assert bad == [], f"values broken inside a word: {bad}"
    assert found == []
