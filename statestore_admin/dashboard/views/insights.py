"""The Insights page (``/insights/``): the statistics snapshots and the GC runs as pictures.

The figures come from ``stats.insights``; this module says which charts the page shows, drawn from the
geometry of ``dashboard.charts``.
"""

from __future__ import annotations

from datetime import date

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils import dateformat, timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_POST

from statestore_admin.access import policies
from statestore_admin.access.actors import Actor
from statestore_admin.access.permissions import ASSET, TASK
from statestore_admin.access.scopes import scope_of
from statestore_admin.core import formatting, status
from statestore_admin.core.errors import Conflict, Invalid
from statestore_admin.dashboard.charts import bar_chart, compact, duration, hbar_chart, line_chart, size, time_labels
from statestore_admin.dashboard.timezones import localtime
from statestore_admin.stats import history, insights

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
    return dateformat.format(date.fromisoformat(day), "j M")  # the month's name in the reader's language


def _bucket_label(up_to: int | None, previous: int | None) -> str:
    if up_to is None:
        return f"> {size(previous)}" if previous is not None else _("any")
    return f"≤ {size(up_to)}"


# The top lists' charts: (list, the table's header, the titles by keys and by bytes, a row's name, a row's link).
TOP_LISTS = (
    (
        "dags",
        gettext_lazy("DAG"),
        {"keys": gettext_lazy("DAGs by keys"), "bytes": gettext_lazy("DAGs by bytes")},
        lambda r: r["dag_id"],
        lambda r: _url("dag-runs", r["dag_id"]),
    ),
    (
        "tasks",
        gettext_lazy("Task"),
        {"keys": gettext_lazy("Tasks by keys"), "bytes": gettext_lazy("Tasks by bytes")},
        lambda r: f"{r['dag_id']} › {r['task_id']}",
        lambda r: "",
    ),
    (
        "assets",
        gettext_lazy("Asset"),
        {"keys": gettext_lazy("Assets by keys"), "bytes": gettext_lazy("Assets by bytes")},
        lambda r: r["name"] or r["uri"] or str(r["asset_id"]),
        lambda r: _url("asset-detail", r.get("asset_id")),
    ),
)
SIZES_TITLES = {TASK: gettext_lazy("Task values by size"), ASSET: gettext_lazy("Asset values by size")}


def charts(data: insights.Insights) -> dict:
    """The page's charts from the figures (each None or empty when hidden or without data)."""
    out: dict = {}
    points = data.series.points
    times = [localtime(p.taken_at) for p in points]  # labels in the user's time zone
    if data.access.task:
        out["task_keys"] = _total("task_keys", _("Task keys"), _("task keys"), times, points)
        out["task_bytes"] = _total("task_bytes", _("Task state bytes"), _("task bytes"), times, points, fmt=size)
        dags = data.series.dags
        out["dag_keys"] = line_chart("dag-keys", _("Top DAGs: keys"), times, [(d.dag_id, d.keys) for d in dags])
        out["dag_bytes"] = line_chart(
            "dag-bytes", _("Top DAGs: bytes"), times, [(d.dag_id, d.bytes) for d in dags], fmt=size
        )
    if data.access.asset_wide:
        out["asset_keys"] = _total("asset_keys", _("Asset keys"), _("asset keys"), times, points)
        out["asset_bytes"] = _total("asset_bytes", _("Asset state bytes"), _("asset bytes"), times, points, fmt=size)
    if data.expiry is not None:
        out.update(_expiry_charts(data.expiry))
    for store in (TASK, ASSET):
        buckets = [b for b in data.sizes if b.store == store]
        if buckets:
            items, previous = [], None
            for b in buckets:
                items.append((_bucket_label(b.up_to, previous), b.keys, "s2" if store == TASK else "s3"))
                previous = b.up_to
            out[f"sizes_{store}"] = bar_chart(f"sizes-{store}", str(SIZES_TITLES[store]), items, [_("Size"), _("Keys")])
    if data.top is not None:
        out.update(_top_charts(data.top))
    if data.gc_runs:
        out.update(_gc_charts(data.gc_runs))
    return out


def _total(name: str, title: str, line_name: str, times, points, fmt=compact):
    """A figure of the snapshots over time: ``name`` is the snapshots' field and the chart's id."""
    line = (line_name, [getattr(p, name) for p in points])
    return line_chart(name.replace("_", "-"), title, times, [line], fmt=fmt)


def _expiry_charts(expiry) -> dict:
    out = {}
    if expiry.days is not None:
        out["expiry"] = bar_chart(
            "expiry",
            _("Task keys expiring on each of the next 30 days"),
            [(_day_label(d.day), d.keys, "s1") for d in expiry.days],
            [_("Day (UTC)"), _("Keys"), _("Bytes")],
            every=5,
            rows=[[d.day, compact(d.keys), size(d.bytes)] for d in expiry.days],
        )
    labels = {
        status.EXPIRED: status.STATUSES[status.EXPIRED],
        status.EXPIRING: status.STATUSES[status.EXPIRING],
        "later": _("expiring later"),
        "never": _("never expire"),
    }
    out["status"] = hbar_chart(
        "status",
        _("Task keys by expiry"),
        [(str(labels[k]), v, "") for k, v in expiry.by_status.items()],
        [_("Expiry"), _("Keys")],
    )
    return out


def _top_charts(top) -> dict:
    """The largest DAGs, tasks and assets, by keys and by bytes."""
    out = {}
    for kind, header, titles, name_of, url_of in TOP_LISTS:
        for by, fmt in (("keys", compact), ("bytes", size)):
            name = f"{kind}_by_{by}"
            rows = getattr(top, name)
            out[name] = hbar_chart(
                name.replace("_", "-"),
                str(titles[by]),
                [(name_of(r), r[by], url_of(r)) for r in rows],
                [str(header), _("Keys"), _("Bytes")],
                fmt=fmt,
                rows=[[name_of(r), compact(r["keys"]), size(r["bytes"])] for r in rows],
            )
    return out


def _gc_charts(runs) -> dict:
    """The GC runs' rows deleted and durations, a bar a run coloured by its outcome, with one table."""
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
    headers = [_("Started"), _("Outcome"), _("Rows deleted"), _("Duration"), _("Batches")]
    every = max(1, len(runs) // 6)
    started = time_labels([localtime(r.started_at) for r in runs])
    out = {}
    for name, title, value_of, fmt in (
        ("gc_rows", _("Rows deleted per GC run"), lambda r: r.rows_deleted, compact),
        ("gc_duration", _("GC run duration"), lambda r: r.duration_seconds or 0, duration),
    ):
        items = [
            (label, value_of(r), OUTCOME_CSS.get(r.outcome, "bad")) for label, r in zip(started, runs, strict=True)
        ]
        out[name] = bar_chart(
            name.replace("_", "-"), title, items, headers, fmt=fmt, every=every, legend=legend, rows=table
        )
    return out


def cards(figures: insights.Latest) -> list[tuple[str, str, str]]:
    """(figure, label, test id) of the totals the user may see."""
    shown = []
    for name, label, fmt in (
        ("task_keys", _("task keys"), "{:,}".format),
        ("task_bytes", _("task state"), size),
        ("expired", _("expired, awaiting GC"), "{:,}".format),
        ("expiring", _("expiring in 24 h"), "{:,}".format),
        ("never", _("never expire"), "{:,}".format),
        ("asset_keys", _("asset keys"), "{:,}".format),
        ("asset_bytes", _("asset state"), size),
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
        "may_snapshot": history.offers_snapshot(request.user),
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
        task_keys = ngettext("%(count)s task key", "%(count)s task keys", snapshot.task_keys)
        asset_keys = ngettext("%(count)s asset key", "%(count)s asset keys", snapshot.asset_keys)
        message = _("Statistics snapshot #%(snapshot)s taken in %(duration)s: %(task_keys)s, %(asset_keys)s.") % {
            "snapshot": snapshot.pk,
            "duration": duration(snapshot.duration_seconds),
            "task_keys": task_keys % {"count": f"{snapshot.task_keys:,}"},
            "asset_keys": asset_keys % {"count": f"{snapshot.asset_keys:,}"},
        }
        messages.success(request, message)
    return redirect("insights")
