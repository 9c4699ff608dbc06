"""What a write returns: ``Outcome``, the changed rows and audit event of an action, and after a
confirmation what it kept; and the write modes (CREATE, UPSERT, UPDATE) the set functions take."""

from __future__ import annotations

from dataclasses import dataclass

from statestore_admin.core import formatting
from statestore_admin.objects import store as objects
from statestore_admin.records.models import AuditEvent

Action = AuditEvent.Action
CREATE, UPSERT, UPDATE = "create", "upsert", "update"  # write modes: new key only, either, existing only
KEPT_NAMED = 5  # kept keys named in an outcome's description


def key_count(n: int) -> str:
    return formatting.plural(n, "key")


@dataclass(frozen=True)
class Outcome:
    """What an action did: ``changed`` rows and the audit event that records it (None when nothing
    changed). After a confirmation, what it did not touch: ``added`` keys it had not listed, ``rewritten``
    keys written since it listed them (both kept; ``kept_keys`` names the first of them), and ``gone``
    listed keys that no longer existed."""

    changed: int
    added: int = 0
    rewritten: int = 0
    gone: int = 0
    kept_keys: tuple[str, ...] = ()
    event: AuditEvent | None = None
    objects: objects.ObjectDeletes | None = None

    @property
    def kept(self) -> int:
        return self.added + self.rewritten

    @property
    def empty(self) -> bool:
        """The action found no key: none changed, kept or already gone (there was nothing to do)."""
        return not self.changed and not self.kept and not self.gone

    @property
    def objects_failed(self) -> int:
        """Worker-side objects that could not be deleted after their rows (now orphans): a warning to the user."""
        return self.objects.failed_count if self.objects is not None else 0

    def describe(self, verb: str) -> str:
        text = f"{verb} {key_count(self.changed)}"
        if self.kept:
            why = [
                f"{self.added:,} added" if self.added else "",
                f"{self.rewritten:,} written" if self.rewritten else "",
            ]
            names = ", ".join(repr(k) for k in self.kept_keys[:KEPT_NAMED])
            more = f" and {self.kept - KEPT_NAMED:,} more" if self.kept > KEPT_NAMED else ""
            text += (
                f"; kept {key_count(self.kept)} that changed after the list was shown "
                f"({', '.join(w for w in why if w)} since): {names}{more}"
            )
        if self.gone:
            text += f"; {key_count(self.gone)} listed {'were' if self.gone != 1 else 'was'} already gone"
        return text + "." + (self.objects.describe() if self.objects else "")
