"""The Insights page (``/insights/``): the statistics snapshots and the GC runs as pictures.

The charts are SVG drawn by the templates (``templates/insights/``) from the geometry computed here: no
script, no inline style (the Content-Security-Policy forbids both), colours from CSS classes of
``static/css/insights.css`` so that they follow the light or dark theme. Each chart has its numbers as a
table for screen readers and anyone who would rather read. The figures come from ``stats.insights``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from statestore_admin.access import policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.permissions import ASSET, TASK
from statestore_admin.access.scopes import scope_of
from statestore_admin.core import formatting, status
from statestore_admin.core.errors import Conflict, Invalid
from statestore_admin.dashboard.timezones import localtime
from statestore_admin.stats import history, insights

# Geometry of the charts (SVG user units; the SVG scales to its box) ------------------------------
WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 12, 30
BAR_ROW, BAR_LABEL = 24, 240  # horizontal bars: row height, label column
SERIES = 6  # colour classes .s0 … .s5


compact = formatting.short_count
size = formatting.size
duration = formatting.duration


def _nice_max(value: float) -> float:
    """The smallest 1, 2, 4, 6 or 8 × 10^n at or above ``value``: a round top whose quarters are round too."""
    if value <= 0:
        return 1
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 4, 6, 8, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


# A time axis's labels, from the coarsest to the finest, in the app's style ("30 Nov", "30 Nov, 16:43"): the
# first that tells every tick apart, so that a range of minutes does not read as one repeated minute.
TIME_LABELS = (
    lambda t: f"{t.day} {t:%b}",
    lambda t: f"{t.day} {t:%b}, {t:%H:%M}",
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


@dataclass
class Tick:
    at: float
    label: str


@dataclass
class Line:
    name: str
    css: str
    points: str  # SVG polyline points
    dots: list[tuple[float, float, str]]  # x, y, title


@dataclass
class LineChart:
    id: str
    title: str
    description: str
    lines: list[Line]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    headers: list[str]  # the table: first column time, then one per line
    rows: list[list[str]]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom_y: int = HEIGHT - BOTTOM
    right_x: int = WIDTH - RIGHT

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
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    first, last = (times[0], times[-1]) if times else (None, None)
    span = (last - first).total_seconds() if times else 0

    def x(t: datetime) -> float:
        if span <= 0:
            return LEFT + plot_w / 2
        return round(LEFT + (t - first).total_seconds() / span * plot_w, 1)

    def y(v: float) -> float:
        return round(TOP + plot_h - v / top * plot_h, 1)

    lines = []
    for index, (name, vs) in enumerate(named):
        coords = [
            (x(t), y(v), f"{name}: {fmt(v)} at {t:%Y-%m-%d %H:%M}")
            for t, v in zip(times, vs, strict=True)
            if v is not None
        ]
        dots = coords if len(coords) <= 40 else []
        lines.append(Line(name, f"s{index % SERIES}", " ".join(f"{a},{b}" for a, b, _ in coords), dots))
    y_ticks = [Tick(y(top * i / 4), label) for i, label in enumerate(y_labels)]
    x_ticks = []
    if times:
        count = 1 if span <= 0 else 5
        at = [first + (last - first) * (i / (count - 1) if count > 1 else 0) for i in range(count)]
        x_ticks = [Tick(x(t), label) for t, label in zip(at, time_labels(at), strict=True)]
    rows = [[f"{t:%Y-%m-%d %H:%M}", *(fmt(vs[i]) for _, vs in named)] for i, t in enumerate(times)]
    description = f"{title}: " + "; ".join(
        f"{name} from {fmt(next((v for v in vs if v is not None), None))} to {fmt(vs[-1])}" for name, vs in named
    )
    return LineChart(chart_id, title, description, lines, y_ticks, x_ticks, ["Time", *(n for n, _ in named)], rows)


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
class BarChart:
    id: str
    title: str
    description: str
    bars: list[Bar]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    headers: list[str]
    rows: list[list[str]]
    legend: list[tuple[str, str]] = field(default_factory=list)  # (css, name)
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom_y: int = HEIGHT - BOTTOM
    right_x: int = WIDTH - RIGHT

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
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(len(items), 1)
    gap = min(4, slot * 0.2)
    bars, x_ticks = [], []
    for i, (label, value, css) in enumerate(items):
        h = round(value / top * plot_h, 1)
        bar_x = round(LEFT + i * slot + gap / 2, 1)
        bars.append(Bar(bar_x, round(TOP + plot_h - h, 1), round(max(slot - gap, 1), 1), h, label, fmt(value), css))
        if i % every == 0:
            x_ticks.append(Tick(round(LEFT + i * slot + slot / 2, 1), label))
    y_ticks = [Tick(round(TOP + plot_h - plot_h * i / 4, 1), label) for i, label in enumerate(y_labels)]
    rows = rows if rows is not None else [[label, fmt(value)] for label, value, _ in items]
    biggest = max(items, key=lambda item: item[1], default=None)
    description = f"{title}: {len(items)} bars" + (
        f", the highest {biggest[0]} with {fmt(biggest[1])}" if biggest else ""
    )
    return BarChart(chart_id, title, description, bars, y_ticks, x_ticks, headers, rows, list(legend))


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
    description = f"{title}: " + ", ".join(f"{name} {fmt(value)}" for name, value, _ in items[:3])
    if len(items) > 3:
        description += f" and {len(items) - 3} more"
    return HBarChart(chart_id, title, description, bars, headers, rows, height=max(len(bars), 1) * BAR_ROW)


# The page ------------------------------------------------------------------------------------------
OUTCOME_CSS = {"completed": "ok", "partial": "warn", "locked": "warn", "running": "warn", "skipped": "muted"}


def _url(name: str, arg) -> str:
    """A link to the DAG's or asset's page; none for an id no URL can carry (a dag_id with a '/')."""
    if arg in (None, ""):
        return ""
    try:
        return reverse(name, args=[arg])
    except NoReverseMatch:
        return ""


def _day_label(day: str) -> str:
    """A UTC day of the expiry histogram ("2026-12-03") as the app writes dates: "3 Dec"."""
    parsed = date.fromisoformat(day)
    return f"{parsed.day} {parsed:%b}"


def _bucket_label(up_to: int | None, previous: int | None) -> str:
    if up_to is None:
        return f"> {size(previous)}" if previous is not None else "any"
    return f"≤ {size(up_to)}"


def charts(data: insights.Insights) -> dict:
    """The page's charts from the figures (each None or empty when hidden or without data)."""
    out: dict = {}
    points = data.series.points
    times = [localtime(p.taken_at) for p in points]  # labels in the user's time zone
    if data.access.task:
        out["task_keys"] = line_chart("task-keys", "Task keys", times, [("task keys", [p.task_keys for p in points])])
        out["task_bytes"] = line_chart(
            "task-bytes", "Task state bytes", times, [("task bytes", [p.task_bytes for p in points])], fmt=size
        )
        dags = data.series.dags
        out["dag_keys"] = line_chart("dag-keys", "Top DAGs: keys", times, [(d.dag_id, d.keys) for d in dags])
        out["dag_bytes"] = line_chart(
            "dag-bytes", "Top DAGs: bytes", times, [(d.dag_id, d.bytes) for d in dags], fmt=size
        )
    if data.access.asset_wide:
        out["asset_keys"] = line_chart(
            "asset-keys", "Asset keys", times, [("asset keys", [p.asset_keys for p in points])]
        )
        out["asset_bytes"] = line_chart(
            "asset-bytes", "Asset state bytes", times, [("asset bytes", [p.asset_bytes for p in points])], fmt=size
        )
    if data.expiry is not None:
        if data.expiry.days is not None:
            out["expiry"] = bar_chart(
                "expiry",
                "Task keys expiring on each of the next 30 days",
                [(_day_label(d.day), d.keys, "s1") for d in data.expiry.days],
                ["Day (UTC)", "Keys", "Bytes"],
                every=5,
                rows=[[d.day, compact(d.keys), size(d.bytes)] for d in data.expiry.days],
            )
        labels = {
            status.EXPIRED: status.STATUSES[status.EXPIRED],
            status.EXPIRING: status.STATUSES[status.EXPIRING],
            "later": "expiring later",
            "never": "never expire",
        }
        out["status"] = hbar_chart(
            "status",
            "Task keys by expiry",
            [(labels[k], v, "") for k, v in data.expiry.by_status.items()],
            ["Expiry", "Keys"],
        )
    for store in (TASK, ASSET):
        buckets = [b for b in data.sizes if b.store == store]
        if buckets:
            items, previous = [], None
            for b in buckets:
                items.append((_bucket_label(b.up_to, previous), b.keys, "s2" if store == TASK else "s3"))
                previous = b.up_to
            out[f"sizes_{store}"] = bar_chart(
                f"sizes-{store}", f"{store.capitalize()} values by size", items, ["Size", "Keys"]
            )
    if data.top is not None:
        t = data.top
        for name, rows, by, fmt in (
            ("dags_by_keys", t.dags_by_keys, "keys", compact),
            ("dags_by_bytes", t.dags_by_bytes, "bytes", size),
        ):
            out[name] = hbar_chart(
                name.replace("_", "-"),
                f"DAGs by {by}",
                [(r["dag_id"], r[by], _url("dag-runs", r["dag_id"])) for r in rows],
                ["DAG", "Keys", "Bytes"],
                fmt=fmt,
                rows=[[r["dag_id"], compact(r["keys"]), size(r["bytes"])] for r in rows],
            )
        for name, rows, by, fmt in (
            ("tasks_by_keys", t.tasks_by_keys, "keys", compact),
            ("tasks_by_bytes", t.tasks_by_bytes, "bytes", size),
        ):
            out[name] = hbar_chart(
                name.replace("_", "-"),
                f"Tasks by {by}",
                [(f"{r['dag_id']} › {r['task_id']}", r[by], "") for r in rows],
                ["Task", "Keys", "Bytes"],
                fmt=fmt,
                rows=[[f"{r['dag_id']} › {r['task_id']}", compact(r["keys"]), size(r["bytes"])] for r in rows],
            )
        for name, rows, by, fmt in (
            ("assets_by_keys", t.assets_by_keys, "keys", compact),
            ("assets_by_bytes", t.assets_by_bytes, "bytes", size),
        ):
            out[name] = hbar_chart(
                name.replace("_", "-"),
                f"Assets by {by}",
                [
                    (r["name"] or r["uri"] or str(r["asset_id"]), r[by], _url("asset-detail", r.get("asset_id")))
                    for r in rows
                ],
                ["Asset", "Keys", "Bytes"],
                fmt=fmt,
                rows=[
                    [r["name"] or r["uri"] or str(r["asset_id"]), compact(r["keys"]), size(r["bytes"])] for r in rows
                ],
            )
    if data.gc_runs:
        runs = data.gc_runs
        legend = sorted({(OUTCOME_CSS.get(r.outcome, "bad"), r.get_outcome_display()) for r in runs})
        table = [
            [
                f"{localtime(r.started_at):%Y-%m-%d %H:%M}",
                r.get_outcome_display(),
                compact(r.rows_deleted),
                duration(r.duration_seconds),
                str(r.batches),
            ]
            for r in runs
        ]
        headers = ["Started", "Outcome", "Rows deleted", "Duration", "Batches"]
        every = max(1, len(runs) // 6)
        started = time_labels([localtime(r.started_at) for r in runs])
        out["gc_rows"] = bar_chart(
            "gc-rows",
            "Rows deleted per GC run",
            [
                (label, r.rows_deleted, OUTCOME_CSS.get(r.outcome, "bad"))
                for label, r in zip(started, runs, strict=True)
            ],
            headers,
            every=every,
            legend=legend,
            rows=table,
        )
        out["gc_duration"] = bar_chart(
            "gc-duration",
            "GC run duration",
            [
                (label, r.duration_seconds or 0, OUTCOME_CSS.get(r.outcome, "bad"))
                for label, r in zip(started, runs, strict=True)
            ],
            headers,
            fmt=duration,
            every=every,
            legend=legend,
            rows=table,
        )
    return out


def cards(figures: insights.Latest) -> list[tuple[str, str, str]]:
    """(figure, label, test id) of the totals the user may see."""
    shown = []
    for name, label, fmt in (
        ("task_keys", "task keys", "{:,}".format),
        ("task_bytes", "task state", size),
        ("expired", "expired, awaiting GC", "{:,}".format),
        ("expiring", "expiring in 24 h", "{:,}".format),
        ("never", "never expire", "{:,}".format),
        ("asset_keys", "asset keys", "{:,}".format),
        ("asset_bytes", "asset state", size),
    ):
        value = getattr(figures, name)
        if value is not None:
            shown.append((fmt(value), label, "insights-" + name.replace("_", "-")))
    return shown


def insights_page(request):
    """The Insights page; ``?days=7|30|90`` (an unknown value shows the default range, with a message)."""
    now = timezone.now()
    stores = tuple(policies.viewable_stores(request.user))
    scope = scope_of(request.user)
    error = None
    try:
        days = insights.parse_days(request.GET.get("days"))
    except Invalid as exc:
        days, error = insights.DEFAULT_DAYS, " ".join(exc.messages)
    data = insights.insights(days, now, scope=scope, stores=stores) if stores else None
    context = {
        "data": data,
        "days": days,
        "choices": insights.DAYS,
        "error": error,
        "now": now,
        "may_snapshot": policies.may_take_snapshot(request.user),
    }
    if data is not None:
        context["charts"] = charts(data)
        if data.latest is not None:
            context["age"] = formatting.age(data.latest.age_seconds(now))
            context["took"] = duration(data.latest.snapshot.duration_seconds)
            context["cards"] = cards(data.latest)
    return render(request, "insights/index.html", context)


@require_POST
def take_snapshot(request):
    """ "Take a snapshot now" (the Admin role, no scope; CSRF as every form): the pass of ``state_store_stats``,
    then back to the page, which draws it."""
    try:
        snapshot = history.take_snapshot_for(actor=Actor.from_request(request))
    except Conflict as exc:
        messages.warning(request, str(exc))
    else:
        messages.success(
            request,
            f"Statistics snapshot #{snapshot.pk} taken in {duration(snapshot.duration_seconds)}: "
            f"{formatting.plural(snapshot.task_keys, 'task key')}, "
            f"{formatting.plural(snapshot.asset_keys, 'asset key')}.",
        )
    return redirect("insights")
