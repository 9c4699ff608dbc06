"""Confirming as the dialogs do: a confirmation's POST carries the listing its dialog showed."""

import re

LISTED = re.compile(r'name="listed" value="([^"]*)"')


def listed(client, url: str, data: dict, **extra) -> str:
    """The listing token of the confirmation dialog at ``url`` for ``data`` ("" when it shows none)."""
    found = LISTED.search(client.get(url, data, **extra).content.decode())
    return found.group(1) if found else ""


def confirm(client, url: str, data: dict, **extra):
    """Open the confirmation dialog for ``data`` and confirm it at once."""
    return client.post(url, {**data, "listed": listed(client, url, data, **extra)}, **extra)
