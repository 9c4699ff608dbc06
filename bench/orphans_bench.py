"""What the orphans report costs at 10,000 and 100,000 objects: time and peak memory (``objects.orphans``).

For each size N: a ``file://`` object storage under ``/tmp/ssbench-orphans-N/state`` holding N gzip objects
laid out as common.io's backend writes them (DAG ``bench_orphans``, N/1,000 runs, 10 tasks per run, 100 keys
per task), and a PostgreSQL database of its own (``ssbench_orphans_N``, Airflow 3.3.2's schema through
``bench/deployment.py``; reused while it holds the data, ``--rebuild`` builds it again) with, built set-based:
a row referencing each object but every tenth (so N/10 orphans), N/100 rows referencing objects that do not
exist (dangling), and N rows of plain values (no reference), which the pass over the rows reads past.

Each measurement runs in a fresh process (Django set up against that database, ``orphans.report`` called as
the command calls it), so its peak RSS (``ru_maxrss``) is the whole process's, reported beside its RSS
before the report; a second run of the same report under ``tracemalloc`` gives the peak of Python's own
allocations. ``delete``: the same with ``delete=True, older_than=0`` (every orphan deleted after its
re-check; the objects deleted are written again before the next run).

    .venv/bin/python bench/orphans_bench.py                     # 10k and 100k, writes docs/benchmarks/orphans.md
    .venv/bin/python bench/orphans_bench.py --objects 10000 --no-write
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import deployment  # noqa: E402

ROOT = deployment.ROOT
OUT = ROOT / "docs" / "benchmarks" / "orphans.md"
DAG = "bench_orphans"
PAYLOAD = gzip.compress(json.dumps({"n": 1, "note": "x" * 40}).encode())

RUNS = """
INSERT INTO dag_bundle (name, active, version, last_refreshed) VALUES ('dags-folder', true, NULL, %(now)s);
INSERT INTO dag (dag_id, is_paused, is_stale, fileloc, relative_fileloc, bundle_name, owners, timetable_type,
                 timetable_summary, timetable_description, partition_mapper_info, max_active_tasks, max_active_runs,
                 max_consecutive_failed_dag_runs, has_task_concurrency_limits)
VALUES ('bench_orphans', false, false, '/dags/bench_orphans.py', 'bench_orphans.py', 'dags-folder', 'bench',
        'airflow.timetables.simple.NullTimetable', 'None', 'Never', '{}', 16, 1, 0, false);
INSERT INTO dag_version (id, version_number, dag_id, bundle_name, created_at, last_updated)
VALUES ('00000000-0000-0000-0000-000000000001', 1, 'bench_orphans', 'dags-folder', %(now)s, %(now)s);
INSERT INTO dag_run (id, dag_id, run_id, run_type, triggered_by, state, logical_date, run_after, queued_at,
                     start_date, end_date, created_at, updated_at, created_dag_version_id, conf, span_status)
SELECT r + 1, 'bench_orphans', 'r' || lpad(r::text, 4, '0'), 'manual', 'test', 'success',
       %(day)s + r * interval '1 minute', %(day)s + r * interval '1 minute', %(day)s, %(day)s, %(now)s, %(day)s,
       %(now)s, '00000000-0000-0000-0000-000000000001', '{}'::jsonb, 'not_started'
FROM generate_series(0, %(runs)s - 1) AS r;
SELECT setval('dag_run_id_seq', %(runs)s)
"""

# Object g (1..N) is <base>/bench_orphans/r<(g-1)/1000>/t<((g-1)/100) % 10>/-1/key_<g>.gz.
ROWS = """
INSERT INTO task_state_store (dag_run_id, task_id, map_index, key, dag_id, run_id, value, updated_at, expires_at)
SELECT (g - 1) / 1000 + 1, 't' || lpad((((g - 1) / 100) %% 10)::text, 2, '0'), -1, 'key_' || lpad(g::text, 7, '0'),
       'bench_orphans', 'r' || lpad(((g - 1) / 1000)::text, 4, '0'),
       '{"__airflow_state_ref__": "' || %(base)s || '/bench_orphans/r' || lpad(((g - 1) / 1000)::text, 4, '0')
       || '/t' || lpad((((g - 1) / 100) %% 10)::text, 2, '0') || '/-1/key_' || lpad(g::text, 7, '0') || '.gz"}',
       %(now)s, NULL
FROM generate_series(1, %(objects)s) AS g WHERE g %% 10 <> 0;
INSERT INTO task_state_store (dag_run_id, task_id, map_index, key, dag_id, run_id, value, updated_at, expires_at)
SELECT (g - 1) %% %(runs)s + 1, 'lost', -1, 'lost_' || lpad(g::text, 7, '0'), 'bench_orphans',
       'r' || lpad(((g - 1) %% %(runs)s)::text, 4, '0'),
       '{"__airflow_state_ref__": "' || %(base)s || '/bench_orphans/r' || lpad(((g - 1) %% %(runs)s)::text, 4, '0')
       || '/lost/-1/lost_' || lpad(g::text, 7, '0') || '.gz"}', %(now)s, NULL
FROM generate_series(1, %(objects)s / 100) AS g;
INSERT INTO task_state_store (dag_run_id, task_id, map_index, key, dag_id, run_id, value, updated_at, expires_at)
SELECT (g - 1) %% %(runs)s + 1, 'plain', -1, 'plain_' || lpad(g::text, 7, '0'), 'bench_orphans',
       'r' || lpad(((g - 1) %% %(runs)s)::text, 4, '0'),
       '{"n": ' || g || ', "note": "' || repeat('y', g %% 150) || '"}', %(now)s, NULL
FROM generate_series(1, %(objects)s) AS g;
ANALYZE task_state_store
"""

CHILD = r"""
import json, resource, sys, time, tracemalloc
import django
django.setup()
from datetime import timedelta
from statestore_admin.state import orphans
from statestore_admin.access.actors import Actor

with open("/proc/self/status") as status:
    before = int([l for l in status if l.startswith("VmRSS")][0].split()[1]) / 1024
mode, trace = sys.argv[1], sys.argv[2] == "1"
if trace:
    tracemalloc.start()
usage = resource.getrusage(resource.RUSAGE_SELF)
cpu_before = usage.ru_utime + usage.ru_stime
started = time.perf_counter()
delete = mode == "delete"
report = orphans.report(sample=20, actor=Actor.command(), delete=delete, older_than=timedelta(0) if delete else None)
seconds = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({
    "seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime - cpu_before, "rss_before": before,
    "peak_rss": usage.ru_maxrss / 1024, "traced_peak": tracemalloc.get_traced_memory()[1] / 2**20 if trace else None,
    "objects": report.objects, "orphans": report.orphans.count, "dangling": report.dangling.count,
    "rows_with_refs": report.rows_with_refs, "deleted": report.deletion.deleted if report.deletion else None,
    "errors": report.errors,
}))
"""


def paths(objects: int) -> tuple[Path, str, int]:
    root = Path(f"/tmp/ssbench-orphans-{objects}")
    return root, f"file://{root}/state", max(1, -(-objects // 1000))


def write_objects(objects: int) -> int:
    """Every object 1..N present (the ones a delete run removed are written again); returns how many were."""
    root, _, _ = paths(objects)
    written = 0
    for g in range(1, objects + 1):
        directory = root / "state" / DAG / f"r{(g - 1) // 1000:04d}" / f"t{((g - 1) // 100) % 10:02d}" / "-1"
        if g % 100 == 1 or not directory.exists():
            directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"key_{g:07d}.gz"
        if not path.exists():
            path.write_bytes(PAYLOAD)
            written += 1
    return written


def build(objects: int, rebuild: bool) -> dict:
    database = f"ssbench_orphans_{objects}"
    rows = deployment.admin(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", [database]
    )
    info = json.loads(rows[0][0] or "{}") if rows else None
    if info and info.get("objects") == objects and not rebuild:
        return info
    deployment.admin(f'DROP DATABASE IF EXISTS "{database}"')
    deployment.admin(f'CREATE DATABASE "{database}"')
    started = time.perf_counter()
    deployment.create_schema(database)
    _, base, runs = paths(objects)
    now = datetime.now(UTC).replace(microsecond=0)
    params = {"now": now, "day": now - timedelta(days=1), "objects": objects, "runs": runs, "base": base}
    with psycopg.connect(deployment.url(database), autocommit=True) as conn:
        deployment.script(conn, RUNS, params)
        deployment.script(conn, ROWS, params)
    info = {"objects": objects, "built_in_s": round(time.perf_counter() - started, 1), "at": now.isoformat()}
    deployment.admin(f"COMMENT ON DATABASE \"{database}\" IS '{json.dumps(info)}'")
    return info


def measure(objects: int, mode: str, trace: bool, home: str) -> dict:
    _, base, _ = paths(objects)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": home,
        "STATESTORE_VAR_DIR": home,
        "AIRFLOW_HOME": home,
        "AIRFLOW_DATABASE_URL": deployment.url(f"ssbench_orphans_{objects}"),
        "AIRFLOW_DATABASE_QUERY_TIMEOUT": "60",
        "AIRFLOW__COMMON.IO__STATE_STORE_OBJECTSTORAGE_PATH": base + "/",
        "AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_PATH": base + "/",
        "AIRFLOW__COMMON.IO__STATE_STORE_OBJECTSTORAGE_COMPRESSION": "gzip",
        "AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_COMPRESSION": "gzip",
        "DJANGO_SETTINGS_MODULE": "statestore_admin.settings",
        "PYTHONPATH": str(ROOT),
    }
    marker = Path(home, "migrated")
    if not marker.exists():  # the dashboard's database (SQLite in STATESTORE_VAR_DIR): a delete run's audit event
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
        marker.touch()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, "1" if trace else "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--no-delete", action="store_true", help="Measure the report only.")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="ssbench-orphans-home-") as home:
        for objects in args.objects:
            info = build(objects, args.rebuild)
            started = time.perf_counter()
            written = write_objects(objects)
            print(
                f"{objects:,} objects: rows {info}, {written:,} objects written in "
                f"{time.perf_counter() - started:.1f}s",
                flush=True,
            )
            modes = [("report", False), ("report", True)] + ([] if args.no_delete else [("delete", False)])
            for mode, trace in modes:
                if mode == "delete":
                    write_objects(objects)
                row = {"size": objects, "mode": mode, "traced": trace, **measure(objects, mode, trace, home)}
                print(json.dumps(row), flush=True)
                results.append(row)
            write_objects(objects)
    if not args.no_write:
        write(results)


def write(results: list[dict]) -> None:
    cpu = platform.processor() or platform.machine()
    lines = [
        "# The orphans report at 10,000 and 100,000 objects",
        "",
        f"Measured by `bench/orphans_bench.py` on {datetime.now(UTC):%Y-%m-%d} ({os.cpu_count()} cores, {cpu}, "
        "PostgreSQL on 127.0.0.1, a `file://` storage on local disk; other agents' work on the machine at the "
        "same time, so wall time includes waiting for a core: compare CPU).",
        "",
        "Data set per size N: N gzip objects as common.io's backend lays them out (one DAG, N/1,000 runs, 10 "
        "tasks, 100 keys per task directory); a row referencing every object but every tenth (N/10 orphans); "
        "N/100 rows whose object is missing (dangling); N rows of plain values. One run each, in a fresh process.",
        "",
        "| objects | run | orphans | dangling | rows with refs | wall | CPU | RSS before | peak RSS | "
        "Python peak (tracemalloc) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        label = r["mode"] + (" (under tracemalloc)" if r["traced"] else "")
        if r["mode"] == "delete":
            label += f": {r['deleted']:,} deleted"
        traced = f"{r['traced_peak']:.1f} MB" if r["traced_peak"] is not None else "–"
        lines.append(
            f"| {r['size']:,} | {label} | {r['orphans']:,} | {r['dangling']:,} | {r['rows_with_refs']:,} | "
            f"{r['seconds']:.1f} s | {r['cpu']:.1f} s | {r['rss_before']:.0f} MB | {r['peak_rss']:.0f} MB | {traced} |"
        )
    lines += ["", "<!-- notes -->", ""]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    previous = OUT.read_text() if OUT.exists() else ""
    notes = previous.split("<!-- notes -->", 1)[1].lstrip("\n") if "<!-- notes -->" in previous else ""
    OUT.write_text("\n".join(lines) + notes)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
