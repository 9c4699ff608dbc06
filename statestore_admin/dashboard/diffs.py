"""Values compared for the pages: a line diff of two values pretty-printed as JSON (plain text lines, escaped by
the templates, never HTML), the two sides of a change, and an audited key's change ready to show (the audit
trail, a key's history, a restore's conflicts, a key's story and two runs compared)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from statestore_admin.airflow.models import worker_ref_of
from statestore_admin.core.values import pretty, stored_surrogate
from statestore_admin.records.models import AuditKey

MAX_DIFF_LINES = 400  # a diff longer than this is cut, with the number of lines left out
COMPACT_CHARS = 2000  # both sides of a change shown unfolded up to this many characters


@dataclass(frozen=True)
class DiffLine:
    kind: str  # add, del, ctx or hunk: a CSS class; ``text`` keeps its +/- marker for screen readers
    text: str


def diff_lines(before: str | None, after: str | None) -> tuple[list[DiffLine], int]:
    """A line diff of the two values, each pretty-printed as JSON; and how many lines were left out."""
    old = pretty(before).splitlines() if before is not None else []
    new = pretty(after).splitlines() if after is not None else []
    if before is None or after is None:
        lines = [DiffLine("add", f"+{line}") for line in new] + [DiffLine("del", f"-{line}") for line in old]
    else:
        lines = []
        for text in list(difflib.unified_diff(old, new, lineterm="", n=3))[2:]:
            kind = {"+": "add", "-": "del", "@": "hunk"}.get(text[:1], "ctx")
            lines.append(DiffLine(kind, text))
    return lines[:MAX_DIFF_LINES], max(0, len(lines) - MAX_DIFF_LINES)


def short_diff(before: str | None, after: str | None, limit: int) -> dict:
    """``diff_lines`` cut at ``limit`` lines (the story and compare pages; the key page and the audit show the
    rest), with how many lines are hidden and how many were added and removed."""
    lines, hidden = diff_lines(before, after)
    return {
        "lines": lines[:limit],
        "hidden": hidden + max(0, len(lines) - limit),
        "added": sum(line.kind == "add" for line in lines),
        "removed": sum(line.kind == "del" for line in lines),
    }


@dataclass
class Side:
    """One side of a change: the value (None: no row) and its expiry, pretty and marked if a reference."""

    value: str | None
    expires_at: object = None
    exists: bool = field(init=False)
    pretty: str = field(init=False)
    ref: str | None = field(init=False)
    surrogate: str | None = field(init=False)  # where the value holds a lone surrogate (values.stored_surrogate)

    def __post_init__(self):
        self.exists = self.value is not None
        self.pretty = pretty(self.value) if self.value is not None else ""
        self.ref = worker_ref_of(self.value)
        self.surrogate = stored_surrogate(self.value) if self.value is not None else None


@dataclass
class KeyChange:
    """An ``AuditKey`` ready to show: what kind of change, both sides, the diff."""

    key: AuditKey
    kind: str  # added, deleted, changed, expiry (only the expiry changed), unchanged
    before: Side
    after: Side
    diff: list[DiffLine]
    hidden: int

    @property
    def expiry_changed(self) -> bool:
        return self.before.exists and self.after.exists and self.before.expires_at != self.after.expires_at

    @property
    def is_task(self) -> bool:
        return self.key.asset_id is None

    @property
    def compact(self) -> bool:
        """Small enough to show both sides open."""
        return len(self.before.pretty) + len(self.after.pretty) <= COMPACT_CHARS


def key_change(key: AuditKey) -> KeyChange:
    before = Side(key.before_value, key.before_expires_at)
    after = Side(key.after_value, key.after_expires_at)
    if not before.exists and after.exists:
        kind = "added"
    elif before.exists and not after.exists:
        kind = "deleted"
    elif key.before_value != key.after_value:
        kind = "changed"
    elif key.before_expires_at != key.after_expires_at:
        kind = "expiry"
    else:
        kind = "unchanged"
    diff, hidden = diff_lines(key.before_value, key.after_value)
    return KeyChange(key, kind, before, after, diff, hidden)


def key_history(keys: list[AuditKey]) -> list[KeyChange]:
    """A key's history (``selectors.task_key_history`` / ``asset_key_history``) ready for the key pages."""
    return [key_change(key) for key in keys]
