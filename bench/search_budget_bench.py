"""The Search page and API on existing bench deployments (``bench/deployment.py``): a substring search that
matches nothing (stopped by ``SEARCH_TIME_BUDGET_SECONDS``) beside prefix, exact, status and DAG-filtered
searches, as a superuser and as a user scoped to ``etl_*``. Server time through Django's test client, the
median of ``--repeat`` passes after a warm-up, and whether each answer was cut short.

    .venv/bin/python bench/search_budget_bench.py --sizes 20k,10m
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

import deployment  # bench/deployment.py

ROOT = Path(__file__).resolve().parent.parent
ABSENT = "no_such_key_zz"
SEARCHES = [
    (f"page contains `{ABSENT}`", f"/search/?key={ABSENT}&match=contains"),
    (f"page contains `{ABSENT}`, task state only", f"/search/?key={ABSENT}&match=contains&store=task"),
    (f"API task keys contains `{ABSENT}`", f"/api/statestore/v1/search/task-keys?key={ABSENT}"),
    (f"API asset keys contains `{ABSENT}`", f"/api/statestore/v1/search/asset-keys?key={ABSENT}"),
    ("page contains `rows` (matches)", "/search/?key=rows&match=contains"),
    ("page prefix `check`", "/search/?key=check&match=prefix"),
    ("page exact `rows_loaded`", "/search/?key=rows_loaded&match=exact"),
    ("page status expired", "/search/?status=expired"),
    (f"page contains `{ABSENT}` in one DAG", f"/search/?key={ABSENT}&match=contains&dag_id=etl_0000"),
]


def child(repeat: int, scoped: bool) -> list[dict]:
    import django

    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "statestore_admin.settings"
    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.core.management import call_command
    from django.test import Client

    from statestore_admin.access import permissions

    call_command("migrate", verbosity=0, interactive=False)
    users = get_user_model()
    if scoped:
        user = users.objects.create_user("scoped", password="pw-bench-scoped-1")
        for store in ("task", "asset"):
            app_label, name = permissions.codename(store, "view").split(".")
            user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=name))
        call_command("grant_scope", "scoped", "--dags", "etl_*", "--assets", "etl*")
        user = users.objects.get(pk=user.pk)
    else:
        user = users.objects.create_superuser("bench", "", "pw-bench-superuser-1")
    client = Client()
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    results = []
    for label, url in SEARCHES:
        response = client.get(url)
        body = response.content.decode()
        cut = response.json()["cut_short"] if "/api/" in url else "Stopped after" in body
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            client.get(url)
            times.append(time.perf_counter() - started)
        results.append(
            {
                "label": label,
                "status": response.status_code,
                "cut": cut,
                "median": statistics.median(times),
            }
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20k,10m")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scoped", action="store_true", help="as a viewer scoped to etl_* DAGs and etl* assets")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        Path(args.out).write_text(json.dumps(child(args.repeat, args.scoped)))
        return
    runs = {}
    for size in args.sizes.split(","):
        with tempfile.TemporaryDirectory(prefix="ssbench-search-") as tmp:
            env = {
                "PATH": os.environ["PATH"],
                "HOME": tmp,
                "STATESTORE_VAR_DIR": tmp,
                "AIRFLOW_HOME": tmp,
                "AIRFLOW_DATABASE_URL": deployment.url(deployment.database_name(size)),
                "DATABASE_URL": f"sqlite:///{tmp}/dashboard.sqlite3",
                "SECRET_KEY": "search-bench-only-not-secret",
                "ALLOWED_HOSTS": "testserver",
                "SECURE_COOKIES": "0",
                "STATIC_ROOT": f"{tmp}/static",
                "LOG_LEVEL": "ERROR",
                **{k: v for k, v in os.environ.items() if k == "SEARCH_TIME_BUDGET_SECONDS"},
            }
            Path(f"{tmp}/static").mkdir()
            command = [sys.executable, __file__, "--child", "--repeat", str(args.repeat), "--out", f"{tmp}/out.json"]
            subprocess.run(command + (["--scoped"] if args.scoped else []), cwd=ROOT, env=env, check=True)
            runs[size] = json.loads(Path(f"{tmp}/out.json").read_text())
    sizes = list(runs)
    print(f"SEARCH_TIME_BUDGET_SECONDS={os.environ.get('SEARCH_TIME_BUDGET_SECONDS', '2 (default)')}")
    print("| search | " + " | ".join(sizes) + " | cut short |")
    print("|---|" + "---|" * (len(sizes) + 1))
    for index, (label, _) in enumerate(SEARCHES):
        rows = [runs[size][index] for size in sizes]
        times = " | ".join(f"{r['median']:.3f} s" + ("" if r["status"] == 200 else f" ({r['status']})") for r in rows)
        cut = " / ".join("yes" if r["cut"] else "no" for r in rows)
        print(f"| {label} | {times} | {cut} |")


if __name__ == "__main__":
    main()
