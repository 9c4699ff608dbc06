"""Scale data: ``rows`` task keys of the ``scale_test`` DAG, inserted set-based in SQL, for the scale tests and
benchmarks (``demo_data --scale``), in one of two layouts of the expired rows (``LAYOUTS``)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from django.db import connections, transaction
from django.utils import timezone

from statestore_admin.airflow.models import DagRun, TaskInstance
from statestore_admin.airflow.router import airflow_alias
from statestore_admin.airflow.versions import schema_of
from statestore_admin.demo.runs import demo_run_id

SCALE_DAG = "scale_test"
SCALE_TASKS = 10
SCALE_KEYS_PER_RUN = 10_000
# Where the expired keys are. "spread": a share of every run's keys (and so of every heap page), their expiry
# unrelated to the insertion order. "clustered": the first keys written, whole runs at a time, expiring in the
# order they were written: old runs expire together, the common case of a retention period.
SPREAD, CLUSTERED = "spread", "clustered"
LAYOUTS = (SPREAD, CLUSTERED)

# {index}: map_index on Airflow 3.3, region_index on 3.4 (outside any region: region_id keeps its default).
_COLUMNS = "dag_run_id, task_id, {index}, key, dag_id, run_id, value, updated_at, expires_at"
_ROW = (
    "SELECT %(run_pk)s, 'task_' || (g %% {tasks}), -1, 'key_' || g, %(dag_id)s, %(run_id)s, "
    "'{{\"n\": ' || g || '}}', %(now)s, CASE WHEN {is_expired} THEN {expired} ELSE {live} END "
)
# Whether key g of a run is expired, and how many seconds before the newest expiry (an hour ago) it expired.
_LAYOUT = {
    SPREAD: ("g %% 1000 < %(expired_per_mille)s", "(g + %(base)s)"),
    CLUSTERED: ("g + %(base)s < %(expired_rows)s", "(%(expired_rows)s - g - %(base)s)"),
}


def _generate(vendor: str, layout: str) -> str:
    is_expired, age = _LAYOUT[layout]
    if vendor == "postgresql":
        return (
            f"INSERT INTO task_state_store ({_COLUMNS}) "
            + _ROW.format(
                tasks=SCALE_TASKS,
                is_expired=is_expired,
                expired=f"%(expired)s::timestamptz - {age} * interval '1 second'",
                live="%(live)s::timestamptz + (g + %(base)s) * interval '1 second'",
            )
            + "FROM generate_series(0, %(count)s - 1) AS g ON CONFLICT DO NOTHING"
        )
    # The statement starts with INSERT (its WITH inside): Python's sqlite3 reports no rowcount (-1) for a
    # statement that starts with WITH, and the command would print "0 task keys added".
    return (
        f"INSERT INTO task_state_store ({_COLUMNS}) "
        "WITH RECURSIVE s(g) AS (SELECT 0 UNION ALL SELECT g + 1 FROM s WHERE g + 1 < %(count)s) "
        + _ROW.format(
            tasks=SCALE_TASKS,
            is_expired=is_expired,
            expired=f"strftime('%%Y-%%m-%%d %%H:%%M:%%f000', %(expired)s, '-' || {age} || ' seconds')",
            live="strftime('%%Y-%%m-%%d %%H:%%M:%%f000', %(live)s, '+' || (g + %(base)s) || ' seconds')",
        )
        + "FROM s WHERE true ON CONFLICT DO NOTHING"
    )


def load_scale_data(rows: int, expired_fraction: float = 0.5, layout: str = SPREAD) -> int:
    """Add ``rows`` task keys to the ``scale_test`` DAG, set-based in SQL (no row-by-row inserts).

    Keys are spread over runs of ``SCALE_KEYS_PER_RUN``; ``expired_fraction`` of them expired an hour
    ago or earlier (one second apart), the rest expire in 30 days or later; where the expired ones are is
    the ``layout`` (``SPREAD`` or ``CLUSTERED``). Idempotent: the same ``rows`` twice adds nothing. Returns
    the number of rows inserted.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}")
    connection = connections[airflow_alias()]
    ops = connection.ops
    now = timezone.now()
    sql = _generate(connection.vendor, layout).replace("{index}", schema_of(connection).index_column)
    runs = []
    for number in range((rows + SCALE_KEYS_PER_RUN - 1) // SCALE_KEYS_PER_RUN):
        logical_date = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=number)
        runs.append(
            DagRun(
                dag_id=SCALE_DAG,
                run_id=demo_run_id("scheduled", logical_date),
                state="success",
                run_type="scheduled",
                logical_date=logical_date,
                run_after=logical_date,
                start_date=logical_date,
                end_date=logical_date,
            )
        )
    DagRun.objects.bulk_create(runs, ignore_conflicts=True, batch_size=500)
    by_run_id = dict(DagRun.objects.filter(dag_id=SCALE_DAG).values_list("run_id", "id"))
    TaskInstance.objects.bulk_create(
        [
            TaskInstance(
                id=uuid.uuid4(),
                dag_id=SCALE_DAG,
                task_id=f"task_{t}",
                run_id=run.run_id,
                map_index=-1,
                state="success",
                try_number=1,
                pool="default_pool",
                pool_slots=1,
            )
            for run in runs
            for t in range(SCALE_TASKS)
        ],
        ignore_conflicts=True,
        batch_size=1000,
    )
    inserted = 0
    for number, run in enumerate(runs):
        count = min(SCALE_KEYS_PER_RUN, rows - number * SCALE_KEYS_PER_RUN)
        params = {
            "run_pk": by_run_id[run.run_id],
            "dag_id": SCALE_DAG,
            "run_id": run.run_id,
            "now": ops.adapt_datetimefield_value(now),
            "expired_per_mille": round(expired_fraction * 1000),
            "expired_rows": round(expired_fraction * rows),
            "expired": ops.adapt_datetimefield_value(now - timedelta(hours=1)),
            "live": ops.adapt_datetimefield_value(now + timedelta(days=30)),
            "count": count,
            "base": number * SCALE_KEYS_PER_RUN,
        }
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(sql, params)
            inserted += max(cursor.rowcount, 0)
    return inserted
