"""Every dashboard page and API endpoint, server-side, on a small and a large Airflow deployment.

For each size (``bench/deployment.py`` builds the deployment ``ssbench_deploy_{size}`` if it is missing,
and reuses it otherwise), a fresh process points the dashboard at it (``AIRFLOW_DATABASE_URL``) with a
throwaway dashboard database (SQLite in a temporary folder, migrated), signs in a superuser and requests
every page with Django's test client: one warm-up pass over all of them (whose queries on the Airflow
database are captured and counted), then ``--repeat`` timed passes; the median is reported. Only server
time is measured (no network, no browser). The Airflow query deadline is raised to ``--query-timeout``
(default 600 s) so that slow pages are measured instead of answering 503; any time above the default
deadline (30 s) is marked.

    .venv/bin/python bench/pages_bench.py                          # 20k and 10m, prints the table
    .venv/bin/python bench/pages_bench.py --sizes 20k,1m --explain --write
    .venv/bin/python bench/pages_bench.py --user-scope 'etl_*'     # as an Operator scoped to etl_* DAGs

``--explain`` runs ``EXPLAIN (FORMAT JSON)`` of every captured Airflow query at the largest size and flags
sequential scans of ``task_state_store`` and ``asset_state_store``. ``--write`` puts the result (with the
deployments' build times) at the top of docs/benchmarks/pages.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import deployment  # bench/deployment.py: this script's folder is on sys.path when it runs
import shape34

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "benchmarks" / "pages.md"
DEFAULT_DEADLINE = 30.0
LARGE_TABLES = ("task_state_store", "asset_state_store", "task_instance", "dag_run", "asset")
STATE_TABLES = ("task_state_store", "asset_state_store")
ABSENT_KEY = "no_such_key_zz"
BLOCKING = ("Sort", "Aggregate", "Hash", "Materialize", "WindowAgg", "SetOp", "Recursive Union")


def _api(dag: str, run_id: str, task: str) -> str:
    from urllib.parse import quote

    return f"/api/v2/dags/{quote(dag, safe='')}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task}/state-store"


def pages(sample: dict) -> list[tuple[str, str]]:
    """(label, URL) of every page and endpoint, for one deployment's sample objects."""
    dag, run_pk, run_id, task, key_id, asset = (
        sample[k] for k in ("dag_id", "run_pk", "run_id", "task_id", "key_id", "asset_id")
    )
    ti = _api(dag, run_id, task)
    return [
        ("overview `/`", "/"),
        ("largest values `/overview/largest/`", "/overview/largest/"),
        ("DAGs `/dags/`", "/dags/"),
        ("runs of a DAG `/dags/<dag>/`", f"/dags/{dag}/"),
        ("a run `/runs/<pk>/`", f"/runs/{run_pk}/"),
        ("a task instance `/runs/<pk>/tasks/<task>/`", f"/runs/{run_pk}/tasks/{task}/"),
        ("a task key `/keys/task/<id>/`", f"/keys/task/{key_id}/"),
        ("assets `/assets/`", "/assets/"),
        ("an asset `/assets/<id>/`", f"/assets/{asset}/"),
        (f"search key contains `{ABSENT_KEY}` (no match)", f"/search/?key={ABSENT_KEY}&match=contains"),
        ("search key prefix `check`", "/search/?key=check&match=prefix"),
        ("search key exact `rows_loaded`", "/search/?key=rows_loaded&match=exact"),
        ("search status expired", "/search/?status=expired"),
        ("search key contains `check` in a DAG", f"/search/?key=check&match=contains&dag_id={dag}"),
        ("audit `/audit/`", "/audit/"),
        ("API stats", "/api/statestore/v1/stats"),
        ("API GC dry run", "/api/statestore/v1/gc/dry-run"),
        (f"API search task keys `{ABSENT_KEY}`", f"/api/statestore/v1/search/task-keys?key={ABSENT_KEY}"),
        ("API v2 task instance's keys", ti),
        ("API v2 one task key", f"{ti}/watermark"),
        ("API v2 asset's keys", f"/api/v2/assets/{asset}/state-store"),
        ("insights `/insights/`", "/insights/"),
        ("API insights series", "/api/statestore/v1/insights/series"),
        ("API insights top", "/api/statestore/v1/insights/top"),
        *(region_pages(sample) if "loop" in sample else []),
    ]


def region_pages(sample: dict) -> list[tuple[str, str]]:
    """Airflow 3.4: the pages and reads that address dynamic regions (``bench/shape34.py``'s shape)."""
    from urllib.parse import quote

    dag, run_pk, run_id, loop, expansion, key = (
        sample[k] for k in ("dag_id", "run_pk", "run_id", "loop", "expansion", "region_key_id")
    )
    long_pk, long_run, long_loop = (sample[k] for k in ("long_run_pk", "long_run_id", "long_loop"))
    long_dag = shape34.LONG_LOOP_DAG
    work, step, group = (
        _api(dag, run_id, "refine.work"),
        _api(dag, run_id, "refine.step"),
        _api(dag, run_id, "per_table.load"),
    )
    return [
        (f"a run with a loop of {shape34.LONG_LOOP} iterations, all keyed", f"/runs/{long_pk}/"),
        ("its iterations 250–299 (a gap opened)", f"/runs/{long_pk}/iterations/?loop={long_loop}&from=250&to=299"),
        ("a task in loop iteration 1", f"/runs/{run_pk}/tasks/refine.step/?region_id={loop}&map_index=1"),
        ("a mapped task's expansion in iteration 1", f"/runs/{run_pk}/tasks/refine.work/?region_id={expansion}"),
        ("a key in an expansion `/keys/task/<id>/`", f"/keys/task/{key}/"),
        (
            "search: a run's loop iteration 1",
            f"/search/?dag_id={dag}&dag_match=exact&run_id={quote(run_id, safe='')}&loop=refine&iteration=1",
        ),
        ("API v2 keys in an expansion (region_id, region_index)", f"{work}?region_id={expansion}&region_index=0"),
        ("API v2 one key in an expansion", f"{work}/cursor?region_id={expansion}&region_index=0"),
        ("API v2 keys of loop iteration 1 (region_id, region_index)", f"{step}?region_id={loop}&region_index=1"),
        ("API v2 keys of a mapped group's task (map_index)", f"{group}?map_index=2"),
        (
            "API v2 keys of iteration 250 of the long loop",
            f"{_api(long_dag, long_run, 'refine.step')}?region_id={long_loop}&region_index=250",
        ),
    ]


# The child: one deployment, in a process of its own (Django reads its settings once) ------------------------


def child(args: argparse.Namespace) -> dict:
    import time

    import django

    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "statestore_admin.settings"
    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group, Permission
    from django.core.management import call_command, get_commands
    from django.db import connections
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from statestore_admin.access import permissions
    from statestore_admin.airflow.models import Asset, DagRun, TaskStateStore

    size, repeat, explain, user_scope, asset_scope = (
        args.child,
        args.repeat,
        args.explain,
        args.user_scope,
        args.asset_scope,
    )

    call_command("migrate", verbosity=0, interactive=False)
    snapshot_seconds = None
    if "state_store_stats" in get_commands():  # the pages show its exact figures where a count would scan
        started = time.perf_counter()
        call_command("state_store_stats", stdout=open(os.devnull, "w"))
        snapshot_seconds = time.perf_counter() - started
    users = get_user_model()
    if user_scope:
        user = users.objects.create_user("scoped", password="pw-bench-scoped-1")
        group = Group.objects.filter(name="Operator").first()
        if group:
            user.groups.add(group)
        else:  # without the group the pages would only answer 403: the stores' view permissions instead
            for store in ("task", "asset"):
                app_label, name = permissions.codename(store, "view").split(".")
                user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=name))
        call_command("grant_scope", "scoped", "--dags", user_scope, "--assets", asset_scope)
        user = users.objects.get(pk=user.pk)
    else:
        user = users.objects.create_superuser("bench", "", "pw-bench-superuser-1")
    client = Client()
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")

    shape = deployment.SIZES[size]
    dag_id = deployment.TEAMS[(shape.dags // 2) % 10] + f"_{shape.dags // 2:04d}"
    if user_scope and not dag_id.startswith(user_scope.rstrip("*")):
        dag_id = f"{user_scope.rstrip('*')}0000"
    run = DagRun.objects.filter(dag_id=dag_id).order_by("-id").first()
    sample = {
        "dag_id": dag_id,
        "run_pk": run.pk,
        "run_id": run.run_id,
        "task_id": "extract",
        "key_id": TaskStateStore.objects.filter(dag_run=run, task_id="extract").order_by("id").first().pk,
        "asset_id": Asset.objects.filter(name__startswith=(asset_scope or "").rstrip("*"))
        .order_by("id")[shape.assets // 20]
        .pk,
    }
    if args.series != "3.3":
        sample.update(region_sample(run))
    airflow = connections[settings.AIRFLOW_DB_ALIAS]
    results = []
    for label, url in pages(sample):
        with CaptureQueriesContext(airflow) as captured:
            response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        results.append(
            {
                "label": label,
                "url": url,
                "status": response.status_code,
                "bytes": len(body),
                "queries": len(captured.captured_queries),
                "sql": [q["sql"] for q in captured.captured_queries],
                "times": [],
            }
        )
    for _ in range(repeat):
        for result in results:
            started = time.perf_counter()
            response = client.get(result["url"])
            result["times"].append(time.perf_counter() - started)
            result["status"] = max(result["status"], response.status_code)
    for result in results:
        result["median"] = statistics.median(result["times"])
        result["seq_scans"] = sorted(seq_scans(airflow, result["sql"])) if explain else None
        result["plans"] = analysed(airflow, result["sql"]) if args.analyze else None
        del result["sql"]
    return {
        "size": size,
        "sample": sample,
        "pages": results,
        "commands": sorted(get_commands()),
        "snapshot_seconds": snapshot_seconds,
    }


def region_sample(run) -> dict:
    """The sample run's loop and its iteration 1's expansion, a key there, and the long loop's run and loop."""
    from statestore_admin.airflow.models import DagRun, DynamicRegion, TaskStateStore

    regions = DynamicRegion.objects.filter(dag_id=run.dag_id, run_id=run.run_id)
    expansion = regions.get(node_id="refine.work", parent_region_index=1).pk
    long_run = DagRun.objects.get(dag_id=shape34.LONG_LOOP_DAG)
    return {
        "loop": regions.get(node_id="refine", parent_region_id=None).pk,
        "expansion": expansion,
        "region_key_id": TaskStateStore.objects.filter(dag_run=run, region_id=expansion).order_by("id").first().pk,
        "long_run_pk": long_run.pk,
        "long_run_id": long_run.run_id,
        "long_loop": DynamicRegion.objects.get(
            dag_id=long_run.dag_id, run_id=long_run.run_id, node_id="refine", parent_region_id=None
        ).pk,
    }


def analysed(connection, statements: list[str]) -> list[str]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of each distinct read in ``statements``, as text, the statement first."""
    plans = []
    with connection.cursor() as cursor:
        for sql in dict.fromkeys(statements):
            if not sql or not sql.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
            plans.append(sql + "\n\n" + "\n".join(row[0] for row in cursor.fetchall()))
    return plans


def seq_scans(connection, statements: list[str]) -> set[str]:
    """How the plans of ``statements`` may read large tables whole: a ``Seq Scan``, or an index scan without an
    index condition (entries read in index order, rows only filtered); "under a LIMIT" when it stops as soon as
    enough rows match (whole only when few or none do)."""
    found = set()
    with connection.cursor() as cursor:
        for sql in statements:
            if not sql or not sql.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
            plan = cursor.fetchone()[0]
            plan = json.loads(plan) if isinstance(plan, str) else plan
            stack = [(plan[0]["Plan"], False)]
            while stack:
                node, limited = stack.pop()
                table, kind = node.get("Relation Name"), node.get("Node Type")
                under = " under a LIMIT" if limited else ""
                if table in LARGE_TABLES and kind == "Seq Scan":
                    found.add(f"Seq Scan on {table}{under}")
                elif table in STATE_TABLES and kind in ("Index Scan", "Index Only Scan") and "Index Cond" not in node:
                    found.add(f"{kind} on {table} without index condition{under} ({node.get('Index Name')})")
                streams = (limited or kind == "Limit") and kind not in BLOCKING  # a Sort under a Limit reads all
                stack.extend((child, streams) for child in node.get("Plans", []))
    return found


# The parent ----------------------------------------------------------------------------------------------


def run_size(size: str, args: argparse.Namespace, explain: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="ssbench-pages-") as tmp:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": tmp,
            "STATESTORE_VAR_DIR": tmp,
            "AIRFLOW_HOME": tmp,  # no airflow.cfg: Airflow's defaults
            "AIRFLOW_DATABASE_URL": deployment.url(deployment.database_name(size, args.series)),
            "DATABASE_URL": f"sqlite:///{tmp}/dashboard.sqlite3",
            "SECRET_KEY": "pages-bench-only-not-secret",
            "ALLOWED_HOSTS": "testserver",
            "SECURE_COOKIES": "0",
            "AIRFLOW_DATABASE_QUERY_TIMEOUT": str(args.query_timeout),
            "STATIC_ROOT": f"{tmp}/static",
            "LOG_LEVEL": "ERROR",
        }
        command = [sys.executable, __file__, "--child", size, "--repeat", str(args.repeat), "--out", f"{tmp}/out.json"]
        command += ["--series", args.series]
        if explain:
            command.append("--explain")
            if args.analyze:
                command.append("--analyze")
        if args.user_scope:
            command += ["--user-scope", args.user_scope, "--asset-scope", args.asset_scope]
        Path(f"{tmp}/static").mkdir()
        print(f"{size}: timing pages ({args.repeat} passes after a warm-up)", flush=True)
        subprocess.run(command, cwd=ROOT, env=env, check=True)
        return json.loads(Path(f"{tmp}/out.json").read_text())


def merge(results: list[dict]) -> dict:
    """One size's rounds as one result: every page's timed passes together, their median."""
    merged = results[-1]
    for n, page in enumerate(merged["pages"]):
        rounds = [r["pages"][n] for r in results]
        page["times"] = [t for r in rounds for t in r["times"]]
        page["median"] = statistics.median(page["times"])
        page["status"] = max(r["status"] for r in rounds)
        page["seq_scans"] = next((r["seq_scans"] for r in rounds if r["seq_scans"] is not None), None)
        page["plans"] = next((r["plans"] for r in rounds if r.get("plans") is not None), None)
    shots = [r["snapshot_seconds"] for r in results if r.get("snapshot_seconds") is not None]
    merged["snapshot_seconds"] = statistics.median(shots) if shots else None
    return merged


def seconds(result: dict) -> str:
    text = f"{result['median']:.3f} s" if result["median"] < 10 else f"{result['median']:.1f} s"
    if result["status"] != 200:
        text += f" ({result['status']})"
    if result["median"] > DEFAULT_DEADLINE - 1:
        text += " ⚠ over the default 30 s deadline"
    return text


def table(runs: list[dict]) -> str:
    small, large = runs[0], runs[-1]
    sizes = f"{small['size']} / {large['size']}"
    header = f"| page | {small['size']} | {large['size']} | ratio | queries ({sizes}) | HTML or JSON ({sizes}) |"
    lines = [header, "|---|---|---|---|---|---|"]
    for a, b in zip(small["pages"], large["pages"], strict=True):
        ratio = b["median"] / a["median"] if a["median"] else float("inf")
        queries = str(a["queries"]) if a["queries"] == b["queries"] else f"{a['queries']} / {b['queries']}"
        weight = f"{kb(a)} / {kb(b)}" if kb(a) != kb(b) else kb(a)
        lines.append(f"| {a['label']} | {seconds(a)} | {seconds(b)} | {ratio:.1f}× | {queries} | {weight} |")
    return "\n".join(lines)


def kb(result: dict) -> str:
    return f"{result.get('bytes', 0) / 1000:.1f} KB"


def plans(run: dict, header: str) -> str:
    """Every captured read's ``EXPLAIN (ANALYZE, BUFFERS)`` at the largest size, page by page."""
    parts = [header, ""]
    for page in run["pages"]:
        parts += [f"#### {page['label']}", "", f"`{page['url']}`", ""]
        parts += [f"```\n{plan}\n```\n" for plan in page["plans"] or []] or ["No read of Airflow's database.", ""]
    return "\n".join(parts)


def scans(run: dict) -> str:
    lines = []
    for page in run["pages"]:
        if page["seq_scans"]:
            found = [f"**{f}**" if f.split(" on ")[1].split()[0] in STATE_TABLES else f for f in page["seq_scans"]]
            lines.append(f"- {page['label']}: {'; '.join(found)}")
    if not lines:
        return f"No captured query at {run['size']} plans a sequential scan of a large table."
    return (
        f"`EXPLAIN (FORMAT JSON)` of every captured Airflow query at {run['size']}: the pages whose plans "
        "may read a large table whole: a Seq Scan, or an index scan without an index condition (rows only "
        'filtered); "under a LIMIT" stops as soon as enough rows match, so it reads the whole table only when '
        "few or none do. Those of the state tables in bold:\n\n" + "\n".join(lines)
    )


def builds(sizes: list[str], series: str) -> str:
    lines = ["| deployment | task keys | task instances | DAG runs | asset keys | size on disk | build time | built |"]
    lines.append("|---|---|---|---|---|---|---|---|")
    for size in sizes:
        info = deployment.build_info(size, series)
        if not info:
            continue
        rows = info.get("rows", {})
        lines.append(
            f"| `{deployment.database_name(size, series)}` | {rows.get('task_state_store', 0):,} | "
            f"{rows.get('task_instance', 0):,} | {rows.get('dag_run', 0):,} | {rows.get('asset_state_store', 0):,} | "
            f"{info.get('database_size', '?')} | {info.get('build_seconds', 0):.0f} s | "
            f"{info.get('built_at', '?')[:16]} |"
        )
    return "\n".join(lines)


def code_version() -> str:
    """The commit measured, and whether the working tree differed from it (outside bench/ and docs/)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    status = subprocess.run(
        ["git", "status", "--porcelain", "--", ".", ":!bench", ":!docs"], cwd=ROOT, capture_output=True, text=True
    )
    changed = len(status.stdout.splitlines())
    dirty = f", with {changed} uncommitted changed or new files in the working tree" if changed else ""
    return f"commit {commit.stdout.strip() or '?'}{dirty}"


def pg_version() -> str:
    return deployment.admin("SHOW server_version")[0][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="20k,10m", help="comma-separated, smallest first (default 20k,10m)")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes after the warm-up; the median is shown")
    parser.add_argument(
        "--rounds", type=int, default=1, help="run the sizes in turn this many times; the median of all passes"
    )
    parser.add_argument("--explain", action="store_true", help="EXPLAIN every Airflow query at the largest size")
    parser.add_argument(
        "--analyze",
        action="store_true",
        help="with --explain: also EXPLAIN (ANALYZE, BUFFERS) each one, written beside pages.md with --write",
    )
    parser.add_argument("--series", choices=deployment.SERIES, default="3.3", help="Airflow's schema (default 3.3)")
    parser.add_argument("--write", action="store_true", help="write the result to docs/benchmarks/pages.md")
    parser.add_argument("--user-scope", help="time the pages as an Operator scoped to these DAGs (grant_scope)")
    parser.add_argument("--asset-scope", help="the scope's assets (default: from --user-scope, etl_* -> etl.*)")
    parser.add_argument("--query-timeout", type=float, default=600.0, help="AIRFLOW_DATABASE_QUERY_TIMEOUT")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.user_scope and not args.asset_scope:
        args.asset_scope = args.user_scope.removesuffix("_*") + ".*" if args.user_scope.endswith("_*") else "*"

    if args.child:
        result = child(args)
        Path(args.out).write_text(json.dumps(result, default=str))
        return

    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in deployment.SIZES]
    if unknown:
        parser.error(f"unknown size {', '.join(unknown)}: use {', '.join(deployment.SIZES)}")
    if args.user_scope and not grant_scope_exists():
        sys.exit(
            "--user-scope needs the `grant_scope` management command (python manage.py grant_scope USER "
            "--dags GLOB --assets GLOB), which this checkout does not have yet."
        )
    for size in sizes:
        deployment.build(size, series=args.series)
    rounds: dict[str, list[dict]] = {size: [] for size in sizes}
    for n in range(args.rounds):  # the sizes take turns, so that the machine's mood weighs on each alike
        last = n == args.rounds - 1
        for size in sizes:
            rounds[size].append(run_size(size, args, explain=args.explain and last and size == sizes[-1]))
    runs = [merge(rounds[size]) for size in sizes]

    scope = f", as a user scoped to DAGs `{args.user_scope}` and assets `{args.asset_scope}`" if args.user_scope else ""
    command = "bench/pages_bench.py " + shlex.join(sys.argv[1:])
    report = "\n".join(
        [
            f"### {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {' vs '.join(sizes)}, Airflow {args.series}'s schema{scope}",
            "",
            f"Machine: {platform.platform()}, {os.cpu_count()} cores; PostgreSQL {pg_version()} at 127.0.0.1:5432 "
            f"(its configuration untouched). Code: {code_version()}. "
            f"Command: `.venv/bin/python {command.strip()}`. Server time with Django's test client in one "
            f"process per size, median of {args.repeat} passes after a warm-up pass"
            + (f" in each of {args.rounds} rounds (the sizes in turn)" if args.rounds > 1 else "")
            + "; "
            "queries: those on the Airflow database, in the warm-up pass.",
            "",
            "Deployments (`bench/deployment.py`):",
            "",
            builds(list(deployment.SIZES), args.series),
            "",
            "Sample objects at the largest size: " + ", ".join(f"{k} `{v}`" for k, v in runs[-1]["sample"].items()),
            "",
            "Statistics snapshot taken before the pages (`state_store_stats`): "
            + ", ".join(
                f"{r['size']} {r['snapshot_seconds']:.1f} s"
                if r.get("snapshot_seconds") is not None
                else f"{r['size']} none"
                for r in runs
            ),
            "",
            table(runs),
            "",
            *([scans(runs[-1]), ""] if args.explain else []),
        ]
    )
    print()
    print(report)
    if args.write:
        if not OUT.exists():
            OUT.write_text(
                "# The dashboard's pages at scale\n\nNewest first. Written by `bench/pages_bench.py` on deployments "
                "built by `bench/deployment.py` (its docstring describes their shape).\n\n"
            )
        head, _, rest = OUT.read_text().partition("\n### ")
        OUT.write_text(head.rstrip() + "\n\n" + report + ("\n### " + rest if rest else ""))
        print(f"written to {OUT.relative_to(ROOT)}")
        if args.analyze:
            where = OUT.with_name(f"plans-{args.series}.md")
            where.write_text(
                f"# Query plans of the pages at {runs[-1]['size']}, Airflow {args.series}'s schema\n\n"
                + plans(runs[-1], f"The newest run only (older ones are in git). {report.splitlines()[2]}")
            )
            print(f"written to {where.relative_to(ROOT)}")


def grant_scope_exists() -> bool:
    return any(ROOT.glob("statestore_admin/**/management/commands/grant_scope.py"))


if __name__ == "__main__":
    main()
