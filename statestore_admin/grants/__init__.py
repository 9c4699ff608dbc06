"""Granting and revoking access scopes, as an ``Actor``: every face (commands, Django admin, the demo) goes
through ``services``, which asks the scope policy and records each change as an audit event; ``signals``
removes a deleted account's or group's grants the same way. What a scope is and what it lets one see stays in
``access.scopes``; this package sits above ``audit`` to record it. A Django app (its signals), so ``grant`` and
``revoke`` are imported when first used, not while Django loads the apps."""

__all__ = ["grant", "revoke"]


def __getattr__(name: str):
    if name in __all__:
        from statestore_admin.grants import services

        return getattr(services, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
