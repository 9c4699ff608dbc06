"""One run at a time across processes and servers: a PostgreSQL session-level advisory lock in Airflow's
database, which every server and scheduled job of a deployment reaches. GC (``gc/sql.py``) and statistics
snapshots (``stats.py``) each hold one while they run; the lock goes with the database session, so a killed
process never leaves it behind. On SQLite there is one host, and no lock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def advisory_lock(connection, key: int, busy: Callable[[str], Exception]) -> Iterator[None]:
    """Hold lock ``key`` on ``connection`` while the block runs; raise ``busy(detail)`` at once when another
    session holds it, ``detail`` naming that session (its pid, client, application and start), or ``""``."""
    if connection.vendor != "postgresql":
        yield
        return
    # Inside a transaction (a caller's atomic block), a lock of the transaction's own: it goes with the commit
    # or the rollback, whereas an unlock after an error would fail in the aborted transaction and hide the error.
    in_transaction = connection.in_atomic_block
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_try_advisory{'_xact' if in_transaction else ''}_lock(%s)", [key])
        if not cursor.fetchone()[0]:
            cursor.execute(
                "SELECT a.pid, host(a.client_addr), a.application_name, a.backend_start FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                "AND ((l.classid::bigint << 32) | l.objid::bigint) = %s",
                [key],
            )
            holder = cursor.fetchone()
            detail = (
                f" (database session pid {holder[0]}, client {holder[1] or 'local'}, "
                f"{holder[2] or 'no application_name'}, connected {holder[3]:%Y-%m-%d %H:%M:%S %Z})"
                if holder
                else ""
            )
            raise busy(detail)
    if in_transaction:
        yield
        return
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
