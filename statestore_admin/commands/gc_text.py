"""``state_store_clean``'s text: the dry run as the command prints it. The domain (``gc``) returns the
data (``DryRunSummary``, the same object whose ``as_dict`` is ``--dry-run --json`` and the API's answer)."""

from __future__ import annotations

from statestore_admin import gc
from statestore_admin.core import formatting


def dry_run_lines(summary: gc.DryRunSummary) -> list[str]:
    """The dry run as ``state_store_clean --dry-run`` prints it (text)."""
    if summary.message:
        return [summary.message]
    before = formatting.iso(summary.plan.cutoff)
    if summary.rows_more_than is None:
        rows = formatting.plural(summary.rows, "task state row")
        lines = [f"Dry run: {rows} expired before {before} would be deleted."]
    else:
        estimate = "no estimate here"
        if summary.rows_estimated:
            estimate = f"≈ {formatting.short_count(summary.rows)} by the planner's estimate"
            if summary.estimate_basis:
                estimate += f" {summary.estimate_basis}"
        lines = [
            f"Dry run: more than {summary.rows_more_than:,} task state rows expired before {before} would be "
            f"deleted ({estimate}; counted exactly up to {summary.rows_more_than:,})."
        ]
    if summary.rows == 0:
        return lines
    lines.append(f"Expiry range: {_when(summary.oldest)} (oldest) to {_when(summary.newest)} (newest).")
    of = f" of {summary.dags}" if summary.dags is not None else ""
    if summary.by_dag_source == "exact":
        lines.append(f"By DAG (top {len(summary.by_dag)}{of}):")
    elif summary.by_dag_source == "snapshot":
        lines.append(
            f"By DAG (top {len(summary.by_dag)}{of}), expired at the statistics snapshot of "
            f"{_when(summary.snapshot_taken_at)} ({formatting.age(summary.snapshot_age_seconds)} ago):"
        )
    else:
        lines.append("By DAG: not counted (too many rows and no statistics snapshot; run state_store_stats).")
    width = max((len(d) for d, _ in summary.by_dag), default=0)
    lines += [f"  {dag_id:<{width}}  {rows:>10}" for dag_id, rows in summary.by_dag]
    shown = len(summary.sample)
    counted = f"{shown} of {summary.rows}" if summary.rows_more_than is None else f"the {shown}"
    lines.append(f"Sample ({counted}, oldest first):")
    lines += [
        f"  dag {r.dag_id!r} run {r.run_id!r} task {r.task_id!r} {summary.coordinates(r)} "
        f"key {r.key[:80]!r}{'…' if len(r.key) > 80 else ''} expired {_when(r.expires_at)}"
        for r in summary.sample
    ]
    lines.append("Asset state and keys without expiry (NEVER_EXPIRE) are never deleted.")
    if summary.references:
        lines.append(references_line(summary.references))
    return lines


def references_line(references: gc.ExpiredReferences) -> str:
    """The dry run's look at the references among expired rows (``--with-objects``), as one line."""
    among = "the expired rows" if references.exact else f"the first {references.rows:,} expired rows"
    text = (
        f"Worker-side objects (--with-objects), among {among}: {references.objects:,} reference(s) to objects, "
        f"deleted after their rows; {references.inline:,} inline value(s), no object"
    )
    if references.unreachable:
        text += (
            f"; {references.unreachable:,} URL(s) outside the configured base path, never deleted (counted as failed)"
        )
    return text + "."


def _when(value) -> str:
    return formatting.iso(value) or "-"
