"""Issuing and revoking API tokens, as an ``Actor``: every face goes through here, and each is an audit event
(actions ``token`` and ``revoke``) written in the same transaction as the token's row."""

from __future__ import annotations

from datetime import timedelta

from django.db import router, transaction

from statestore_admin.access.actors import Actor
from statestore_admin.audit import events
from statestore_admin.records.models import AuditEvent
from statestore_admin.tokens.models import ApiToken


def _described(token: ApiToken) -> dict:
    return {"token_id": token.pk, "prefix": token.prefix, "name": token.name, "owner": token.user.get_username()}


def issue(
    user, name: str = "", expires_in: timedelta | None = None, read_only: bool = False, *, actor: Actor
) -> tuple[ApiToken, str]:
    """``ApiToken.issue``, audited as ``actor``: the record and the token itself (shown once)."""
    with transaction.atomic(using=router.db_for_write(ApiToken)):
        record, token = ApiToken.issue(user, name, expires_in=expires_in, read_only=read_only)
        details = {**_described(record), "expires_at": record.expires_at.isoformat(), "read_only": read_only}
        events.recorded(actor, AuditEvent.Action.TOKEN, details)
    return record, token


def revoke(token: ApiToken, reason: str = "", *, actor: Actor) -> None:
    """``ApiToken.revoke``, audited as ``actor``; a token revoked already is left as it is, unaudited."""
    if token.revoked_at is not None:
        return
    with transaction.atomic(using=router.db_for_write(ApiToken)):
        token.revoke(reason)
        events.recorded(actor, AuditEvent.Action.REVOKE, {**_described(token), "reason": token.revoked_reason})
