"""What a write returns: ``Outcome``, the changed rows and audit event of an action, and after a
confirmation what it kept; and the write modes (CREATE, UPSERT, UPDATE) the set functions take."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from statestore_admin.core import formatting
from statestore_admin.objects import store as objects
from statestore_admin.records.models import AuditEvent

Action = AuditEvent.Action
CREATE, UPSERT, UPDATE = "create", "upsert", "update"  # write modes: new key only, either, existing only
KEPT_NAMED = 5  # kept keys named in an outcome's description


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

    def describe(self, done: str, *, asset: str = "", when: str = "") -> str:
        """ "Deleted 3 keys." and what was kept or gone: ``done`` is what was done to the keys, one whole sentence
        per action for translators ("deleted", "expired", "expiry": set to ``when``, "cleared": the state of the
        asset named ``asset``)."""
        n, count = self.changed, formatting.count(self.changed)
        if done == "deleted":
            head = ngettext("Deleted %(count)s key", "Deleted %(count)s keys", n)
        elif done == "expired":
            head = ngettext("Expired %(count)s key", "Expired %(count)s keys", n)
        elif done == "expiry":
            head = ngettext("Set the expiry of %(count)s key", "Set the expiry of %(count)s keys", n)
        elif done == "cleared":
            head = ngettext(
                "Cleared the state of asset %(asset)s: deleted %(count)s key",
                "Cleared the state of asset %(asset)s: deleted %(count)s keys",
                n,
            )
        else:
            raise ValueError(f"describe: nothing done called {done!r}")
        clauses = [head % {"count": count, "asset": repr(asset)}]
        if self.kept:
            clauses.append(self._kept())
        if self.gone:
            clauses.append(
                ngettext("%(count)s key listed was already gone", "%(count)s keys listed were already gone", self.gone)
                % {"count": formatting.count(self.gone)}
            )
        text = "; ".join(clauses)
        # Translators: the new expiry of every key of a bulk expiry ("in 7 days", "never"), after what was done.
        text = _("%(done)s: each %(when)s.") % {"done": text, "when": when} if when else _("%(done)s.") % {"done": text}
        return text + (self.objects.describe() if self.objects else "")

    def _kept(self) -> str:
        counts = {"added": formatting.count(self.added), "written": formatting.count(self.rewritten)}
        if self.added and self.rewritten:
            why = _("%(added)s added, %(written)s written since") % counts
        elif self.added:
            why = _("%(added)s added since") % counts
        else:
            why = _("%(written)s written since") % counts
        names = ", ".join(repr(k) for k in self.kept_keys[:KEPT_NAMED])
        if self.kept > KEPT_NAMED:
            more = formatting.count(self.kept - KEPT_NAMED)
            names = _("%(names)s and %(count)s more") % {"names": names, "count": more}
        return ngettext(
            "kept %(count)s key that changed after the list was shown (%(why)s): %(names)s",
            "kept %(count)s keys that changed after the list was shown (%(why)s): %(names)s",
            self.kept,
        ) % {"count": formatting.count(self.kept), "why": why, "names": names}
