"""Benchmark `state_store_clean` against a plain DELETE and Airflow 3.3.2's own cleanup, on PostgreSQL.

Every variant runs on a fresh copy (CREATE DATABASE … TEMPLATE) of one dataset made by
`demo_data --scale`, in one run of this script, so the ratios compare like with like on a noisy
machine; all variants run in --repeat whole rounds (default 3) and medians are reported. Whole
commands are timed from process start; peak RSS comes from /usr/bin/time. Two floors frame the
figures: a plain DELETE, and this command's own optimistic batch statement (physical order) looped
inside the server (no client, no start-up), which no client of the same batches can beat. Our command
runs with ``--no-stats`` where it has that option (Airflow's records no statistics snapshot either).

    .venv/bin/python bench/gc_bench.py                        # 1M expired + 1M live, writes docs/benchmarks/gc.md
    .venv/bin/python bench/gc_bench.py --expired 10000 --live 10000 --no-write
    bash scripts/airflow_venv.sh && .venv/bin/python bench/gc_bench.py   # with the real `airflow state-store clean`

Without an Airflow virtualenv (scripts/airflow_venv.sh makes one), Airflow's algorithm is
replayed instead: all expired ids selected into Python, then DELETE … WHERE id IN (…), per batch.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
SERVER = "postgresql://postgres@127.0.0.1:5432"
TEMPLATE = "ssbench_template_{expired}_{live}"
COPY = "ssbench_run"

AIRFLOW_REPLAY = r"""
import sys, psycopg
url, batch = sys.argv[1], int(sys.argv[2])
with psycopg.connect(url) as conn:
    total = 0
    while True:
        sql = "SELECT id FROM task_state_store WHERE expires_at < now()" + (f" LIMIT {batch}" if batch else "")
        ids = [r[0] for r in conn.execute(sql).fetchall()]
        if not ids:
            break
        conn.execute("DELETE FROM task_state_store WHERE id = ANY(%s)", [ids])
        conn.commit()
        total += len(ids)
        if batch <= 0 or len(ids) < batch:
            break
print(total)
"""


def admin(sql: str) -> None:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def database_exists(name: str) -> bool:
    with psycopg.connect(f"{SERVER}/postgres") as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )


def timed(command: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS in MB and stdout of a whole process."""
    with tempfile.NamedTemporaryFile("r") as stats:
        started = time.perf_counter()
        done = subprocess.run(
            ["/usr/bin/time", "-o", stats.name, "-f", "%M", *command], cwd=ROOT, env=env, capture_output=True, text=True
        )
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"{command} failed: {done.stderr[-2000:]}")
        peak_kb = int(stats.read().strip().splitlines()[-1])
    return wall, peak_kb // 1024, done.stdout


def base_env(var_dir: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(var_dir),
        "STATESTORE_VAR_DIR": str(var_dir),
        "AIRFLOW_HOME": str(var_dir / "airflow_home"),
    }


def build_template(expired: int, live: int, env: dict[str, str], rebuild: bool) -> str:
    name = TEMPLATE.format(expired=expired, live=live)
    if database_exists(name) and not rebuild:
        return name
    admin(f'DROP DATABASE IF EXISTS "{name}"')
    admin(f'CREATE DATABASE "{name}"')
    dataset_env = {**env, "AIRFLOW_DATABASE_URL": f"{SERVER}/{name}"}
    manage("create_airflow_schema", env=dataset_env)
    total = expired + live
    started = time.perf_counter()
    manage(
        "demo_data",
        "--allow-any-database",
        "--scale",
        str(total),
        "--expired-fraction",
        str(expired / total),
        env=dataset_env,
    )
    print(f"dataset {name}: {total} scale rows in {time.perf_counter() - started:.1f}s", flush=True)
    with psycopg.connect(f"{SERVER}/{name}", autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE task_state_store")
    return name


def fresh_copy(template: str) -> str:
    admin(f'DROP DATABASE IF EXISTS "{COPY}"')
    # FILE_COPY: the copy is not WAL-logged, so no checkpoint of it lands inside a measurement
    admin(f'CREATE DATABASE "{COPY}" TEMPLATE "{template}" STRATEGY FILE_COPY')
    admin("CHECKPOINT")
    with psycopg.connect(f"{SERVER}/{COPY}") as conn:
        return conn.execute("SELECT count(*) FROM task_state_store WHERE expires_at < now()").fetchone()[0]


def run_plain(template: str) -> dict:
    expired = fresh_copy(template)
    with psycopg.connect(f"{SERVER}/{COPY}") as conn:
        started = time.perf_counter()
        deleted = conn.execute("DELETE FROM task_state_store WHERE expires_at < now()").rowcount
        conn.commit()
        seconds = time.perf_counter() - started
    assert deleted == expired
    return {
        "variant": "plain DELETE (floor)",
        "batch": "-",
        "wall": seconds,
        "delete": seconds,
        "rss": None,
        "rows": deleted,
    }


# state_store_clean's optimistic batch statement in physical order (gc/sql.py, _PgBatches), looped inside
# the server: no client, no round trips, no process start-up. What any client running these batches can at
# best approach.
BATCH_FLOOR = """DO $$
DECLARE cutoff timestamptz := now(); picked bigint; edge tid; last tid := '(0,0)';
BEGIN
  LOOP
    SET LOCAL synchronous_commit = off; SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off;
    SET LOCAL enable_seqscan = off; SET LOCAL max_parallel_workers_per_gather = 0;
    WITH batch AS MATERIALIZED (SELECT ctid FROM task_state_store WHERE ctid > last AND expires_at < cutoff
      LIMIT {batch}), gone AS (DELETE FROM task_state_store WHERE ctid = ANY(ARRAY(SELECT ctid FROM batch))
      AND expires_at < cutoff RETURNING 1)
    SELECT (SELECT count(*) FROM batch), (SELECT max(ctid) FROM batch) INTO picked, edge;
    COMMIT;
    last := edge;
    EXIT WHEN picked < {batch};
  END LOOP;
END $$"""


def run_batch_floor(template: str, batch: int) -> dict:
    expired = fresh_copy(template)
    with psycopg.connect(f"{SERVER}/{COPY}", autocommit=True) as conn:
        started = time.perf_counter()
        conn.execute(BATCH_FLOOR.format(batch=int(batch)))
        seconds = time.perf_counter() - started
        left = conn.execute("SELECT count(*) FROM task_state_store WHERE expires_at < now()").fetchone()[0]
    assert left == 0, f"the batch floor left {left} of {expired} expired rows"
    return {
        "variant": "the same optimistic batches looped in the server (floor)",
        "batch": batch,
        "wall": seconds,
        "delete": seconds,
        "rss": None,
        "rows": expired,
    }


def no_stats_option(env: dict[str, str]) -> list[str]:
    """``--no-stats`` where state_store_clean has it: Airflow's command records no statistics either."""
    usage = subprocess.run(
        [sys.executable, "manage.py", "state_store_clean", "--help"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    return ["--no-stats"] if "--no-stats" in usage.stdout else []


def run_ours(template: str, batch: int, env: dict[str, str], extra: list[str]) -> dict:
    expired = fresh_copy(template)
    command = [sys.executable, "manage.py", "state_store_clean", "--batch-size", str(batch), "--json", *extra]
    wall, rss, out = timed(command, {**env, "AIRFLOW_DATABASE_URL": f"{SERVER}/{COPY}"})
    summary = json.loads(out)
    assert summary["rows_deleted"] == expired, (summary, expired)
    return {
        "variant": f"statestore-admin state_store_clean ({summary.get('batch_order') or 'batches'})",
        "batch": batch,
        "wall": wall,
        "delete": summary["delete_seconds"],
        "rss": rss,
        "rows": summary["rows_deleted"],
    }


def run_airflow(template: str, batch: int, env: dict[str, str], airflow_venv: Path | None) -> dict:
    expired = fresh_copy(template)
    if airflow_venv:
        airflow_env = {
            **env,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://postgres@127.0.0.1:5432/{COPY}",
            "AIRFLOW__STATE_STORE__STATE_CLEANUP_BATCH_SIZE": str(batch),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        }
        wall, rss, _ = timed([str(airflow_venv / "bin" / "airflow"), "state-store", "clean"], airflow_env)
        variant = "airflow state-store clean (3.3.2)"
    else:
        wall, rss, _ = timed([sys.executable, "-c", AIRFLOW_REPLAY, f"{SERVER}/{COPY}", str(batch)], env)
        variant = "Airflow 3.3.2's algorithm, replayed"
    with psycopg.connect(f"{SERVER}/{COPY}") as conn:
        left = conn.execute("SELECT count(*) FROM task_state_store WHERE expires_at < now()").fetchone()[0]
    assert left == 0, f"{variant} left {left} of {expired} expired rows"
    return {"variant": variant, "batch": batch, "wall": wall, "delete": None, "rss": rss, "rows": expired}


def median_of(runs: list[dict]) -> dict:
    """One variant over the rounds: median times (with the spread), the highest peak RSS."""
    walls = sorted(r["wall"] for r in runs)
    deletes = [r["delete"] for r in runs if r["delete"] is not None]
    rss = [r["rss"] for r in runs if r["rss"] is not None]
    return {
        **runs[0],
        "wall": statistics.median(walls),
        "spread": (walls[0], walls[-1]),
        "delete": statistics.median(deletes) if deletes else None,
        "rss": max(rss) if rss else None,
    }


def table(results: list[dict]) -> str:
    lines = [
        "| variant | batch size | rows deleted | whole command (s), median (min–max) | deletion phase (s), median "
        "| peak RSS (MB), max |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        delete = f"{r['delete']:.2f}" if r["delete"] is not None else "-"
        rss = r["rss"] if r["rss"] is not None else "-"
        low, high = r["spread"]
        wall = f"{r['wall']:.2f} ({low:.2f}–{high:.2f})"
        lines.append(f"| {r['variant']} | {r['batch']} | {r['rows']} | {wall} | {delete} | {rss} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expired", type=int, default=1_000_000)
    parser.add_argument("--live", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000, help="expired rows of the memory comparison dataset")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the template datasets")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every variant; medians are reported")
    parser.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks/gc.md")
    args = parser.parse_args()
    venv = os.environ.get("AIRFLOW_VENV") or str(Path.home() / ".cache" / "statestore-admin" / "airflow-3.3.2-venv")
    airflow_venv = Path(venv) if (Path(venv) / "bin" / "airflow").exists() else None

    with tempfile.TemporaryDirectory(prefix="ssbench-") as tmp:
        env = base_env(Path(tmp))
        (Path(tmp) / "airflow_home").mkdir()
        manage("migrate", "--verbosity", "0", env=env)
        big = build_template(args.expired, args.live, env, args.rebuild)
        small = build_template(args.small, args.small, env, args.rebuild)
        extra = no_stats_option({**env, "AIRFLOW_DATABASE_URL": f"{SERVER}/{small}"})
        rounds = []
        for _ in range(args.repeat):  # whole rounds, so background noise hits every variant alike
            rounds.append([run_plain(big), run_batch_floor(big, 10_000)])
            for batch in (0, 10_000):
                rounds[-1].append(run_ours(big, batch, env, extra))
                rounds[-1].append(run_airflow(big, batch, env, airflow_venv))
            rounds[-1] += [run_ours(small, batch, env, extra) for batch in (0, 10_000)]
    admin(f'DROP DATABASE IF EXISTS "{COPY}"')
    merged = [median_of(same) for same in zip(*rounds, strict=True)]
    results, memory = merged[:-2], merged[-2:]

    plain, floor = results[0]["wall"], results[1]["wall"]
    ours = {r["batch"]: r for r in results if r["variant"].startswith("statestore")}
    theirs = {r["batch"]: r for r in results if r["variant"].startswith(("airflow", "Airflow"))}
    # An empty run is process start-up plus bookkeeping: the least any `manage.py` command costs.
    startup = memory[1]["wall"] - memory[1]["delete"]
    best = floor + startup
    ratios = [
        f"- deletion phase at batch size 0 / plain DELETE: {ours[0]['delete'] / plain:.2f} (target ≤ 1.3)",
        *[
            f"- {theirs[b]['variant']} / ours, whole command, batch size {b}: "
            f"{theirs[b]['wall'] / ours[b]['wall']:.1f}× (target ≥ 5×)"
            for b in (0, 10_000)
        ],
        *[
            f"- peak RSS at batch size {b}: {ours[b]['rss']} MB with {ours[b]['rows']} expired rows, "
            f"{m['rss']} MB with {m['rows']} (target < 100 MB, flat)"
            for b, m in zip((0, 10_000), memory, strict=True)
        ],
        f"- deletion phase at batch size 10000 / the same batches looped in the server: "
        f"{ours[10_000]['delete'] / floor:.2f}",
        f"- best case at batch size 10000 (server loop {floor:.2f} s + start-up of an empty run {startup:.2f} s "
        f"= {best:.2f} s): {theirs[10_000]['wall'] / best:.1f}× faster than {theirs[10_000]['variant']}",
    ]
    report = "\n".join(
        [
            f"### {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {args.expired} expired + {args.live} live rows",
            "",
            f"Machine: {platform.platform()}, {os.cpu_count()} cores; PostgreSQL at 127.0.0.1:5432. "
            f"Command: `.venv/bin/python bench/gc_bench.py --expired {args.expired} --live {args.live} "
            f"--repeat {args.repeat}`. Every figure is the median of {args.repeat} rounds of all variants.",
            "",
            table(results + memory),
            "",
            *ratios,
            "",
        ]
    )
    print(report)
    if not args.no_write:
        out = ROOT / "docs" / "benchmarks" / "gc.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        if not out.exists():
            out.write_text("# `state_store_clean` benchmarks\n\nNewest first. Written by `bench/gc_bench.py`.\n\n")
        head, _, rest = out.read_text().partition("\n### ")
        out.write_text(head.rstrip() + "\n\n" + report + ("\n### " + rest if rest else ""))


if __name__ == "__main__":
    main()
