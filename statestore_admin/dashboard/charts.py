"""The geometry of the pages' charts: the Insights page's lines and bars (``views.insights``) and a key's story
(``views.story``).

The charts are SVG drawn by the templates (``templates/insights/``, ``templates/story/_chart.html``) from the
geometry computed here: no script, no inline style (the Content-Security-Policy forbids both), colours from CSS
classes of ``static/css/insights.css`` so that they follow the light or dark theme. Each chart has its numbers
as a table for screen readers and anyone who would rather read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from statestore_admin.core import formatting
from statestore_admin.dashboard.timezones import localtime, shown_in_utc
from statestore_admin.state import selectors

# Geometry of the charts (SVG user units; the SVG scales to its box) ------------------------------
WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 12, 30
BAR_ROW, BAR_LABEL = 24, 240  # horizontal bars: row height, label column
SERIES = 6  # colour classes .s0 … .s5
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
# A key's story: lower, with room on the left for a value's label.
STORY_WIDTH, STORY_HEIGHT = 640, 200
STORY_LEFT, STORY_RIGHT, STORY_TOP, STORY_BOTTOM = 92, 16, 14, 30


compact = formatting.short_count
size = formatting.size
duration = formatting.duration


@dataclass
class Tick:
    at: float
    label: str


@dataclass(kw_only=True)
class Frame:
    """Where a chart's axes stand in its SVG, as the templates draw them."""

    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom_y: int = HEIGHT - BOTTOM
    right_x: int = WIDTH - RIGHT


def _nice_max(value: float) -> float:
    """The smallest 1, 2, 4, 6 or 8 × 10^n at or above ``value``: a round top whose quarters are round too."""
    if value <= 0:
        return 1
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 4, 6, 8, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


# A time axis's labels, from the coarsest to the finest, in the reader's language (statestore_admin/formats: "30 Nov",
# "30 Nov 16:43"): the first that tells every tick apart, so that a range of minutes does not read as one minute.
TIME_LABELS = (
    lambda t: date_format(t, "MONTH_DAY_FORMAT"),
    lambda t: date_format(t, "SHORT_DATETIME_FORMAT"),
    lambda t: f"{t:%H:%M:%S}",
)


def time_labels(times: list[datetime]) -> list[str]:
    """Labels for ``times`` (in the user's zone): the coarsest format that gives each a label of its own,
    dates alone for a range of days, the time for a range of hours, seconds for a range of seconds; a
    label equal to its left neighbour's is left blank."""
    for fmt in TIME_LABELS:
        labels = [fmt(t) for t in times]
        if len(set(labels)) == len(labels):
            return labels
    shown = [TIME_LABELS[-1](t) for t in times]
    return [label if i == 0 or label != shown[i - 1] else "" for i, label in enumerate(shown)]


def _axis(largest: float, fmt) -> tuple[float, list[str]]:
    """A y axis from 0: its top and the labels of its five ticks. Counts: a round top (at least 4, so that
    the quarters are whole); sizes: a round top in the unit of the largest value, every label in that unit
    (not "1,000 B" beside "1.5 KiB")."""
    if fmt is size:
        unit = formatting.size_unit(largest)
        top = _nice_max(largest / unit) * unit
        return top, [formatting.size_in(top * i / 4, unit) for i in range(5)]
    top = _nice_max(largest)
    if fmt is compact:
        top = max(top, 4)
    return top, [fmt(top * i / 4) for i in range(5)]


def _points(dots: list[tuple[float, float, str]]) -> str:
    """An SVG polyline's points through ``dots`` (x, y, title)."""
    return " ".join(f"{a},{b}" for a, b, _title in dots)


# Lines over time ----------------------------------------------------------------------------------
@dataclass
class Line:
    name: str
    css: str
    points: str  # SVG polyline points
    dots: list[tuple[float, float, str]]  # x, y, title


@dataclass
class LineChart(Frame):
    id: str
    title: str
    description: str
    lines: list[Line]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    headers: list[str]  # the table: first column time, then one per line
    rows: list[list[str]]

    @property
    def empty(self) -> bool:
        return not self.rows


def line_chart(
    chart_id: str, title: str, times: list[datetime], named: list[tuple[str, list[int | None]]], fmt=compact
) -> LineChart:
    """Lines over time on one axis from 0. ``named``: (name, one value per time; None: hidden)."""
    named = [(name, values) for name, values in named if any(v is not None for v in values)]
    values = [v for _, vs in named for v in vs if v is not None]
    top, y_labels = _axis(max(values, default=0), fmt)
    first, last = (times[0], times[-1]) if times else (None, None)
    span = (last - first).total_seconds() if times else 0

    def x(t: datetime) -> float:
        if span <= 0:
            return LEFT + PLOT_W / 2
        return round(LEFT + (t - first).total_seconds() / span * PLOT_W, 1)

    def y(v: float) -> float:
        return round(TOP + PLOT_H - v / top * PLOT_H, 1)

    lines = []
    for index, (name, vs) in enumerate(named):
        coords = [
            (
                x(t),
                y(v),
                _("%(name)s: %(value)s at %(time)s") % {"name": name, "value": fmt(v), "time": f"{t:%Y-%m-%d %H:%M}"},
            )
            for t, v in zip(times, vs, strict=True)
            if v is not None
        ]
        dots = coords if len(coords) <= 40 else []
        lines.append(Line(name, f"s{index % SERIES}", _points(coords), dots))
    y_ticks = [Tick(y(top * i / 4), label) for i, label in enumerate(y_labels)]
    x_ticks = []
    if times:
        count = 1 if span <= 0 else 5
        at = [first + (last - first) * (i / (count - 1) if count > 1 else 0) for i in range(count)]
        x_ticks = [Tick(x(t), label) for t, label in zip(at, time_labels(at), strict=True)]
    rows = [[f"{t:%Y-%m-%d %H:%M}", *(fmt(vs[i]) for _, vs in named)] for i, t in enumerate(times)]
    ranges = "; ".join(
        _("%(name)s from %(first)s to %(last)s")
        % {"name": name, "first": fmt(next((v for v in vs if v is not None), None)), "last": fmt(vs[-1])}
        for name, vs in named
    )
    description = _("%(title)s: %(lines)s") % {"title": title, "lines": ranges}
    headers = [_("Time"), *(n for n, _values in named)]
    return LineChart(chart_id, title, description, lines, y_ticks, x_ticks, headers, rows)


# Vertical bars ------------------------------------------------------------------------------------
@dataclass
class Bar:
    x: float
    y: float
    w: float
    h: float
    label: str
    value: str
    css: str = "s0"


@dataclass
class BarChart(Frame):
    id: str
    title: str
    description: str
    bars: list[Bar]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    headers: list[str]
    rows: list[list[str]]
    legend: list[tuple[str, str]] = field(default_factory=list)  # (css, name)

    @property
    def empty(self) -> bool:
        return not self.bars


def bar_chart(
    chart_id: str,
    title: str,
    items: list[tuple[str, float, str]],
    headers: list[str],
    fmt=compact,
    every: int = 1,
    legend=(),
    rows: list[list[str]] | None = None,
) -> BarChart:
    """Vertical bars from 0. ``items``: (label, value, css class); a label under every ``every``-th bar."""
    top, y_labels = _axis(max((v for _, v, _ in items), default=0), fmt)
    slot = PLOT_W / max(len(items), 1)
    gap = min(4, slot * 0.2)
    bars, x_ticks = [], []
    for i, (label, value, css) in enumerate(items):
        h = round(value / top * PLOT_H, 1)
        bar_x = round(LEFT + i * slot + gap / 2, 1)
        bars.append(Bar(bar_x, round(TOP + PLOT_H - h, 1), round(max(slot - gap, 1), 1), h, label, fmt(value), css))
        if i % every == 0:
            x_ticks.append(Tick(round(LEFT + i * slot + slot / 2, 1), label))
    y_ticks = [Tick(round(TOP + PLOT_H - PLOT_H * i / 4, 1), label) for i, label in enumerate(y_labels)]
    rows = rows if rows is not None else [[label, fmt(value)] for label, value, _ in items]
    biggest = max(items, key=lambda item: item[1], default=None)
    names = {"title": title, "count": len(items)}
    if biggest:
        names.update(label=biggest[0], value=fmt(biggest[1]))
        description = ngettext(
            "%(title)s: %(count)s bar, the highest %(label)s with %(value)s",
            "%(title)s: %(count)s bars, the highest %(label)s with %(value)s",
            len(items),
        )
    else:
        description = ngettext("%(title)s: %(count)s bar", "%(title)s: %(count)s bars", len(items))
    description %= names
    return BarChart(chart_id, title, description, bars, y_ticks, x_ticks, headers, rows, list(legend))


# Horizontal bars ----------------------------------------------------------------------------------
@dataclass
class HBar:
    y: float
    w: float
    label: str  # shortened for the chart
    full: str  # the whole name, as a tooltip and in the table
    value: str
    href: str = ""


@dataclass
class HBarChart:
    id: str
    title: str
    description: str
    bars: list[HBar]
    headers: list[str]
    rows: list[list[str]]
    width: int = WIDTH
    height: int = 0
    label_x: int = BAR_LABEL - 8
    bar_x: int = BAR_LABEL
    row: int = BAR_ROW

    @property
    def empty(self) -> bool:
        return not self.bars


def _short(text: str, limit: int = 34) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def hbar_chart(
    chart_id: str, title: str, items: list[tuple[str, float, str]], headers: list[str], fmt=compact, rows=None
) -> HBarChart:
    """Horizontal bars, largest first. ``items``: (name, value, link or "")."""
    top = max((v for _, v, _ in items), default=0) or 1
    room = WIDTH - BAR_LABEL - 70
    bars = [
        HBar(i * BAR_ROW, max(round(value / top * room, 1), 1), _short(name), name, fmt(value), href)
        for i, (name, value, href) in enumerate(items)
    ]
    rows = rows if rows is not None else [[name, fmt(value)] for name, value, _ in items]
    listed = ", ".join(f"{name} {fmt(value)}" for name, value, _ in items[:3])
    names = {"title": title, "items": listed, "more": len(items) - 3}
    if len(items) > 3:
        description = ngettext(
            "%(title)s: %(items)s and %(more)s more", "%(title)s: %(items)s and %(more)s more", names["more"]
        )
    else:
        description = _("%(title)s: %(items)s")
    description %= names
    return HBarChart(chart_id, title, description, bars, headers, rows, height=max(len(bars), 1) * BAR_ROW)


# A key's story: one line over runs ----------------------------------------------------------------
@dataclass
class StoryChart(Frame):
    id: str
    title: str
    css: str
    description: str
    points: str
    dots: list[tuple[float, float, str]]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    rows: list[tuple[str, str]]  # the numbers as a table: run, value


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


def value_range(values: list[float]) -> tuple[float, float]:
    """A story chart's y range for ``values``: from zero to a round top when none is negative (an auc of 0.9 on
    0 to 1, never a negative tick under a metric that cannot be one); otherwise the values with a tenth of their
    span (or of their size, for a flat line) above and below."""
    low, high = min(values), max(values)
    if low >= 0:
        return 0.0, _nice_top(high)
    margin = (high - low or abs(high) or 1) / 10
    return low - margin, high + margin


def _nice_top(value: float) -> float:
    """The smallest 1, 2, 4, 6 or 8 × 10^n at or above ``value`` (fractions too: 0.9 → 1, 0.003 → 0.004)."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    return next(step * magnitude for step in (1, 2, 4, 6, 8, 10) if step * magnitude >= value * (1 - 1e-12))


def story_chart(number: int, series: selectors.Series, runs: list) -> StoryChart:
    """``series`` (one point per run of ``runs``, oldest first) as a line: runs evenly along x, the values'
    range on y."""
    known = [(i, v) for i, v in enumerate(series.points) if v is not None]
    low, high = value_range([v for _, v in known])
    plot_w, plot_h = STORY_WIDTH - STORY_LEFT - STORY_RIGHT, STORY_HEIGHT - STORY_TOP - STORY_BOTTOM
    last = max(len(runs) - 1, 1)

    def x(i: int) -> float:
        return round(STORY_LEFT + i / last * plot_w, 1) if len(runs) > 1 else STORY_LEFT + plot_w / 2

    def y(v: float) -> float:
        return round(STORY_TOP + plot_h - (v - low) / (high - low) * plot_h, 1)

    dots = [(x(i), y(v), f"{runs[i].run_id}: {_label(series.kind, v)}") for i, v in known]
    y_ticks = [Tick(y(low + (high - low) * q / 2), _label(series.kind, low + (high - low) * q / 2)) for q in range(3)]
    x_ticks = [Tick(x(i), _time_label(_run_time(runs[i]))) for i in {0, len(runs) - 1}]
    labels = {i: _label(series.kind, v) for i, v in known}
    for i, too_large in series.listed.items():  # listed with the numbers, as no line reaches them
        labels[i] = _("%(number)s (too large to chart)") % {"number": formatting.number(too_large)}
    rows = [(runs[i].run_id, labels[i]) for i in sorted(labels)]
    title = _("The value") if series.name == "value" else series.name
    description = ngettext(
        "%(title)s over %(count)s run: from %(first)s to %(last)s",
        "%(title)s over %(count)s runs: from %(first)s to %(last)s",
        len(known),
    ) % {"title": title, "count": f"{len(known):,}", "first": rows[0][1], "last": rows[-1][1]}
    return StoryChart(
        f"story-{number}",
        title,
        f"s{number % 6}",
        description,
        _points(dots),
        dots,
        y_ticks,
        sorted(x_ticks, key=lambda t: t.at),
        rows,
        width=STORY_WIDTH,
        height=STORY_HEIGHT,
        left=STORY_LEFT,
        bottom_y=STORY_HEIGHT - STORY_BOTTOM,
        right_x=STORY_WIDTH - STORY_RIGHT,
    )
