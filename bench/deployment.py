"""A large, believable Airflow 3.3.2 or 3.4.0b2 deployment in PostgreSQL, for measuring the dashboard at scale.

Built set-based in SQL (``INSERT … SELECT … generate_series``, one statement per table or per batch of
days, no row loops in Python) into a database of its own, ``ssbench_deploy_{size}`` on Airflow 3.3.2's
own schema or ``ssbench_deploy34_{size}`` on 3.4.0b2's (``manage.py create_airflow_schema``: the committed
``airflow db migrate`` DDL, exactly what the tests run; no index is added to Airflow's tables). An existing
database of that name is reused (``--rebuild`` builds it again); it is built under a temporary name and
renamed when complete, so an interrupted build is never reused. Its build time and row counts are recorded
as the database's comment (``build_info()``), which ``bench/pages_bench.py`` writes into docs/benchmarks/pages.md.

Shape, per size (``SIZES``): DAGs ``{team}_{n:04d}`` with the team cycling over ``TEAMS`` (so ``etl_*``
is 10% of the DAGs), 100 daily runs each; every run has 4 tasks with 5 keys each and one task mapped ×10
with 3 keys per map index (50 keys and 14 task instances per run). Task keys: about 10% expired, 5%
never expiring (NULL), 5% expiring within 24 h, the rest over the next 30 days; values are small JSON
(20–200 bytes) except about 3% of 1–10 KB. Assets ``{team}.dataset_{n}`` at ``s3://{team}-bucket/dataset_{n}``,
95% active, 2 keys each. Rows are inserted in time order (day by day, all DAGs), as a scheduler would.

On 3.4 (``--series 3.4``) the DAGs, runs, assets and key rules are the same; each run's tasks are those of
``bench/shape34.py`` instead (dynamic regions: a loop around a mapped task, a mapped task group; 50 keys and 20
task instances a run, 5 regions), every DAG has its serialized DAG, and one more DAG has a run whose loop ran 500
iterations.

    .venv/bin/python bench/deployment.py --size 20k
    .venv/bin/python bench/deployment.py --size 10m --rebuild
    .venv/bin/python bench/deployment.py --size 10m --series 3.4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import shape34  # bench/shape34.py: this script's folder is on sys.path when it runs
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
SERVER = "postgresql://postgres@127.0.0.1:5432"
DATABASE = {"3.3": "ssbench_deploy_{size}", "3.4": "ssbench_deploy34_{size}"}
SERIES = tuple(DATABASE)
TEAMS = ("etl", "ml", "report", "ingest", "export", "billing", "search", "ads", "crm", "ops")


@dataclass(frozen=True)
class Size:
    dags: int
    runs: int  # per DAG, one a day
    assets: int  # 2 keys each
    days_per_batch: int  # days of runs (of all DAGs) per INSERT of task instances and keys


SIZES = {
    "20k": Size(dags=4, runs=100, assets=100, days_per_batch=100),
    "1m": Size(dags=200, runs=100, assets=5_000, days_per_batch=25),
    "10m": Size(dags=2_000, runs=100, assets=50_000, days_per_batch=5),
}

# Tasks of every DAG: (task_id, operator, map indexes, keys). 4 × 5 + 1 × 10 × 3 = 50 keys per run.
TASKS = [
    ("extract", "S3ListOperator", [-1], ["watermark", "cursor", "source_manifest", "rows_read", "last_success"]),
    (
        "transform",
        "SparkSubmitOperator",
        [-1],
        ["checkpoint", "spark_job_id", "partition_cursor", "rows_written", "schema_hash"],
    ),
    ("process_partition", "PythonOperator", list(range(10)), ["offset", "checkpoint", "status"]),
    (
        "load",
        "SQLExecuteQueryOperator",
        [-1],
        ["watermark", "batch_id", "rows_loaded", "target_snapshot", "last_success"],
    ),
    ("publish", "HttpOperator", [-1], ["notification_id", "published_at", "report_url", "consumers", "last_success"]),
]
KEYS_PER_RUN = sum(len(m) * len(k) for _, _, m, k in TASKS)
TIS_PER_RUN = sum(len(m) for _, _, m, _ in TASKS)
assert (KEYS_PER_RUN, TIS_PER_RUN) == (50, 14)

TEAM = "(ARRAY[{}])[{{n}} %% 10 + 1]".format(", ".join(f"'{t}'" for t in TEAMS))

# Temporary tables (dropped with the session): the shape every generated row is joined with.
SHAPE = [
    "CREATE TEMP TABLE bench_dag (n int PRIMARY KEY, dag_id text UNIQUE, team text, version_id uuid)",
    "CREATE TEMP TABLE bench_ti (ord int, task_id text, map_index int, operator text)",
    "CREATE TEMP TABLE bench_key (ord int, task_id text, map_index int, key text)",
]

DAGS = f"""
INSERT INTO bench_dag (n, dag_id, team, version_id)
SELECT n, {TEAM.format(n="n")} || '_' || lpad(n::text, 4, '0'), {TEAM.format(n="n")}, gen_random_uuid()
FROM generate_series(0, %(dags)s - 1) AS n;

INSERT INTO dag_bundle (name, active, version, last_refreshed) VALUES ('dags-folder', true, NULL, %(now)s);

INSERT INTO dag (dag_id, is_paused, is_stale, last_parsed_time, last_parse_duration, fileloc, relative_fileloc,
                 bundle_name, owners, description, timetable_type, timetable_summary, timetable_description,
                 partition_mapper_info, max_active_tasks, max_active_runs, max_consecutive_failed_dag_runs,
                 has_task_concurrency_limits, next_dagrun, next_dagrun_data_interval_start,
                 next_dagrun_data_interval_end, next_dagrun_create_after)
SELECT dag_id, n %% 50 = 49, false, %(now)s, 0.05 + (n %% 7) / 10.0,
       '/opt/airflow/dags/' || team || '/' || dag_id || '.py', team || '/' || dag_id || '.py',
       'dags-folder', team, 'The ' || team || ' pipeline #' || n, 'airflow.timetables.trigger.CronTriggerTimetable',
       '0 ' || (n %% 24) || ' * * *', 'At ' || (n %% 24) || ':00', '{{}}', 16, 1, 0, false,
       %(today)s + (n %% 24) * interval '1 hour', %(today)s + (n %% 24) * interval '1 hour',
       %(today)s + (n %% 24) * interval '1 hour', %(today)s + (n %% 24) * interval '1 hour'
FROM bench_dag ORDER BY n;

INSERT INTO dag_version (id, version_number, dag_id, bundle_name, bundle_version, created_at, last_updated)
SELECT version_id, 1, dag_id, 'dags-folder', NULL, %(first_day)s, %(first_day)s FROM bench_dag ORDER BY n;
"""

# Run r (0 = oldest) of DAG n: id r × dags + n + 1, so ids follow time as a scheduler's would; the newest
# run of every DAG is running, about 1 in 23 of the others failed.
RUNS = """
INSERT INTO dag_run (id, dag_id, run_id, run_type, triggered_by, state, logical_date, data_interval_start,
                     data_interval_end, run_after, queued_at, start_date, end_date, last_scheduling_decision,
                     created_at, updated_at, created_dag_version_id, conf{span_status})
SELECT r * %(dags)s + d.n + 1, d.dag_id,
       'scheduled__' || to_char(ld AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') || '+00:00',
       'scheduled', 'timetable',
       CASE WHEN r = %(runs)s - 1 THEN 'running' WHEN (r * %(dags)s + d.n) %% 23 = 0 THEN 'failed' ELSE 'success' END,
       ld, ld - interval '1 day', ld, ld, ld + interval '1 minute', ld + interval '2 minutes',
       CASE WHEN r = %(runs)s - 1 THEN NULL ELSE ld + interval '2 minutes' + (10 + d.n %% 50) * interval '1 minute' END,
       ld + interval '5 minutes', ld + interval '1 minute', ld + interval '1 hour', d.version_id, '{{}}'::jsonb
       {not_started}
FROM generate_series(0, %(runs)s - 1) AS r
CROSS JOIN bench_dag AS d
CROSS JOIN LATERAL (SELECT %(today)s - (%(runs)s - r) * interval '1 day' + (d.n %% 24) * interval '1 hour' AS ld) t
ORDER BY r, d.n;
SELECT setval('dag_run_id_seq', (SELECT max(id) FROM dag_run));
"""

TASK_INSTANCES = """
INSERT INTO task_instance (id, task_id, dag_id, run_id, map_index, start_date, end_date, duration, state,
                           try_number, max_tries, hostname, unixname, pool, pool_slots, queue, priority_weight,
                           operator, queued_dttm, scheduled_dttm, executor, updated_at, rendered_map_index,
                           dag_version_id, span_status)
SELECT gen_random_uuid(), t.task_id, dr.dag_id, dr.run_id, t.map_index, ti_start,
       CASE WHEN ti_state IN ('success', 'failed') THEN ti_start + (30 + t.ord * 7) * interval '1 second' END,
       CASE WHEN ti_state IN ('success', 'failed') THEN 30 + t.ord * 7 END,
       ti_state, 1, 0, 'worker-' || (dr.id %% 8) || '.airflow.internal', 'airflow', 'default_pool', 1, 'default', 1,
       t.operator, ti_start - interval '10 seconds', ti_start - interval '20 seconds', 'CeleryExecutor',
       ti_start + interval '2 minutes',
       CASE WHEN t.map_index >= 0 THEN 'partition ' || t.map_index END, dr.created_dag_version_id, 'not_started'
FROM dag_run AS dr
CROSS JOIN bench_ti AS t
CROSS JOIN LATERAL (
    SELECT dr.start_date + t.ord * interval '1 minute' AS ti_start,
           CASE dr.state
               WHEN 'success' THEN 'success'
               WHEN 'failed' THEN CASE WHEN t.task_id = 'load' THEN 'failed'
                                       WHEN t.task_id = 'publish' THEN 'upstream_failed' ELSE 'success' END
               ELSE CASE WHEN t.task_id IN ('extract', 'transform') THEN 'success'
                         WHEN t.task_id = 'process_partition' THEN 'running' END
           END AS ti_state
) s
WHERE dr.id BETWEEN %(first)s AND %(last)s
ORDER BY dr.id, t.ord
"""

# g: a number unique to the key, from which its expiry and size class are drawn (7919, 104729 and 611953 are
# primes, so g × p mod m spreads every class and instant over all DAGs, runs and tasks).
TASK_KEYS = """
INSERT INTO task_state_store (dag_run_id, task_id, map_index, key, dag_id, run_id, value, updated_at, expires_at)
SELECT dr.id, k.task_id, k.map_index, k.key, dr.dag_id, dr.run_id,
       CASE WHEN (g * 104729) %% 1000 < 30
            THEN '{"files": "' || repeat(md5(g::text), (30 + (g * 37) %% 280)::int) || '"}'
            ELSE '{"n": ' || (g %% 100000) || ', "note": "' || repeat('x', ((g * 31) %% 173)::int) || '"}'
       END,
       LEAST(%(now)s, dr.start_date + (k.ord + 1) * interval '1 minute'),
       CASE WHEN (g * 7919) %% 1000 < 100 THEN %(now)s - (1 + (g * 611953) %% 720) * interval '1 hour'
            WHEN (g * 7919) %% 1000 < 150 THEN NULL
            WHEN (g * 7919) %% 1000 < 200 THEN %(now)s + (1 + (g * 611953) %% 1439) * interval '1 minute'
            ELSE %(now)s + interval '1 day' + ((g * 611953) %% (29 * 1440)) * interval '1 minute'
       END
FROM dag_run AS dr
CROSS JOIN bench_key AS k
CROSS JOIN LATERAL (SELECT dr.id::bigint * 64 + k.ord AS g) s
WHERE dr.id BETWEEN %(first)s AND %(last)s
ORDER BY dr.id, k.ord
"""

ASSETS = f"""
INSERT INTO asset (id, name, uri, "group", extra, created_at, updated_at)
SELECT a + 1, {TEAM.format(n="a")} || '.dataset_' || a, 's3://' || {TEAM.format(n="a")} || '-bucket/dataset_' || a,
       'asset', '{{}}', %(first_day)s, %(now)s
FROM generate_series(0, %(assets)s - 1) AS a ORDER BY a;
SELECT setval('asset_id_seq', (SELECT max(id) FROM asset));

INSERT INTO asset_active (name, uri) SELECT name, uri FROM asset WHERE (id - 1) %% 20 <> 19 ORDER BY id;

INSERT INTO asset_state_store (asset_id, key, value, updated_at, last_updated_by_kind, last_updated_by_dag_id,
                               last_updated_by_run_id, last_updated_by_task_id, last_updated_by_map_index)
SELECT a.id, 'watermark', '"' || to_char(dr.logical_date AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') || '+00:00"',
       LEAST(%(now)s, dr.start_date + interval '20 minutes'), 'task', dr.dag_id, dr.run_id, 'publish', -1
FROM asset AS a
JOIN dag_run AS dr ON dr.id = (%(runs)s - 1) * %(dags)s + (a.id - 1) %% %(dags)s + 1
ORDER BY a.id;

INSERT INTO asset_state_store (asset_id, key, value, updated_at, last_updated_by_kind)
SELECT id, 'last_partition', '{{"date": "' || to_char(%(now)s - (id %% 30) * interval '1 day', 'YYYY-MM-DD')
       || '", "files": ' || (id %% 97) || '}}', %(now)s - (id %% 30) * interval '1 day',
       CASE WHEN id %% 3 = 0 THEN 'api' ELSE 'watcher' END
FROM asset ORDER BY id;
"""


def database_name(size: str, series: str = "3.3") -> str:
    return DATABASE[series].format(size=size)


def url(name: str) -> str:
    return f"{SERVER}/{name}"


def admin(statement, params: list | None = None) -> list:
    with psycopg.connect(url("postgres"), autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def exists(name: str) -> bool:
    return bool(admin("SELECT 1 FROM pg_database WHERE datname = %s", [name]))


def build_info(size: str, series: str = "3.3") -> dict | None:
    """What the build recorded (size, seconds, rows, when), or None when there is no such deployment."""
    rows = admin(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
        [database_name(size, series)],
    )
    if not rows:
        return None
    try:
        return json.loads(rows[0][0] or "{}")
    except ValueError:
        return {}


def create_schema(name: str, series: str) -> None:
    """Airflow's DDL of ``series``, through the same code the tests and `demo_setup` use."""
    with tempfile.TemporaryDirectory(prefix="ssbench-deploy-") as tmp:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": tmp,
            "STATESTORE_VAR_DIR": tmp,
            "AIRFLOW_HOME": tmp,
            "AIRFLOW_DATABASE_URL": url(name),
            "AIRFLOW_FIXTURE_SERIES": series,
        }
        subprocess.run(
            [sys.executable, "manage.py", "create_airflow_schema"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )


def script(conn: psycopg.Connection, text: str, params: dict) -> None:
    """Statements separated by ';' at the end of a line, each with the parameters it names."""
    for statement in filter(str.strip, text.split(";\n")):
        conn.execute(statement, {k: v for k, v in params.items() if f"%({k})s" in statement})


def _step(label: str, started: float) -> None:
    print(f"  {label}: {time.perf_counter() - started:.1f}s", flush=True)


def build(size: str, rebuild: bool = False, series: str = "3.3") -> dict:
    """Build the deployment of ``size`` on Airflow ``series``'s schema unless it exists; return its build record."""
    name = database_name(size, series)
    if exists(name) and not rebuild:
        info = build_info(size, series) or {}
        print(f"{name}: exists (built {info.get('built_at', '?')} in {info.get('build_seconds', '?')} s), reused")
        return info
    shape = SIZES[size]
    building = f"{name}__building"
    admin(f'DROP DATABASE IF EXISTS "{building}"')
    print(f"{name}: building ({shape.dags} DAGs × {shape.runs} runs, {shape.assets} assets)", flush=True)
    started = time.perf_counter()
    admin(f'CREATE DATABASE "{building}"')
    create_schema(building, series)
    _step("schema", started)
    now = datetime.now(UTC).replace(microsecond=0)
    today = now.replace(hour=0, minute=0, second=0)
    params = {
        "now": now,
        "today": today,
        "first_day": today - timedelta(days=365),
        "dags": shape.dags,
        "runs": shape.runs,
        "assets": shape.assets,
    }
    regions = series != "3.3"
    document = shape34.serialized_dag_document() if regions else None
    runs = RUNS.format(span_status="" if regions else ", span_status", not_started="" if regions else ", 'not_started'")
    per_batch = [shape34.REGIONS, shape34.TASK_INSTANCES, shape34.DECISIONS, shape34.TASK_KEYS]
    if not regions:
        per_batch = [TASK_INSTANCES, TASK_KEYS]
    with psycopg.connect(url(building)) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.execute("SET work_mem = '64MB'")
        conn.execute("SET maintenance_work_mem = '512MB'")
        with conn.cursor() as cursor:
            if regions:
                for statement in shape34.SHAPE:
                    cursor.execute(statement)
                tis, keys = shape34.shape_rows()
                cursor.executemany("INSERT INTO bench_ti VALUES (%s, %s, %s, %s, %s)", tis)
                cursor.executemany("INSERT INTO bench_key VALUES (%s, %s, %s, %s, %s)", keys)
            else:
                for statement in SHAPE[1:]:
                    cursor.execute(statement)
                cursor.executemany("INSERT INTO bench_ti VALUES (%s, %s, %s, %s)", list(enumerate_task_instances()))
                cursor.executemany("INSERT INTO bench_key VALUES (%s, %s, %s, %s)", list(enumerate_keys()))
            cursor.execute(SHAPE[0])
        script(conn, DAGS, params)
        script(conn, runs, params)
        if regions:
            _serialized_dags(conn, now, document)
        conn.commit()
        _step("dag, dag_version, dag_run", started)
        for first_day in range(0, shape.runs, shape.days_per_batch):
            bounds = {
                "first": first_day * shape.dags + 1,
                "last": min(first_day + shape.days_per_batch, shape.runs) * shape.dags,
            }
            for statement in per_batch:
                conn.execute(statement, {**params, **bounds})
            conn.commit()
            _step(f"task instances and keys of days {first_day + 1}–{first_day + shape.days_per_batch}", started)
        if regions:
            long_run = _long_loop_run(conn, params, document)
            for statement in per_batch:
                conn.execute(statement, {**params, "first": long_run, "last": long_run})
            conn.commit()
            _step(f"{shape34.LONG_LOOP_DAG}: a loop of {shape34.LONG_LOOP} iterations", started)
        script(conn, ASSETS, params)
        if regions:
            conn.execute(shape34.ASSET_WRITERS)
        conn.commit()
        _step("assets", started)
    with psycopg.connect(url(building), autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute("VACUUM (ANALYZE)")
        _step("VACUUM (ANALYZE)", started)
        tables = ["dag", "dag_run", "task_instance", "task_state_store", "asset", "asset_active", "asset_state_store"]
        if regions:
            tables.append("dynamic_region")
        counts = {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in tables}
        database_size = conn.execute("SELECT pg_size_pretty(pg_database_size(current_database()))").fetchone()[0]
    seconds = round(time.perf_counter() - started, 1)
    info = {
        "size": size,
        "series": series,
        "build_seconds": seconds,
        "built_at": now.isoformat(),
        "rows": counts,
        "database_size": database_size,
    }
    admin(f'DROP DATABASE IF EXISTS "{name}"')
    admin(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
    admin(sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(name), sql.Literal(json.dumps(info))))
    print(f"{name}: built in {seconds} s, {database_size}: {counts}", flush=True)
    return info


def _serialized_dags(conn: psycopg.Connection, now: datetime, document: dict) -> None:
    """Each DAG's serialized DAG (3.4 resolves a task's region from it), for its one version."""
    dags = conn.execute("SELECT dag_id, version_id FROM bench_dag ORDER BY n").fetchall()
    with (
        conn.cursor() as cursor,
        cursor.copy(
            "COPY serialized_dag (id, dag_id, data, created_at, last_updated, dag_hash, dag_version_id) FROM STDIN"
        ) as copy,
    ):
        for dag_id, version_id in dags:
            copy.write_row(
                (uuid.uuid4(), dag_id, shape34.serialized_dag(document, dag_id), now, now, "0" * 32, version_id)
            )


def _long_loop_run(conn: psycopg.Connection, params: dict, document: dict) -> int:
    """The DAG ``ml_refine_long`` and its one run (over), whose loop the batch statements fill."""
    version = uuid.uuid4()
    dag_id = shape34.LONG_LOOP_DAG
    conn.execute(
        "INSERT INTO dag (dag_id, is_paused, is_stale, fileloc, relative_fileloc, bundle_name, owners, timetable_type,"
        " partition_mapper_info, max_active_tasks, max_active_runs, max_consecutive_failed_dag_runs,"
        " has_task_concurrency_limits) VALUES (%s, false, false, %s, %s, 'dags-folder', 'ml', '', '{}', 16, 1, 0,"
        " false)",
        [dag_id, f"/opt/airflow/dags/ml/{dag_id}.py", f"ml/{dag_id}.py"],
    )
    conn.execute(
        "INSERT INTO dag_version (id, version_number, dag_id, bundle_name, created_at, last_updated)"
        " VALUES (%s, 1, %s, 'dags-folder', %s, %s)",
        [version, dag_id, params["first_day"], params["first_day"]],
    )
    conn.execute(
        "INSERT INTO serialized_dag (id, dag_id, data, created_at, last_updated, dag_hash, dag_version_id)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s)",
        [
            uuid.uuid4(),
            dag_id,
            shape34.serialized_dag(document, dag_id),
            params["now"],
            params["now"],
            "0" * 32,
            version,
        ],
    )
    logical = params["today"] - timedelta(days=3)  # its 500 iterations took 42 hours
    (run,) = conn.execute(
        "INSERT INTO dag_run (id, dag_id, run_id, run_type, triggered_by, state, logical_date, data_interval_start,"
        " data_interval_end, run_after, queued_at, start_date, end_date, last_scheduling_decision, created_at,"
        " updated_at, created_dag_version_id, conf)"
        " SELECT max(id) + 1, %(dag)s, 'manual__' || to_char(%(ld)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS')"
        " || '+00:00', 'manual', 'rest_api', 'success', %(ld)s, %(ld)s, %(ld)s, %(ld)s, %(ld)s, %(ld)s,"
        " %(ld)s + interval '2 days', %(ld)s + interval '2 days', %(ld)s, %(ld)s, %(version)s, '{}'::jsonb"
        " FROM dag_run RETURNING id",
        {"dag": dag_id, "ld": logical, "version": version},
    ).fetchone()
    conn.execute("SELECT setval('dag_run_id_seq', %s)", [run])
    return run


def enumerate_task_instances():
    """(ord, task_id, map_index, operator) of the 14 task instances of a run."""
    rows = [(task, map_index, operator) for task, operator, map_indexes, _ in TASKS for map_index in map_indexes]
    return [(ord_, *row) for ord_, row in enumerate(rows)]


def enumerate_keys():
    """(ord, task_id, map_index, key) of the 50 keys of a run."""
    ord_ = 0
    for task, _, map_indexes, keys in TASKS:
        for map_index in map_indexes:
            for key in keys:
                yield ord_, task, map_index, key
                ord_ += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=list(SIZES), required=True)
    parser.add_argument("--rebuild", action="store_true", help="drop and build again even if it exists")
    parser.add_argument("--series", choices=SERIES, default="3.3", help="Airflow's schema (default 3.3)")
    args = parser.parse_args()
    build(args.size, args.rebuild, args.series)


if __name__ == "__main__":
    main()
