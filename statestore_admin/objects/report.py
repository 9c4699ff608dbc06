"""What an orphans report holds (``objects.orphans.report`` fills it): the tallies of objects, orphans,
dangling and outside references and risks, each with a bounded sample; what a deleting run did; and the
report's one output shape, ``as_dict`` (the command's ``--json`` and the API's answer)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from statestore_admin.objects import store as objects

ERRORS_NAMED = 20  # storage errors named in the report


@dataclass
class Tally:
    """A count (and bytes, for objects) with the first ``limit`` items as a sample."""

    limit: int
    count: int = 0
    bytes: int = 0
    sample: list[dict] = field(default_factory=list)

    def add(self, item: Callable[[], dict] | dict, size: int = 0) -> None:
        self.count += 1
        self.bytes += size
        if len(self.sample) < self.limit:
            self.sample.append(item() if callable(item) else item)


@dataclass
class Deletion:
    """What ``delete=True`` did: ``young`` orphans were too recent (or of unknown age) to delete, ``kept``
    were referenced again, or written again, when checked right before deleting, ``missing`` were gone
    already."""

    older_than: timedelta
    deleted: int = 0
    young: int = 0
    kept: int = 0
    missing: int = 0
    failed_count: int = 0
    deleted_refs: list[str] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    event_id: int | None = None

    def fail(self, ref: str, error: str) -> None:
        self.failed_count += 1
        if len(self.failures) < objects.FAILED_NAMED:
            self.failures.append({"ref": ref, "error": error})

    def as_dict(self) -> dict:
        return {
            "older_than_seconds": self.older_than.total_seconds(),
            "deleted": self.deleted,
            "young": self.young,
            "kept": self.kept,
            "missing": self.missing,
            "failed": self.failed_count,
            "failures": self.failures,
            "audit_event_id": self.event_id,
        }


@dataclass
class OrphanReport:
    """The report (``as_dict`` is the API's and the command's JSON). ``storage`` is None when the Airflow
    configuration names no base path (``config_error`` when its options are invalid): then nothing is
    listed and only the rows are read. ``errors`` name storage errors met on the way (the figures are then
    incomplete: ``complete`` is False)."""

    sample: int
    storage: objects.Storage | None = None
    config_error: str = ""
    objects: int = 0
    object_bytes: int = 0
    orphans: Tally = None
    dangling: Tally = None
    risks: Tally = None
    outside: Tally = None
    rows_with_refs: int = 0
    inline_refs: int = 0
    unchecked: int = 0  # object references whose existence was not checked (storage errors)
    young: int = 0  # orphans last modified less than older_than ago (or of unknown age)
    older_than: timedelta | None = None
    deletion: Deletion | None = None
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    seconds: float = 0.0

    def __post_init__(self):
        for name in ("orphans", "dangling", "risks", "outside"):
            if getattr(self, name) is None:
                setattr(self, name, Tally(self.sample))

    def error(self, text: str) -> None:
        self.error_count += 1
        if len(self.errors) < ERRORS_NAMED:
            self.errors.append(text)

    @property
    def complete(self) -> bool:
        return not self.error_count

    @property
    def failed_deletes(self) -> int:
        return self.deletion.failed_count if self.deletion else 0

    def as_dict(self) -> dict:
        store = self.storage
        return {
            "storage": None
            if store is None
            else {"base": store.base, "compression": store.compression or None, "threshold": store.threshold},
            "config_error": self.config_error or None,
            "objects": {"count": self.objects, "bytes": self.object_bytes},
            "orphans": {
                "count": self.orphans.count,
                "bytes": self.orphans.bytes,
                "young": self.young if self.older_than is not None else None,
                "sample": self.orphans.sample,
            },
            "dangling": {"count": self.dangling.count, "unchecked": self.unchecked, "sample": self.dangling.sample},
            "risks": {"count": self.risks.count, "sample": self.risks.sample},
            "outside": {"count": self.outside.count, "sample": self.outside.sample},
            "rows_with_refs": self.rows_with_refs,
            "inline_refs": self.inline_refs,
            "older_than_seconds": self.older_than.total_seconds() if self.older_than is not None else None,
            "deletion": self.deletion.as_dict() if self.deletion else None,
            "complete": self.complete,
            "errors": {"count": self.error_count, "sample": self.errors},
            "seconds": round(self.seconds, 3),
        }
