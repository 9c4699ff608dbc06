"""A key's story across runs (``/keys/task/<id>/story/``) and two runs of a DAG compared (``/dags/<dag>/compare/``).

Both read through ``state.selectors`` (``key_story``, ``compare_runs``: bounded pages, see their modules); the
lines are drawn by ``charts.story_chart`` and the diffs by ``diffs.short_diff``.
"""

from __future__ import annotations

from django.utils import timezone

from statestore_admin.access import permissions
from statestore_admin.access.scopes import scope_of
from statestore_admin.core.errors import Invalid
from statestore_admin.dashboard.charts import story_chart
from statestore_admin.dashboard.diffs import short_diff
from statestore_admin.dashboard.http.pages import invalid_page, render_page, requires_view
from statestore_admin.state import selectors

MAX_DIFF_LINES = 80  # of one value's diff on these pages; the key page and the audit show the rest


@requires_view(permissions.TASK)
def key_story(request, key_id):
    """The key of ``key_id`` in every run of its DAG, newest first, a page at a time (``cursor``)."""
    scope = scope_of(request.user)
    origin = selectors.get_task_key(key_id, scope=scope)
    story = selectors.key_story(origin, request.GET.get("cursor"), scope=scope)
    for entry in story.entries:
        changed = entry.has_previous and entry.value is not None and entry.previous is not None
        entry.diff = short_diff(entry.previous, entry.value, MAX_DIFF_LINES) if changed else None
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
        entry.diff = short_diff(entry.a.full, entry.b.full, MAX_DIFF_LINES) if both else None
    context = {"dag_id": dag_id, "cmp": comparison, "now": timezone.now()}
    return render_page(request, "compare/page.html", context, "compare/_panel.html")
