"""A key's story across runs and two runs compared (issue 23), server-side, on the deployments of
``bench/deployment.py`` (PostgreSQL, Airflow 3.3.2's schema, no index added).

For each size a fresh process points the dashboard at ``ssbench_deploy_{size}`` (built if missing), signs in a
superuser and requests the two pages with Django's test client: a warm-up (its Airflow queries counted and, with
``--explain``, their plans checked for reads of a whole large table), then ``--repeat`` timed requests; the median
is reported. Besides the deployment's own DAGs (100 runs, 50 keys a run), the child adds, inside a transaction it
rolls back (the deployment is left as built), the shapes that the bounds are for:

- ``bench_long``: one DAG with ``--long-runs`` runs (a key in every run; another only in the oldest run);
- ``bench_wide``: two runs with ``--wide-keys`` keys each (10% of the values changed, 1% added, 1% removed).

    .venv/bin/python bench/story_bench.py --sizes 20k,1m --explain --write
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
from datetime import UTC, datetime
from pathlib import Path

import deployment  # bench/deployment.py: this script's folder is on sys.path when it runs

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "benchmarks" / "pages.md"
BEGIN, END = "<!-- story-bench: written by bench/story_bench.py -->", "<!-- /story-bench -->"

LONG_DAG, WIDE_DAG = "bench_long", "bench_wide"
ADD_LONG = """
INSERT INTO dag_run (id, dag_id, run_id, state, run_type, logical_date, run_after, start_date, end_date, queued_at,
  created_at, updated_at, clear_number, conf, span_status, log_template_id, backfill_id, bundle_version)
SELECT (SELECT max(id) FROM dag_run) + %(runs)s - n + 1, %(dag)s,
  'scheduled__' || to_char(now() - n * interval '1 hour', 'YYYY-MM-DD"T"HH24:MI:SS'), 'success',
  'scheduled', now() - n * interval '1 hour', now() - n * interval '1 hour', now() - n * interval '1 hour',
  now() - n * interval '1 hour', now() - n * interval '1 hour', now(), now(), 0, NULL, 'not_started', NULL, NULL, NULL
FROM generate_series(%(runs)s, 1, -1) AS n
"""  # ids given: the deployment gave its own, so the sequence is behind
ADD_LONG_KEYS = """
INSERT INTO task_state_store (dag_run_id, dag_id, run_id, task_id, map_index, key, value, updated_at, expires_at)
SELECT r.id, r.dag_id, r.run_id, 'extract', -1, 'watermark',
  json_build_object('rows_loaded', 1000 + r.id %% 977, 'high_water', r.run_after)::text, r.run_after, NULL::timestamptz
FROM dag_run r WHERE r.dag_id = %(dag)s
UNION ALL
SELECT r.id, r.dag_id, r.run_id, 'extract', -1, 'first_run_only', '"once"', r.run_after, NULL::timestamptz
FROM (SELECT id, dag_id, run_id, run_after FROM dag_run WHERE dag_id = %(dag)s ORDER BY id LIMIT 1) r
"""
ADD_WIDE_KEYS = """
INSERT INTO task_state_store (dag_run_id, dag_id, run_id, task_id, map_index, key, value, updated_at, expires_at)
SELECT r.id, r.dag_id, r.run_id, 'task_' || (k %% 20), -1, 'key_' || k,
  CASE WHEN r.nth = 2 AND k %% 10 = 0 THEN '{"n": ' || (k + 1) || '}' ELSE '{"n": ' || k || '}' END, now(), NULL
FROM (SELECT id, dag_id, run_id, row_number() OVER (ORDER BY id) AS nth FROM dag_run WHERE dag_id = %(dag)s) r,
  generate_series(1, %(keys)s) AS k
WHERE NOT (r.nth = 1 AND k %% 100 = 1) AND NOT (r.nth = 2 AND k %% 100 = 2)
"""


def pages(sample: dict) -> list[tuple[str, str]]:
    from urllib.parse import urlencode

    def compare(dag, a, b, cursor=None):
        return f"/dags/{dag}/compare/?" + urlencode({"a": a, "b": b, **({"cursor": cursor} if cursor else {})})

    return [
        ("story of a key, a DAG of 100 runs", f"/keys/task/{sample['key_id']}/story/"),
        (
            f"story of a key, a DAG of {sample['long_runs']:,} runs: first page",
            f"/keys/task/{sample['long_key']}/story/",
        ),
        ("the same: the next page", f"/keys/task/{sample['long_key']}/story/?cursor={sample['long_cursor']}"),
        (
            f"story of a key only in the oldest of {sample['long_runs']:,} runs: first page (a window, nothing found)",
            f"/keys/task/{sample['sparse_key']}/story/",
        ),
        ("compare two runs of 50 keys", compare(sample["dag_id"], sample["run_a"], sample["run_b"])),
        (
            f"compare two runs of {sample['wide_keys']:,} keys: first page",
            compare(WIDE_DAG, sample["wide_a"], sample["wide_b"]),
        ),
        ("the same: the next page", compare(WIDE_DAG, sample["wide_a"], sample["wide_b"], sample["wide_cursor"])),
    ]


def child(size: str, repeat: int, explain: bool, long_runs: int, wide_keys: int) -> dict:
    import time

    import django

    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "statestore_admin.settings"
    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connections, transaction
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from pages_bench import seq_scans

    from statestore_admin.access.scopes import Scope
    from statestore_admin.airflow.models import DagRun, TaskStateStore
    from statestore_admin.state import selectors

    call_command("migrate", verbosity=0, interactive=False)
    user = get_user_model().objects.create_superuser("bench", "", "pw-bench-superuser-1")
    client = Client()
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    alias = settings.AIRFLOW_DB_ALIAS
    airflow = connections[alias]
    results = []
    with transaction.atomic(using=alias):
        started = time.perf_counter()
        with airflow.cursor() as cursor:
            cursor.execute(ADD_LONG, {"dag": LONG_DAG, "runs": long_runs})
            cursor.execute(ADD_LONG.replace("interval '1 hour'", "interval '1 day'"), {"dag": WIDE_DAG, "runs": 2})
            cursor.execute(ADD_LONG_KEYS, {"dag": LONG_DAG})
            cursor.execute(ADD_WIDE_KEYS, {"dag": WIDE_DAG, "keys": wide_keys})
            cursor.execute("ANALYZE dag_run")
            cursor.execute("ANALYZE task_state_store")
        added_seconds = time.perf_counter() - started
        shape = deployment.SIZES[size]
        dag_id = deployment.TEAMS[(shape.dags // 2) % 10] + f"_{shape.dags // 2:04d}"
        run_b, run_a = DagRun.objects.filter(dag_id=dag_id).order_by("-id")[:2]
        wide_a, wide_b = DagRun.objects.filter(dag_id=WIDE_DAG).order_by("id")
        long_key = TaskStateStore.objects.filter(dag_id=LONG_DAG, key="watermark").order_by("-id").first()
        sample = {
            "dag_id": dag_id,
            "run_a": run_a.run_id,
            "run_b": run_b.run_id,
            "key_id": TaskStateStore.objects.filter(dag_run=run_b, task_id="extract", key="watermark").first().pk,
            "long_runs": long_runs,
            "long_key": long_key.pk,
            "long_cursor": selectors.key_story(long_key, scope=Scope()).next_cursor,
            "sparse_key": TaskStateStore.objects.get(dag_id=LONG_DAG, key="first_run_only").pk,
            "wide_keys": wide_keys,
            "wide_a": wide_a.run_id,
            "wide_b": wide_b.run_id,
            "wide_cursor": selectors.compare_runs(wide_a, wide_b).next_cursor,
        }
        for label, url in pages(sample):
            with CaptureQueriesContext(airflow) as captured:
                response = client.get(url)
            results.append(
                {
                    "label": label,
                    "url": url,
                    "status": response.status_code,
                    "queries": len(captured.captured_queries),
                    "seq_scans": sorted(seq_scans(airflow, [q["sql"] for q in captured.captured_queries]))
                    if explain
                    else None,
                    "times": [],
                }
            )
        for _ in range(repeat):
            for result in results:
                started = time.perf_counter()
                response = client.get(result["url"])
                result["times"].append(time.perf_counter() - started)
                result["status"] = max(result["status"], response.status_code)
        transaction.set_rollback(True, using=alias)  # the deployment stays as built
    for result in results:
        result["median"] = statistics.median(result["times"])
    return {"size": size, "sample": sample, "pages": results, "added_seconds": added_seconds}


def run_size(size: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="ssbench-story-") as tmp:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": tmp,
            "STATESTORE_VAR_DIR": tmp,
            "AIRFLOW_HOME": tmp,
            "AIRFLOW_DATABASE_URL": deployment.url(deployment.database_name(size)),
            "DATABASE_URL": f"sqlite:///{tmp}/dashboard.sqlite3",
            "SECRET_KEY": "story-bench-only-not-secret",
            "ALLOWED_HOSTS": "testserver",
            "SECURE_COOKIES": "0",
            "AIRFLOW_DATABASE_QUERY_TIMEOUT": "600",
            "STATIC_ROOT": f"{tmp}/static",
            "LOG_LEVEL": "ERROR",
        }
        Path(f"{tmp}/static").mkdir()
        command = [sys.executable, __file__, "--child", size, "--repeat", str(args.repeat), "--out", f"{tmp}/out.json"]
        command += ["--long-runs", str(args.long_runs), "--wide-keys", str(args.wide_keys)]
        if args.explain:
            command.append("--explain")
        print(f"{size}: timing the story and the comparison ({args.repeat} passes after a warm-up)", flush=True)
        subprocess.run(command, cwd=ROOT, env=env, check=True)
        return json.loads(Path(f"{tmp}/out.json").read_text())


def table(runs: list[dict]) -> str:
    sizes = [r["size"] for r in runs]
    lines = [
        "| page | " + " | ".join(sizes) + " | queries | reads a large table whole? |",
        "|---|" + "---|" * len(sizes) + "---|---|",
    ]
    for n, page in enumerate(runs[-1]["pages"]):
        cells = []
        for r in runs:
            p = r["pages"][n]
            cells.append(f"{p['median'] * 1000:.0f} ms" + ("" if p["status"] == 200 else f" ({p['status']})"))
        scans = page["seq_scans"]
        verdict = "not checked" if scans is None else (", ".join(scans) if scans else "no")
        queries = " / ".join(str(r["pages"][n]["queries"]) for r in runs)
        lines.append(f"| {page['label']} | " + " | ".join(cells) + f" | {queries} | {verdict} |")
    return "\n".join(lines)


def section(runs: list[dict], args: argparse.Namespace, builds: dict) -> str:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    deployments = "\n".join(
        f"| `{deployment.database_name(size)}` | {info.get('rows', {}).get('task_state_store', 0):,} | "
        f"{info.get('rows', {}).get('dag_run', 0):,} | {info.get('database_size', '?')} | "
        f"{info.get('build_seconds', '?')} s |"
        for size, info in builds.items()
    )
    command = (
        f"--sizes {','.join(r['size'] for r in runs)}{' --explain' if args.explain else ''} --repeat {args.repeat}"
    )
    return f"""{BEGIN}
## A key's story across runs and two runs compared

Written by `bench/story_bench.py` (its docstring says what it adds, in a transaction it rolls back, to the
deployments above: a DAG of {args.long_runs:,} runs, two runs of {args.wide_keys:,} keys each). Measured {when} on
{platform.platform()}, {os.cpu_count()} cores shared with other work; code at commit {commit.stdout.strip()}.
Command: `.venv/bin/python bench/story_bench.py {command} --write`.
Server time with Django's test client, median of {args.repeat} requests after a warm-up; queries on the Airflow
database in the warm-up; "reads a large table whole?" from `EXPLAIN` of each of those queries.

| deployment | task keys | DAG runs | size on disk | build time |
|---|---|---|---|---|
{deployments}

{table(runs)}

How they are bounded, whatever the size of the store:

- **The story** reads one window of runs a page: the ids of at most 500 runs of the DAG (`dag_run` by
  `dag_id`, newest first by primary key; 100 for a key in an Airflow 3.4 region, whose runs' regions of the
  slot are read too), then the key in those runs through Airflow's unique key `(dag_run_id, task_id,
  [region_id,] map_index, key)`: one index probe per run, at most 26 rows (25 shown, one more for the last
  one's diff). It never reads the DAG's other keys. When the window ends before 25 runs with the key were
  found, the page says how many runs it looked at and the next page continues after them: a key written in
  one run out of thousands costs a page per 500 runs, each as fast as the first. Values are read whole only up
  to 64 KiB (for the diff and the lines), longer ones as their first 160 characters.
- **The comparison** reads at most 1,000 keys of each run a page, in the order of that same unique key (one
  range of it per run, with a LIMIT), and compares up to the first position both runs were read to; the next
  page continues from there. Values are compared whole up to 16 KiB, longer ones by size and first characters.
  A run of a million keys is a thousand pages, each of the same cost; the page says when it stopped.
- Neither page counts anything: the figures on the page are of what it read.

The deployments are Airflow 3.3.2's schema; on 3.4's the same queries run on the unique key
`(dag_run_id, task_id, region_id, region_index, key)` (the tests run both pages on both schemas).
{END}"""


def write(text: str) -> None:
    doc = OUT.read_text()
    if BEGIN in doc and END in doc:
        doc = doc[: doc.index(BEGIN)] + text + doc[doc.index(END) + len(END) :]
    else:
        marker = "\n## Before issue 13"
        at = doc.index(marker) if marker in doc else len(doc)
        doc = doc[:at].rstrip("\n") + "\n\n" + text + "\n" + doc[at:]
    OUT.write_text(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="20k,1m")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--long-runs", type=int, default=20_000)
    parser.add_argument("--wide-keys", type=int, default=100_000)
    parser.add_argument("--child")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        result = child(args.child, args.repeat, args.explain, args.long_runs, args.wide_keys)
        Path(args.out).write_text(json.dumps(result))
        return
    sizes = args.sizes.split(",")
    builds = {size: deployment.build(size) for size in sizes}
    runs = [run_size(size, args) for size in sizes]
    text = section(runs, args, builds)
    print(text)
    if args.write:
        write(text)


if __name__ == "__main__":
    main()
