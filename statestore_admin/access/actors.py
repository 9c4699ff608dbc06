"""Who makes a change, and through which face. Every service takes an ``Actor``; the audit records it."""

from __future__ import annotations

import getpass
import os
import socket
from dataclasses import dataclass

from statestore_admin.identity.sign_in import signed_in
from statestore_admin.identity.usernames import visible

UI, API, ADMIN, COMMAND, GC, RULE = "ui", "api", "admin", "command", "gc", "rule"


@dataclass(frozen=True)
class Actor:
    """A user acting through a face, or the operating-system user running a management command.

    ``user`` is None only for commands (``via`` command or gc), which run with the rights of whoever can
    run ``manage.py`` on the host: their identity is the OS user and host name; and for the dashboard's own
    rules (``via`` rule: a user's tokens revoked when their password changes, a deleted account's scope grants
    removed), which follow from a change that Django's admin or a command made.
    """

    via: str
    user: object | None = None
    token_id: int | None = None
    token_name: str = ""
    signed_in: str = ""  # how the session signed in (identity.sign_in); empty for tokens and commands
    os_user: str = ""
    host: str = ""

    @property
    def is_system(self) -> bool:
        return self.user is None and self.via in (COMMAND, GC, RULE)

    @property
    def name(self) -> str:
        if self.user is not None:  # a name made before identity.usernames' rule may hold a bidi override
            return visible(self.user.get_username())
        return f"{self.os_user}@{self.host}" if self.os_user else self.host

    @classmethod
    def from_request(cls, request, via: str = UI) -> Actor:
        """A page, admin or API request; an API token (``request.auth``) is recorded with its id and name."""
        token = getattr(request, "auth", None)
        token_id = getattr(token, "pk", None) if token is not None and hasattr(token, "prefix") else None
        return cls(
            via=via,
            user=request.user,
            token_id=token_id,
            token_name=(getattr(token, "name", "") or getattr(token, "prefix", "")) if token_id else "",
            signed_in="" if token_id else signed_in(request),
            host=_client_address(request),
        )

    @classmethod
    def rule(cls) -> Actor:
        """The dashboard itself, applying one of its rules (``RULE``)."""
        return cls(via=RULE, host="statestore-admin")

    @classmethod
    def command(cls, via: str = COMMAND) -> Actor:
        return cls(via=via, os_user=_os_user(), host=socket.gethostname()[:255])


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _client_address(request) -> str:
    return (request.META.get("REMOTE_ADDR") or "")[:255]
