"""The loose index scan of ``task_state_store``'s lookup index ``(dag_id, …)``: the distinct DAG ids, one
index probe each, from a position and optionally within a prefix's range of the index, which holds only where
the column sorts by code point (``codepoint_order``)."""

from __future__ import annotations

from django.db import connections

from statestore_admin.airflow.router import airflow_alias

# A loose index scan over idx_task_state_store_lookup (dag_id, …): one index probe per distinct DAG.
DISTINCT_DAGS = """
WITH RECURSIVE dags(dag_id, n) AS (
    SELECT MIN(dag_id), 1 FROM task_state_store WHERE dag_id > %s{like}
    UNION ALL
    SELECT (SELECT MIN(t.dag_id) FROM task_state_store t WHERE t.dag_id > dags.dag_id{like_t}), n + 1
    FROM dags WHERE dags.dag_id IS NOT NULL AND n < %s
)
SELECT dag_id FROM dags WHERE dag_id IS NOT NULL
"""
_LIKE = " AND dag_id LIKE %s ESCAPE '\\'"


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


_CODEPOINT_COLLATIONS = {"C", "POSIX", "C.UTF-8", "C.utf8", "ucs_basic"}


def codepoint_order() -> bool:
    """Whether dag_id sorts by code point (PostgreSQL's C collations, SQLite's BINARY): then the dag_ids
    starting with a prefix are one range of the lookup index, which a LIKE under PostgreSQL's C.UTF-8 does
    not use on its own (it would read the index on past the prefix's DAGs)."""
    connection = connections[airflow_alias()]
    if connection.vendor != "postgresql":
        return connection.vendor == "sqlite"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(NULLIF(c.collname, 'default'), d.datcollate) FROM pg_attribute a "
            "LEFT JOIN pg_collation c ON c.oid = a.attcollation "
            "JOIN pg_database d ON d.datname = current_database() "
            "WHERE a.attrelid = 'task_state_store'::regclass AND a.attname = 'dag_id'"
        )
        row = cursor.fetchone()
    return bool(row) and row[0] in _CODEPOINT_COLLATIONS


def distinct_dags(after: str, prefix: str, limit: int, ranged: bool = False) -> list[str]:
    """Up to ``limit`` dag_ids after ``after`` starting with ``prefix``, in order; ``ranged`` (see
    ``codepoint_order``): the prefix's range of the lookup index only, else the index filtered from ``after``."""
    like = _LIKE if prefix else ""
    params = [_like_prefix(prefix)] if prefix else []
    upper = prefix[:-1] + chr(ord(prefix[-1]) + 1) if prefix and ranged and ord(prefix[-1]) < 0x10FFFF else None
    if upper:
        like += " AND dag_id >= %s AND dag_id < %s"
        params += [prefix, upper]
    sql = DISTINCT_DAGS.format(like=like, like_t=like.replace("dag_id", "t.dag_id"))
    with connections[airflow_alias()].cursor() as db:
        db.execute(sql, [after, *params, *params, limit])
        return [row[0] for row in db.fetchall()]
