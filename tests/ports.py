"""Free TCP ports for the servers the tests start: gunicorn, Airflow's api-server, the OpenID provider, Redis,
TCP proxies, private PostgreSQL clusters, the container image.

A port that ``bind(("127.0.0.1", 0))`` returns is free only at that moment, and a test that starts something slow
on it (pip, migrate, initdb, Airflow's start-up) may find another server there by then: CI's stages run side by
side, each starting servers, and the kernel hands the same ephemeral ports to every ``bind(0)`` and outgoing
connection of the machine (CI at 20f9f10: another stage's server answered a fresh clone's health check). So the
ports come from below the kernel's ephemeral range, where nothing takes one unasked, and each is held for the
life of the test process that took it by a lock on a file that every test process respects (xdist workers, the
stages side by side)."""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
from pathlib import Path

# One folder a user: a lock file another user made (mode 0644) could not be opened for writing.
_LOCKS = Path(tempfile.gettempdir()) / f"statestore-test-ports-{os.getuid()}"
_held: dict[int, int] = {}  # port -> the open, locked file that reserves it until this process ends


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _range() -> range:
    high = _ephemeral_low()
    # Well above the registered ports that a developer's machine may run (PostgreSQL 5432, Redis 6379, 8080, ...).
    return range(20000, high) if high > 21000 else range(high - 1000, high)


def free_port() -> int:
    """A port nothing listens on, reserved for this process: no other test process is handed it."""
    _LOCKS.mkdir(exist_ok=True)
    candidates = _range()
    for _ in range(200):
        port = random.choice(candidates)
        if port in _held:
            continue
        fd = os.open(_LOCKS / str(port), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another test process holds it
            os.close(fd)
            continue
        if _bindable(port):
            _held[port] = fd
            return port
        os.close(fd)
    raise RuntimeError(f"no free port in {candidates.start}-{candidates.stop - 1} after 200 tries")


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
