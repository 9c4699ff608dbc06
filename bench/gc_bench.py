"""Benchmark `state_store_clean` beside Airflow 3.3.2's `airflow state-store clean`, a plain DELETE and the same
batches looped inside the server, on PostgreSQL, for each layout of the expired rows and each batch size. With
``--series 3.4``, on Airflow 3.4.0b2's schema beside 3.4.0b2's command.

Layouts (``--layout``, both by default; ``demo_data --scale --layout``): ``spread``, a share of every run's keys
expired, so that expired rows are on every page with their expiry in no order; ``clustered``, the first runs
written expired whole, contiguous in id and on disk and expiring in the order written (old runs expire together:
the common case of a retention period). Batch sizes (``--batch``): 0, 1,000 and 10,000 by default, for ours and
Airflow's alike.

Every variant runs on a fresh copy (CREATE DATABASE … TEMPLATE) of one dataset per layout, in one run of this
script, in ``--repeat`` whole rounds (default 3; medians are reported), ours and Airflow's in turn at each batch
size, so that the ratios compare like with like on a shared, noisy machine; the load average is recorded. Whole
commands are timed from process start; peak RSS comes from /usr/bin/time. Two floors frame the figures: a plain
DELETE of the same rows, and our optimistic batches in the walk our command chooses, looped inside the server by
the very DO block it runs them in (``gc/sql.py``, ``_PgBatches.run_in_server``), in one piece: no client, no
round trips, no process start-up.
Our command runs with ``--no-stats`` (Airflow's records no statistics snapshot either).

    bash scripts/airflow_venv.sh 3.3.2        # Airflow's real CLI, in ~/.cache/statestore-admin (once)
    .venv/bin/python bench/gc_bench.py        # 1M expired + 1M live, both layouts, writes docs/benchmarks/gc.md
    .venv/bin/python bench/gc_bench.py --expired 10000 --live 10000 --layout clustered --repeat 1 --no-write
    bash scripts/airflow_venv.sh 3.4.0b2 && .venv/bin/python bench/gc_bench.py --series 3.4

Without an Airflow virtualenv, Airflow's algorithm is replayed instead: all expired ids selected into Python,
then DELETE … WHERE id IN (…), per batch.
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
TEMPLATE = "ssbench_{layout}_{expired}_{live}{series}"
AIRFLOW_VERSIONS = {"3.3": "3.3.2", "3.4": "3.4.0b2"}
COPY = "ssbench_run"
LAYOUTS = ("spread", "clustered")  # demo_data --layout: where the expired rows are
BATCHES = (0, 1_000, 10_000)
TARGET_RATIO, TARGET_DELETE, TARGET_RSS = 5.0, 1.3, 100

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

# Our optimistic batches as state_store_clean runs them on this copy, in the walk it would choose: the DO block
# that loops them inside the server (here without its bounds of time and count), and the session's settings.
OUR_BATCHES = r"""
import json, sys
import django
django.setup()
from django.db import connections
from django.utils import timezone
from statestore_admin import gc
from statestore_admin.gc import sql
plan = gc.GcPlan(cutoff=timezone.now(), batch_size=int(sys.argv[1]))
connection = connections["airflow"]
batches = sql._PgBatches(plan, sql._batch_order(connection, plan))
block = batches.run_in_server(connection, None, 86400)
print(json.dumps({"order": batches.order, "block": block, "settings": batches.settings(False)}))
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
    # The dashboard database named, not left to the default: that depends on whether the Airflow database
    # is the embedded one (migrate runs without AIRFLOW_DATABASE_URL, the commands with it).
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(var_dir),
        "STATESTORE_VAR_DIR": str(var_dir),
        "DATABASE_URL": f"sqlite:///{var_dir / 'dashboard.sqlite3'}",
        "SECRET_KEY": "gc-bench-" + "x" * 50,
        "AIRFLOW_HOME": str(var_dir / "airflow_home"),
    }


def build_template(layout: str, expired: int, live: int, env: dict[str, str], rebuild: bool, series: str) -> str:
    name = TEMPLATE.format(layout=layout, expired=expired, live=live, series="" if series == "3.3" else "_34")
    if database_exists(name) and not rebuild:
        return name
    admin(f'DROP DATABASE IF EXISTS "{name}"')
    admin(f'CREATE DATABASE "{name}"')
    dataset_env = {**env, "AIRFLOW_DATABASE_URL": f"{SERVER}/{name}", "AIRFLOW_FIXTURE_SERIES": series}
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
        "--layout",
        layout,
        env=dataset_env,
    )
    print(f"dataset {name}: {total} scale rows in {time.perf_counter() - started:.1f}s", flush=True)
    with psycopg.connect(f"{SERVER}/{name}", autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE task_state_store")
    return name


def fresh_copy(template: str) -> int:
    """A fresh copy of ``template`` as ``COPY``; the number of its expired rows."""
    admin(f'DROP DATABASE IF EXISTS "{COPY}"')
    # FILE_COPY: the copy is not WAL-logged, so no checkpoint of it lands inside a measurement
    admin(f'CREATE DATABASE "{COPY}" TEMPLATE "{template}" STRATEGY FILE_COPY')
    admin("CHECKPOINT")
    with psycopg.connect(f"{SERVER}/{COPY}") as conn:
        return conn.execute("SELECT count(*) FROM task_state_store WHERE expires_at < now()").fetchone()[0]


def left_expired() -> int:
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
    return {"who": "plain", "batch": "-", "wall": seconds, "delete": seconds, "rss": None, "rows": deleted}


def run_batch_floor(template: str, batch: int, env: dict[str, str]) -> dict:
    """Our batches looped inside the server: no client between them, no process start-up."""
    expired = fresh_copy(template)
    env = {**env, "AIRFLOW_DATABASE_URL": f"{SERVER}/{COPY}", "DJANGO_SETTINGS_MODULE": "statestore_admin.settings"}
    ours = json.loads(
        subprocess.run(
            [sys.executable, "-c", OUR_BATCHES, str(batch)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    with psycopg.connect(f"{SERVER}/{COPY}", autocommit=True) as conn:
        for name, value in ours["settings"].items():
            conn.execute("SELECT set_config(%s, %s, false)", [name, value])
        started = time.perf_counter()
        conn.execute(ours["block"])
        seconds = time.perf_counter() - started
    left = left_expired()
    assert left == 0, f"the batch floor left {left} of {expired} expired rows"
    return {"who": "floor", "batch": batch, "order": ours["order"], "wall": seconds, "delete": seconds, "rss": None}


def run_ours(template: str, batch: int, env: dict[str, str]) -> dict:
    expired = fresh_copy(template)
    command = [sys.executable, "manage.py", "state_store_clean", "--batch-size", str(batch), "--json", "--no-stats"]
    wall, rss, out = timed(command, {**env, "AIRFLOW_DATABASE_URL": f"{SERVER}/{COPY}"})
    summary = json.loads(out)
    assert summary["rows_deleted"] == expired, (summary, expired)
    assert left_expired() == 0
    return {
        "who": "ours",
        "batch": batch,
        "order": summary.get("batch_order") or "",
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
    else:
        wall, rss, _ = timed([sys.executable, "-c", AIRFLOW_REPLAY, f"{SERVER}/{COPY}", str(batch)], env)
    left = left_expired()
    assert left == 0, f"Airflow's cleanup left {left} of {expired} expired rows"
    return {"who": "airflow", "batch": batch, "wall": wall, "delete": None, "rss": rss, "rows": expired}


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


def memory_batches(batches: list[int]) -> list[int]:
    """The batch sizes whose peak RSS is compared between the large and the small dataset."""
    return sorted({min(batches), max(batches)})


def one_round(layout: str, big: str, small: str, batches: list[int], env: dict, airflow_venv: Path | None) -> dict:
    """Every variant once on ``layout``'s datasets, keyed by (who, batch); ours and Airflow's in turn."""
    runs = [run_plain(big)]
    for batch in batches:
        runs.append(run_ours(big, batch, env))
        runs.append(run_airflow(big, batch, env, airflow_venv))
        if batch:
            runs.append(run_batch_floor(big, batch, env))
    runs += [{**run_ours(small, batch, env), "who": "ours small"} for batch in memory_batches(batches)]
    print(f"{layout}: " + ", ".join(f"{r['who']} {r['batch']} {r['wall']:.2f}s" for r in runs), flush=True)
    return {(r["who"], r["batch"]): r for r in runs}


def seconds(r: dict) -> str:
    low, high = r["spread"]
    return f"{r['wall']:.2f} ({low:.2f}–{high:.2f})"


def layout_report(layout: str, results: dict, batches: list[int], airflow_name: str) -> list[str]:
    plain = results[("plain", "-")]["wall"]
    lines = [
        f"#### {layout}",
        "",
        f"| batch size | ours, whole command (s) | ours, deletion (s) | ours, walk | ours, peak RSS (MB) "
        f"| {airflow_name} (s) | Airflow's peak RSS (MB) | Airflow / ours (target ≥ {TARGET_RATIO:g}×) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for batch in batches:
        ours, theirs = results[("ours", batch)], results[("airflow", batch)]
        ratio = theirs["wall"] / ours["wall"]
        mark = "" if ratio >= TARGET_RATIO else " **short**"
        lines.append(
            f"| {batch} | {seconds(ours)} | {ours['delete']:.2f} | {ours['order']} | {ours['rss']} | {seconds(theirs)} "
            f"| {theirs['rss']} | {ratio:.1f}×{mark} |"
        )
    lines += [
        "",
        f"- plain DELETE of the same {results[('plain', '-')]['rows']} rows: {seconds(results[('plain', '-')])} s",
    ]
    if 0 in batches:
        ratio = results[("ours", 0)]["delete"] / plain
        lines.append(f"- deletion phase at batch size 0 / plain DELETE: {ratio:.2f} (target ≤ {TARGET_DELETE:g})")
    for batch in [b for b in batches if b]:
        floor, ours = results[("floor", batch)], results[("ours", batch)]
        lines.append(
            f"- batch size {batch}: our batches looped in the server ({floor['order']} walk) {seconds(floor)} s, "
            f"{floor['wall'] / plain:.2f}× the plain DELETE; our deletion phase {ours['delete'] / floor['wall']:.2f}× "
            f"that loop, {ours['delete'] / plain:.2f}× the plain DELETE; whole command minus deletion "
            f"{ours['wall'] - ours['delete']:.2f} s"
        )
    for batch in memory_batches(batches):
        many, few = results[("ours", batch)], results[("ours small", batch)]
        lines.append(
            f"- peak RSS at batch size {batch}: {many['rss']} MB with {many['rows']} expired rows, {few['rss']} MB "
            f"with {few['rows']} (target < {TARGET_RSS} MB, flat); an empty-ish run {seconds(few)} s"
        )
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expired", type=int, default=1_000_000)
    parser.add_argument("--live", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000, help="expired rows of the memory comparison dataset")
    parser.add_argument("--layout", action="append", choices=LAYOUTS, help="repeatable; default: both")
    parser.add_argument("--batch", action="append", type=int, help=f"repeatable; default: {BATCHES}")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the template datasets")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every variant; medians are reported")
    parser.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks/gc.md")
    parser.add_argument("--series", choices=tuple(AIRFLOW_VERSIONS), default="3.3", help="Airflow's schema and CLI")
    args = parser.parse_args()
    layouts, batches = args.layout or list(LAYOUTS), sorted(set(args.batch or BATCHES))
    version = AIRFLOW_VERSIONS[args.series]
    default_venv = Path.home() / ".cache" / "statestore-admin" / f"airflow-{version}-venv"
    venv = os.environ.get("AIRFLOW_VENV") or str(default_venv)
    airflow_venv = Path(venv) if (Path(venv) / "bin" / "airflow").exists() else None
    airflow_name = (
        f"airflow state-store clean ({version})" if airflow_venv else f"Airflow {version}'s algorithm, replayed"
    )

    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="ssbench-") as tmp:
        env = base_env(Path(tmp))
        (Path(tmp) / "airflow_home").mkdir()
        manage("migrate", "--verbosity", "0", env=env)
        datasets = {
            layout: (
                build_template(layout, args.expired, args.live, env, args.rebuild, args.series),
                build_template(layout, args.small, args.small, env, args.rebuild, args.series),
            )
            for layout in layouts
        }
        rounds = {layout: [] for layout in layouts}
        for _ in range(args.repeat):  # whole rounds, so background noise hits every variant alike
            for layout in layouts:
                rounds[layout].append(one_round(layout, *datasets[layout], batches, env, airflow_venv))
                loads.append(os.getloadavg()[0])
    admin(f'DROP DATABASE IF EXISTS "{COPY}"')
    merged = {layout: {key: median_of([r[key] for r in rs]) for key in rs[0]} for layout, rs in rounds.items()}

    command = f".venv/bin/python bench/gc_bench.py --expired {args.expired} --live {args.live} --repeat {args.repeat}"
    command += f" --series {args.series}" if args.series != "3.3" else ""
    command += "".join(f" --layout {layout}" for layout in args.layout or [])
    command += "".join(f" --batch {batch}" for batch in args.batch or [])
    report = [
        f"### {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {args.expired} expired + {args.live} live rows, "
        f"{' and '.join(layouts)}, Airflow {args.series}'s schema",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} cores; PostgreSQL at 127.0.0.1:5432. Command: "
        f"`{command}`. Every figure is the median of {args.repeat} rounds of all variants (min–max in brackets); "
        f"load average (1 min) during the run {min(loads):.1f}–{max(loads):.1f}.",
        "",
    ]
    for layout in layouts:
        report += layout_report(layout, merged[layout], batches, airflow_name)
    text = "\n".join(report)
    print(text)
    if not args.no_write:
        out = ROOT / "docs" / "benchmarks" / "gc.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        if not out.exists():
            out.write_text("# `state_store_clean` benchmarks\n\nNewest first. Written by `bench/gc_bench.py`.\n\n")
        head, _, rest = out.read_text().partition("\n### ")
        out.write_text(head.rstrip() + "\n\n" + text + ("\n### " + rest if rest else ""))


if __name__ == "__main__":
    main()
