"""Granting and revoking access scopes, as an ``Actor``: every face (commands, Django admin, the demo) goes
through ``services``, which asks the scope policy and records each change as an audit event. What a scope
is and what it lets one see stays in ``access.scopes``; this package sits above ``audit`` to record it."""

from statestore_admin.grants.services import grant, revoke

__all__ = ["grant", "revoke"]
