"""`/api/v2` under load, ours beside Airflow's own api-server, on one deployment built by ``bench/deployment.py``
(``ssbench_deploy_{size}`` in PostgreSQL on Airflow 3.3.2's schema, beside 3.3.2's api-server; with
``--series 3.4``, ``ssbench_deploy34_{size}`` on 3.4.0b2's, beside 3.4.0b2's).

Both servers read the same database with the same number of worker processes (``--workers``, default 3: what
``make serve`` starts on two cores). ``--connections`` clients (threads, one keep-alive connection each) ask in
turn for a task instance's keys (the list route) and for one of its keys, for ``--seconds`` after a warm-up;
the result is requests per second, the median and 99th percentile latency, and the errors (any answer but 200,
or no answer). Each variant of ours is a configuration an operator may run (``VARIANTS``): ``default`` is
`make serve` as the README configures it with no ``DATABASE_URL`` and no ``CACHE_URL`` (the dashboard's own
database, and so the shared cache, is a SQLite file); ``postgres`` puts the dashboard's database (and the cache)
in PostgreSQL; ``locmem`` is the per-process cache, for reference only (the limits are then not shared).

Ours is called with an API token of a superuser, Airflow's with its simple auth manager's
``simple_auth_manager_all_admins`` (no token to check): Airflow's side does the lesser work.

    .venv/bin/python bench/deployment.py --size 10m
    .venv/bin/python bench/api_load_bench.py --size 10m --write
    .venv/bin/python bench/api_load_bench.py --size 10m --series 3.4 --variants default --write
    .venv/bin/python bench/api_load_bench.py --size 20k --profile 400   # where ours spends a request's time
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django  # noqa: E402

django.setup()  # the test helpers below (make serve's gunicorn, as the serving tests start it) import Django's

sys.path.insert(0, str(ROOT / "bench"))
import deployment  # noqa: E402

from tests.operations.test_production import free_port, stop  # noqa: E402
from tests.operations.test_serving import gunicorn  # noqa: E402

SERVER = deployment.SERVER
AIRFLOW_VERSIONS = {"3.3": "3.3.2", "3.4": "3.4.0b2"}
DOC = ROOT / "docs" / "benchmarks" / "api-load.md"
VARIANTS = {
    "default": {},
    "postgres": {"DATABASE_URL": "{dashboard_db}"},
    "locmem": {"CACHE_URL": "locmemcache://"},
}


def wait_for(port: int, path: str, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"port {port}: the server exited with {process.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", path)
            if connection.getresponse().status < 500:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"port {port}{path} did not answer within {seconds}s")


def target(database: str) -> dict:
    """A task instance with keys (a run's ``extract``: five keys) and one of its keys."""
    with psycopg.connect(f"{SERVER}/{database}") as connection:
        dag_id, run_id, task_id, key = connection.execute(
            "SELECT dag_id, run_id, task_id, key FROM task_state_store WHERE task_id = 'extract' "
            "ORDER BY id DESC LIMIT 1"
        ).fetchone()
    base = f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/state-store"
    return {"list": base, "key": f"{base}/{quote(key, safe='')}"}


# --- the load ---------------------------------------------------------------------------------------------


def _listening_session(port: int) -> int:
    """The session id of the process listening on ``port`` (each server runs in a session of its own)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                return int((proc / "stat").read_text().rpartition(")")[2].split()[3])
    raise RuntimeError(f"no process listens on port {port}")


def _cpu_seconds(session: int) -> float:
    """User and system CPU of every process of ``session`` and of every PostgreSQL backend serving a bench
    database (``ssbench*``): what the server spends, in itself and in the database, whatever else runs."""
    ticks = 0
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            fields = (proc / "stat").read_text().rpartition(")")[2].split()
            title = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            if int(fields[3]) == session or (title.startswith(b"postgres: ") and b" ssbench" in title):
                ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def load(port: int, paths: list[str], headers: dict, connections: int, seconds: float, warmup: float) -> dict:
    """``connections`` threads, each asking ``paths`` in turn on one keep-alive connection; the server's CPU
    (``_cpu_seconds``) over the measured seconds, per request: steadier than the rates on a shared machine."""
    latencies: list[list[float]] = [[] for _ in range(connections)]
    errors = [0] * connections
    start = time.monotonic()
    measure_from, until = start + warmup, start + warmup + seconds
    session, cpu = _listening_session(port), []

    def meter() -> None:
        for moment in (measure_from, until):
            time.sleep(max(0.0, moment - time.monotonic()))
            cpu.append(_cpu_seconds(session))

    def client(n: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        i = n
        while True:
            now = time.monotonic()
            if now >= until:
                break
            path = paths[i % len(paths)]
            i += 1
            try:
                connection.request("GET", path, headers=headers)
                response = connection.getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            done = time.monotonic()
            if now >= measure_from:
                latencies[n].append(done - now)
                errors[n] += not ok
        connection.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(connections)]
    threads.append(threading.Thread(target=meter))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    merged = sorted(t for ts in latencies for t in ts)
    return {
        "requests": len(merged),
        "rps": len(merged) / seconds,
        "p50_ms": 1000 * statistics.median(merged) if merged else None,
        "p99_ms": 1000 * merged[min(len(merged) - 1, int(0.99 * len(merged)))] if merged else None,
        "errors": sum(errors),
        "cpu_ms": 1000 * (cpu[1] - cpu[0]) / len(merged) if merged else None,
    }


# --- the servers ------------------------------------------------------------------------------------------


def airflow_venv(version: str) -> Path:
    done = subprocess.run(["bash", str(ROOT / "scripts" / "airflow_venv.sh"), version], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"scripts/airflow_venv.sh failed:\n{done.stderr[-2000:]}")
    return Path(done.stdout.strip())


@contextlib.contextmanager
def airflow_server(database: str, workers: int, workdir: Path, version: str):
    venv = airflow_venv(version)
    home = workdir / "airflow-home"
    home.mkdir(exist_ok=True)
    (home / "airflow.cfg").write_text(
        "[database]\n"
        f"sql_alchemy_conn = postgresql+psycopg2://postgres@127.0.0.1:5432/{database}\n"
        "[core]\nload_examples = False\n"
        "auth_manager = airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager\n"
        "simple_auth_manager_all_admins = True\n"
        # several workers must share the key that signs the execution API's tokens (Airflow refuses to start)
        f"[api_auth]\njwt_secret = {uuid.uuid4().hex}\n"
    )
    env = {"PATH": os.environ["PATH"], "HOME": str(workdir), "AIRFLOW_HOME": str(home)}
    port = free_port()
    command = [str(venv / "bin" / "airflow"), "api-server", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--workers", str(workers)]
    with open(workdir / "airflow.log", "w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(port, "/api/v2/version", process)
        yield port, {}
    finally:
        stop(process, timeout=30)


def ours_environment(database: str, workers: int, workdir: Path, variant: str, dashboard_db: str) -> dict:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
    env = {name: value for name, value in os.environ.items() if name in keep}
    env.update(
        AIRFLOW_HOME=str(workdir / "no-airflow-home"),
        AIRFLOW_DATABASE_URL=f"{SERVER}/{database}",
        STATESTORE_VAR_DIR=str(workdir / "var"),
        SECRET_KEY="bench-" + uuid.uuid4().hex,
        ALLOWED_HOSTS="127.0.0.1",
        DEBUG="0",
        HOST="127.0.0.1",
        PORT=str(free_port()),
        WEB_CONCURRENCY=str(workers),
        SECURE_COOKIES="0",
    )
    env.update({name: value.format(dashboard_db=dashboard_db) for name, value in VARIANTS[variant].items()})
    return env


def manage(env: dict, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, input=stdin
    )
    if done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


TOKEN = """
from io import StringIO
from django.contrib.auth import get_user_model
from django.core.management import call_command
get_user_model().objects.create_superuser("bench", "bench@example.com", "bench-" + "x" * 20)
out = StringIO()
call_command("create_api_token", "bench", "--name", "load", stdout=out)
print(out.getvalue().strip())
"""


@contextlib.contextmanager
def our_server(env: dict):
    """`make serve` on ``env``: migrated, a superuser's token, then gunicorn as the serving tests start it."""
    manage(env, "migrate", "--noinput", "--verbosity", "0")
    manage(env, "collectstatic", "--noinput", "--verbosity", "0")
    token = manage(env, "shell", "--no-imports", "-c", TOKEN).split()[-1]
    with gunicorn(Path(env["STATESTORE_VAR_DIR"]).parent, env):
        yield int(env["PORT"]), {"Authorization": f"Bearer {token}"}


@contextlib.contextmanager
def dashboard_database():
    name = f"ssbench_api_dashboard_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(SERVER, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{SERVER}/{name}"
    finally:
        with psycopg.connect(SERVER, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- profile --------------------------------------------------------------------------------------------

PROFILE = """
import cProfile, pstats, sys
from django.test import Client
client = Client(HTTP_AUTHORIZATION="Bearer " + sys.argv[1], SERVER_NAME="127.0.0.1")
paths = sys.argv[2].split("|")
for path in paths * 5:
    assert client.get(path).status_code == 200, path
profile = cProfile.Profile()
profile.enable()
for n in range(int(sys.argv[3])):
    client.get(paths[n % len(paths)])
profile.disable()
pstats.Stats(profile).sort_stats("cumulative").print_stats(45)
pstats.Stats(profile).sort_stats("tottime").print_stats(15)
from django.db import connections
from django.test.utils import CaptureQueriesContext
for path in paths:
    for alias in ("default", "airflow"):
        with CaptureQueriesContext(connections[alias]) as queries:
            client.get(path)
        print(f"{path} on {alias}: {len(queries)} queries")
        for query in queries:
            print("   ", query["time"], query["sql"][:300])
"""


def profile(args, database: str, paths: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="ssbench-api-") as tmp:
        env = ours_environment(database, 1, Path(tmp), args.variant or "default", "")
        manage(env, "migrate", "--noinput", "--verbosity", "0")
        token = manage(env, "shell", "--no-imports", "-c", TOKEN).split()[-1]
        script = Path(tmp) / "bench_profile.py"  # not profile.py: cProfile imports the standard profile
        script.write_text(
            "import django, os\nos.environ.setdefault('DJANGO_SETTINGS_MODULE', "
            "'statestore_admin.settings')\ndjango.setup()\n" + PROFILE
        )
        done = subprocess.run(
            [sys.executable, str(script), token, "|".join(paths), str(args.profile)],
            cwd=ROOT,
            env={**env, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
        )
        print(done.stdout[-12000:], done.stderr[-3000:])


# --- main -----------------------------------------------------------------------------------------------


def row(name: str, result: dict, anchor: dict | None) -> str:
    ratio = "1 | 1 | 1"
    if anchor:
        ratio = (
            f"{result['rps'] / anchor['rps']:.2f}× | {result['p99_ms'] / anchor['p99_ms']:.2f}× | "
            f"{result['cpu_ms'] / anchor['cpu_ms']:.2f}×"
        )
    return (
        f"| {name} | {result['rps']:,.0f} | {result['p50_ms']:.1f} | {result['p99_ms']:.1f} | {result['errors']} "
        f"| {result['cpu_ms']:.2f} | {ratio} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="10m")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--variants", default="default,postgres,locmem")
    parser.add_argument("--variant", help="with --profile: the variant profiled (default: default)")
    parser.add_argument("--profile", type=int, help="profile this many requests of ours in one process instead")
    parser.add_argument("--write", action="store_true", help=f"add the result to {DOC.relative_to(ROOT)}")
    parser.add_argument("--series", choices=deployment.SERIES, default="3.3", help="Airflow's schema and api-server")
    args = parser.parse_args()
    database = deployment.database_name(args.size, args.series)
    version = AIRFLOW_VERSIONS[args.series]
    paths = list(target(database).values())
    if args.profile:
        profile(args, database, paths)
        return
    results: list[tuple[str, dict]] = []
    with tempfile.TemporaryDirectory(prefix="ssbench-api-") as tmp:
        work = Path(tmp)
        with airflow_server(database, args.workers, work, version) as (port, headers):
            results.append(
                (
                    f"Airflow {version} api-server",
                    load(port, paths, headers, args.connections, args.seconds, args.warmup),
                )
            )
        for variant in args.variants.split(","):
            with contextlib.ExitStack() as stack:
                dashboard_db = stack.enter_context(dashboard_database()) if "postgres" in variant else ""
                (work / variant).mkdir()
                env = ours_environment(database, args.workers, work / variant, variant, dashboard_db)
                port, headers = stack.enter_context(our_server(env))
                results.append(
                    (f"ours, {variant}", load(port, paths, headers, args.connections, args.seconds, args.warmup))
                )
    anchor = results[0][1]
    lines = [
        f"### {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {args.size} on Airflow {args.series}'s schema, "
        f"{args.connections} connections, "
        f"{args.workers} workers each",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} cores. Command: `.venv/bin/python bench/api_load_bench.py "
        f"{' '.join(sys.argv[1:])}`. Requests alternate between a task instance's key list and one of its keys.",
        "",
        "| server | requests/s | p50 ms | p99 ms | errors | CPU ms a request (server and its database) "
        "| throughput / Airflow's | p99 / Airflow's | CPU a request / Airflow's |",
        "|---|---|---|---|---|---|---|---|---|",
        *(row(name, result, None if result is anchor else anchor) for name, result in results),
        "",
    ]
    print("\n".join(lines))
    print(json.dumps(results, indent=1))
    if args.write:
        text = DOC.read_text() if DOC.exists() else HEADER
        head, _, rest = text.partition("\n### ")
        DOC.write_text(head.rstrip("\n") + "\n\n" + "\n".join(lines) + ("\n### " + rest if rest else ""))


HEADER = """# `/api/v2` under load, beside Airflow's api-server

Newest first. Written by `bench/api_load_bench.py` (its docstring says what each variant is) on deployments built
by `bench/deployment.py`. The machine is shared and noisy: compare the ratios within one run, not runs.
"""


if __name__ == "__main__":
    main()
