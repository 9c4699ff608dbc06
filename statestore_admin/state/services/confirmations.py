"""Confirmations: what a dialog listed (``Listing``, carried as a signed token of keyed hashes of each
key's identity and version) and ``list_keys`` that makes one; ``outcome_of`` reports what a confirmed action
did and kept."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from django.conf import settings
from django.core import signing
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.audit import events as audit
from statestore_admin.core import formatting
from statestore_admin.core.errors import Invalid
from statestore_admin.objects import store as objects
from statestore_admin.state import selectors
from statestore_admin.state.services.outcomes import KEPT_NAMED, Outcome
from statestore_admin.state.services.rows import locked_chunks

LISTED_MAX = 10_000  # keys one confirmation can list (its token carries 12 bytes per key)
_HASH_BYTES = 6  # of a key's identity, and of its version
_TOKEN_SALT = "statestore_admin.state.services.Listing"


@cache
def _hash_key() -> bytes:
    """The key of the hashes in listings: a user cannot learn a value from its hash by guessing."""
    return hashlib.sha256(b"statestore-admin listing\0" + settings.SECRET_KEY.encode()).digest()


def _hashed(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), key=_hash_key(), digest_size=_HASH_BYTES).digest()


def _identity(row) -> str:
    """A task key is its row id; an asset key, its asset and name."""
    return f"t{row.pk}" if isinstance(row, TaskStateStore) else f"a{row.asset_id}\0{row.key}"


def _version(row) -> str:
    """A key as a confirmation shows it: when its writer says it was written, and its value."""
    return f"{row.updated_at.isoformat()}\0{row.value}"


@dataclass(frozen=True)
class Listing:
    """The keys a confirmation listed: each key's identity and version (``_identity``, ``_version``), as
    keyed hashes. The dialog carries it as a signed ``token``; confirming acts on exactly these keys as
    they were. ``sample`` holds the first rows in the listing's order, for the dialog to show."""

    versions: dict[bytes, bytes]
    sample: tuple = ()
    refs: int = 0  # worker-side references among the keys
    latest: datetime | None = None  # the latest ``updated_at`` among the keys

    @property
    def count(self) -> int:
        return len(self.versions)

    @property
    def token(self) -> str:
        packed = b"".join(identity + version for identity, version in sorted(self.versions.items()))
        return signing.Signer(salt=_TOKEN_SALT).sign(base64.urlsafe_b64encode(packed).decode())

    @classmethod
    def from_token(cls, token: str) -> Listing:
        try:
            packed = base64.urlsafe_b64decode(signing.Signer(salt=_TOKEN_SALT).unsign(token or ""))
        except (signing.BadSignature, ValueError):
            message = _("The confirmation's list of keys is missing or damaged; open it again.")
            raise Invalid({"listed": message}) from None
        step = 2 * _HASH_BYTES
        return cls(
            {packed[i : i + _HASH_BYTES]: packed[i + _HASH_BYTES : i + step] for i in range(0, len(packed), step)}
        )

    def sort(self, rows: list, others: list[tuple[str, bool]]) -> list:
        """Of ``rows`` (current, locked), those listed in the version listed; each other one is added to
        ``others`` as (its key, whether it was listed in another version)."""
        listed = []
        for row in rows:
            version = self.versions.get(_hashed(_identity(row)))
            if version is not None and version == _hashed(_version(row)):
                listed.append(row)
            else:
                others.append((row.key, version is not None))
        return listed


def outcome_of(
    recorder, listed: Listing | None, others: list[tuple[str, bool]], deletes: objects.ObjectDeletes | None = None
) -> Outcome:
    """What an action did, and after a confirmation (``listed``), what it kept (``others``)."""
    if listed is None:
        return Outcome(recorder.count, event=recorder.event, objects=deletes)
    rewritten = sum(1 for _, was_listed in others if was_listed)
    return Outcome(
        recorder.count,
        added=len(others) - rewritten,
        rewritten=rewritten,
        gone=listed.count - recorder.count - rewritten,
        kept_keys=tuple(key for key, _ in others[:KEPT_NAMED]),
        event=recorder.event,
        objects=deletes,
    )


def listed_chunks(rows: QuerySet, ordering: str, listed: Listing, others: list) -> Iterator[list]:
    """The rows that ``listed`` lists in the version it listed, locked, a chunk at a time (see
    ``locked_chunks``); the other rows are added to ``others`` (``Listing.sort``)."""
    for chunk in locked_chunks(rows, ordering):
        chosen = listed.sort(chunk, others)
        if chosen:
            yield chosen


def list_keys(rows: QuerySet, *, sample: int = 0) -> Listing:
    """List ``rows`` (task or asset keys, in the order to show) for a confirmation; the first ``sample``
    rows are kept, each with ``preview``, ``size`` and ``is_ref`` as ``selectors.with_previews`` gives.
    More than ``LISTED_MAX`` keys cannot be confirmed one by one (Invalid). Values are read to hash their
    versions, never returned beyond the sample."""
    count = rows.count()
    if count > LISTED_MAX:
        raise Invalid(
            {
                "keys": _(
                    "These are %(count)s keys; a confirmation lists at most %(limit)s. Act on fewer at a time (a "
                    "selection, one map index), or use the API's clear."
                )
                % {"count": formatting.count(count), "limit": formatting.count(LISTED_MAX)}
            }
        )
    versions, shown, refs, latest = {}, [], 0, None
    for row in rows.iterator(chunk_size=audit.CHUNK):
        versions[_hashed(_identity(row))] = _hashed(_version(row))
        refs += row.value.startswith(selectors.REF_PREFIX)
        latest = row.updated_at if latest is None else max(latest, row.updated_at)
        if len(shown) < sample:
            row.preview = row.value[: selectors.PREVIEW_CHARS]
            row.size, row.is_ref = len(row.value), row.value.startswith(selectors.REF_PREFIX)
            shown.append(row)
    return Listing(versions, tuple(shown), refs, latest)
