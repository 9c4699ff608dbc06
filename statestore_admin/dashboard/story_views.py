"""A key's story across runs (``/keys/task/<id>/story/``) and two runs of a DAG compared (``/dags/<dag>/compare/``).

Both read through ``state.selectors`` (``key_story``, ``compare_runs``: bounded pages, see their modules); this
module draws the lines (SVG geometry for ``templates/story/_chart.html``: no script, no inline style, coloured by
``static/css/insights.css``) and the diffs (``audit_views.diff_lines``: plain text lines, escaped by the templates).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.access import permissions
from statestore_admin.access.scopes import scope_of
from statestore_admin.core import formatting
from statestore_admin.core.errors import Invalid
from statestore_admin.dashboard.audit_views import diff_lines
from statestore_admin.dashboard.pages import invalid_page, render_page, requires_view
from statestore_admin.dashboard.timezones import localtime, shown_in_utc
from statestore_admin.state import selectors

MAX_DIFF_LINES = 80  # of one value's diff on these pages; the key page and the audit show the rest
WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 92, 16, 14, 30


@dataclass
class Tick:
    at: float
    label: str


@dataclass
class StoryChart:
    id: str
    title: str
    css: str
    description: str
    points: str
    dots: list[tuple[float, float, str]]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    rows: list[tuple[str, str]]  # the numbers as a table: run, value
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom_y: int = HEIGHT - BOTTOM
    right_x: int = WIDTH - RIGHT


FIRST, LAST = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)


def _label(kind: str, value: float) -> str:
    return _time_label(_instant(value)) if kind == "time" else formatting.number(value)


def _instant(seconds: float) -> datetime:
    """Epoch ``seconds`` as a time. A float has no microseconds at the calendar's ends (9999-12-31 23:59:59.999999
    rounds up to year 10000, which ``fromtimestamp`` refuses): those are the first or the last time there is."""
    offset = seconds - FIRST.timestamp()
    if offset <= 0:
        return FIRST
    if offset >= (LAST - FIRST).total_seconds():
        return LAST
    return FIRST + timedelta(seconds=offset)


def _time_label(value: datetime) -> str:
    """A time on a chart's axis in the reader's zone, or in UTC, saying so, where that zone has no such time."""
    local = localtime(value)
    return formatting.chart_time(local) + (" UTC" if shown_in_utc(local) else "")


def _run_time(run) -> datetime:
    """When a run is for: its logical date (None for runs Airflow 3 triggers without one), else its run_after."""
    return run.logical_date or run.run_after


def story_chart(number: int, series: selectors.Series, runs: list) -> StoryChart:
    """``series`` (one point per run of ``runs``, oldest first) as a line: runs evenly along x, the values'
    range on y."""
    known = [(i, v) for i, v in enumerate(series.points) if v is not None]
    low, high = min(v for _, v in known), max(v for _, v in known)
    if low == high:
        low, high = low - 1, high + 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    last = max(len(runs) - 1, 1)

    def x(i: int) -> float:
        return round(LEFT + i / last * plot_w, 1) if len(runs) > 1 else LEFT + plot_w / 2

    def y(v: float) -> float:
        return round(TOP + plot_h - (v - low) / (high - low) * plot_h, 1)

    dots = [(x(i), y(v), f"{runs[i].run_id}: {_label(series.kind, v)}") for i, v in known]
    y_ticks = [Tick(y(low + (high - low) * q / 2), _label(series.kind, low + (high - low) * q / 2)) for q in range(3)]
    x_ticks = [Tick(x(i), _time_label(_run_time(runs[i]))) for i in {0, len(runs) - 1}]
    labels = {i: _label(series.kind, v) for i, v in known}
    for i, too_large in series.listed.items():  # listed with the numbers, as no line reaches them
        labels[i] = _("%(number)s (too large to chart)") % {"number": formatting.number(too_large)}
    rows = [(runs[i].run_id, labels[i]) for i in sorted(labels)]
    title = "The value" if series.name == "value" else series.name
    description = f"{title} over {formatting.plural(len(known), 'run')}: from {rows[0][1]} to {rows[-1][1]}"
    return StoryChart(
        f"story-{number}",
        title,
        f"s{number % 6}",
        description,
        " ".join(f"{a},{b}" for a, b, _ in dots),
        dots,
        y_ticks,
        sorted(x_ticks, key=lambda t: t.at),
        rows,
    )


def _diff(before: str | None, after: str | None) -> dict:
    lines, hidden = diff_lines(before, after)
    return {
        "lines": lines[:MAX_DIFF_LINES],
        "hidden": hidden + max(0, len(lines) - MAX_DIFF_LINES),
        "added": sum(line.kind == "add" for line in lines),
        "removed": sum(line.kind == "del" for line in lines),
    }


@requires_view(permissions.TASK)
def key_story(request, key_id):
    """The key of ``key_id`` in every run of its DAG, newest first, a page at a time (``cursor``)."""
    scope = scope_of(request.user)
    origin = selectors.get_task_key(key_id, scope=scope)
    story = selectors.key_story(origin, request.GET.get("cursor"), scope=scope)
    for entry in story.entries:
        changed = entry.has_previous and entry.value is not None and entry.previous is not None
        entry.diff = _diff(entry.previous, entry.value) if changed else None
    runs = [entry.run for entry in story.oldest_first]
    context = {
        "origin": origin,
        "story": story,
        "charts": [story_chart(n, series, runs) for n, series in enumerate(story.series)],
        "coordinate": selectors.key_coordinate(origin),
        "now": timezone.now(),
    }
    return render_page(request, "story/page.html", context, "story/_panel.html")


@requires_view(permissions.TASK)
def run_compare(request, dag_id):
    """Runs ``a`` and ``b`` (run ids) of ``dag_id`` key by key, a page at a time (``cursor``)."""
    try:
        a, b = selectors.runs_to_compare(
            dag_id, request.GET.get("a", ""), request.GET.get("b", ""), scope=scope_of(request.user)
        )
        comparison = selectors.compare_runs(a, b, request.GET.get("cursor"))
    except Invalid as exc:
        return invalid_page(request, exc)
    for entry in comparison.changed:
        both = entry.a.full is not None and entry.b.full is not None
        entry.diff = _diff(entry.a.full, entry.b.full) if both else None
    context = {"dag_id": dag_id, "cmp": comparison, "now": timezone.now()}
    return render_page(request, "compare/page.html", context, "compare/_panel.html")
