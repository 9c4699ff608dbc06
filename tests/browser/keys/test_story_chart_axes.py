"""The key story's charts read as their data (issue 42, item 9): a flat metric (auc = 0.9 in every run) is drawn on
an axis that starts at zero with no negative tick, a metric that cannot be negative gets none either, and at 390 px
no date label of the x axis is cut off at the chart's edge; at 1280 px and 390 px, in the light and the dark theme."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.conftest import BOTH_DATABASES

pytestmark = [
    pytest.mark.django_db(databases=BOTH_DATABASES, transaction=True),
    pytest.mark.usefixtures("committed_airflow_tables"),
]
RUNS = 8
LAYOUTS = [(scheme, size) for scheme in ("light", "dark") for size in ((1280, 860), (390, 844))]

# Each drawn label's box against its svg's box (in the page's pixels, after the viewBox's scaling).
CUT = """
(figure) => {
  const svg = figure.querySelector('svg').getBoundingClientRect(), cut = [];
  for (const text of figure.querySelectorAll('text')) {
    const box = text.getBoundingClientRect();
    const out = box.left < svg.left - 0.5 || box.right > svg.right + 0.5;
    if (out) cut.push(`${text.textContent} ${box.left}-${box.right}`);
  }
  return cut;
}
"""


@pytest.fixture
def deployment(dag_run_factory, task_instance_factory, task_key_factory):
    """Eight daily runs of train: ``metrics`` holds a flat auc and a falling, non-negative f1."""
    now = timezone.now().replace(microsecond=0)
    keys = []
    for day in range(RUNS):
        at = now - timedelta(days=RUNS - day)
        run = dag_run_factory(dag_id="train", run_id=f"scheduled__{at:%Y-%m-%dT00:00:00}", state="success")
        run.logical_date = run.run_after = at
        run.save(update_fields=["logical_date", "run_after"])
        task_instance_factory(run, task_id="evaluate")
        value = {"auc": 0.9, "f1": round(0.8 - day * 0.05, 2)}
        keys.append(task_key_factory(run, task_id="evaluate", key="metrics", value=value, updated_at=at))
    return keys


def y_labels(page, chart: str) -> list[float]:
    texts = page.locator(f"#chart-{chart} text.y").all_text_contents()
    return [float(t.replace(",", "").replace("\u2212", "-")) for t in texts]


def test_axes_follow_the_data_and_no_label_is_cut(signed_in, live_server, deployment, screenshot):
    page = signed_in
    page.goto(f"{live_server.url}/keys/task/{deployment[-1].pk}/story/")
    charts = {page.locator(f"#chart-story-{i} figcaption").text_content(): f"story-{i}" for i in range(2)}
    assert set(charts) == {"auc", "f1"}
    for name in ("auc", "f1"):
        labels = y_labels(page, charts[name])
        assert labels, name
        assert min(labels) == 0, f"{name}: a non-negative metric's axis starts at zero, not {min(labels)}"
        assert max(labels) <= 1.5, f"{name}: the axis runs far beyond the data: {labels}"
    for scheme, (width, height) in LAYOUTS:
        page.emulate_media(color_scheme=scheme)
        page.set_viewport_size({"width": width, "height": height})
        for chart in charts.values():
            figure = page.locator(f"#chart-{chart}")
            expect(figure.locator("text.x").last).to_be_visible()
            assert figure.evaluate(CUT) == [], f"labels cut at {width} px ({scheme})"
        screenshot(f"story-axes-{width}-{scheme}")
