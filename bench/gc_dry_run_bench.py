"""The GC dry run (``/api/statestore/v1/gc/dry-run`` and ``state_store_clean --dry-run``) at two deployment sizes.

Reuses the deployments of ``bench/deployment.py`` (``ssbench_deploy_{size}``, read only; it builds a missing
one). One process per size points the dashboard at the deployment with a throwaway SQLite dashboard
database, signs in a superuser and times the endpoint with Django's test client (server time) after a
warm-up request, and ``gc.dry_run`` itself; medians of ``--repeat`` requests. ``--snapshot`` first writes a
statistics snapshot of 2,000 DAGs (made-up figures) in the throwaway dashboard database, so that past the
exact-count cap the by-DAG figures are read from it, as on a deployment where ``state_store_stats`` runs.

    .venv/bin/python bench/gc_dry_run_bench.py                    # 20k and 10m
    .venv/bin/python bench/gc_dry_run_bench.py --sizes 20k,1m --repeat 20 --snapshot
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import deployment  # bench/deployment.py: this script's folder is on sys.path when it runs

ROOT = Path(__file__).resolve().parent.parent


def child(repeat: int, snapshot: bool) -> dict:
    import django

    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "statestore_admin.settings"
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from django.utils import timezone

    from statestore_admin import gc
    from statestore_admin.access.scopes import EVERYTHING

    call_command("migrate", verbosity=0, interactive=False)
    if snapshot:  # the cost of reading one: its figures are made up (a real one takes minutes at 10M)
        from statestore_admin.records.models import StatsSnapshot, StatsSnapshotDag

        taken = StatsSnapshot.objects.create(status=StatsSnapshot.Status.DONE, finished_at=timezone.now())
        StatsSnapshotDag.objects.bulk_create(
            StatsSnapshotDag(snapshot=taken, dag_id=f"dag_{i:04d}", keys=5_000, expired=i % 700) for i in range(2_000)
        )
    user = get_user_model().objects.create_superuser("bench", "", "pw-bench-superuser-1")
    client = Client()
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    url = "/api/statestore/v1/gc/dry-run"
    answer = client.get(url).json()  # warm-up
    api, domain = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(url)
        api.append(time.perf_counter() - started)
        assert response.status_code == 200, response.content[:500]
        started = time.perf_counter()
        gc.dry_run(gc.GcPlan(cutoff=timezone.now()), scope=EVERYTHING)
        domain.append(time.perf_counter() - started)
    keep = ("rows", "rows_estimated", "rows_more_than", "dags", "by_dag_source", "snapshot_taken_at")
    return {
        "api": statistics.median(api),
        "domain": statistics.median(domain),
        "answer": {k: answer.get(k) for k in keep} | {"top_dag": (answer.get("by_dag") or [None])[0]},
    }


def run_size(size: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="ssbench-dryrun-") as tmp:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": tmp,
            "STATESTORE_VAR_DIR": tmp,
            "AIRFLOW_HOME": tmp,
            "AIRFLOW_DATABASE_URL": deployment.url(deployment.database_name(size)),
            "DATABASE_URL": f"sqlite:///{tmp}/dashboard.sqlite3",
            "SECRET_KEY": "dry-run-bench-only-not-secret",
            "ALLOWED_HOSTS": "testserver",
            "SECURE_COOKIES": "0",
            "AIRFLOW_DATABASE_QUERY_TIMEOUT": "600",
            "LOG_LEVEL": "ERROR",
            "STATIC_ROOT": f"{tmp}/static",
        }
        Path(f"{tmp}/static").mkdir()
        command = [sys.executable, __file__, "--child", "--repeat", str(args.repeat), "--out", f"{tmp}/out.json"]
        if args.snapshot:
            command.append("--snapshot")
        print(f"{size}: timing the dry run", flush=True)
        subprocess.run(command, cwd=ROOT, env=env, check=True)
        return json.loads(Path(f"{tmp}/out.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="20k,10m", help="comma-separated, smallest first (default 20k,10m)")
    parser.add_argument("--repeat", type=int, default=15, help="timed requests; the median is shown")
    parser.add_argument("--snapshot", action="store_true", help="record a statistics snapshot first")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        Path(args.out).write_text(json.dumps(child(args.repeat, args.snapshot)))
        return
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    for size in sizes:
        deployment.build(size)
    runs = {size: run_size(size, args) for size in sizes}
    small = runs[sizes[0]]
    print("| size | API server time (median) | gc.dry_run (median) | ratio to the smallest (API) |")
    print("|---|---|---|---|")
    for size, run in runs.items():
        ratio = run["api"] / small["api"]
        print(f"| {size} | {run['api'] * 1000:.1f} ms | {run['domain'] * 1000:.1f} ms | {ratio:.2f}× |")
    for size, run in runs.items():
        print(f"{size}: {json.dumps(run['answer'])}")


if __name__ == "__main__":
    main()
