"""`make serve`'s gunicorn (gunicorn.conf.py) under two loads, on SQLite files of its own:

1. An export of ``--rows`` asset keys (JSON) streamed to a client that reads 1 MB, pauses 5 s, then reads
   the rest: the serving worker's RSS before, during the pause and at its peak (one worker, so it is the one).
2. ``--stalled`` connections that send ``POST /login/`` headers with ``Content-Length: 1000`` and no body,
   while /healthz is asked 20 times: its slowest answer.

    .venv/bin/python bench/serve_bench.py --rows 300000 --stalled 48
"""

import argparse
import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django  # noqa: E402

django.setup()  # the test helpers below import Django's test tools

import requests  # noqa: E402

from tests.operations.test_serving import _run, gunicorn, server_environment  # noqa: E402


def rss_mb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
    return 0


def prepare(tmp: Path, rows: int, **variables):
    env = server_environment(tmp, GUNICORN_CLIENT_TIMEOUT="60", **variables)
    manage = [sys.executable, "manage.py"]
    _run([*manage, "migrate", "--noinput", "--verbosity", "0"], env)
    _run([*manage, "create_airflow_schema"], env)
    password = uuid.uuid4().hex
    script = (
        "from django.contrib.auth import get_user_model\nfrom tests import factories\n"
        f"get_user_model().objects.create_superuser('admin', 'a@example.com', '{password}')\n"
        "print(factories.make_asset(name='big').pk)"
    )
    asset = int(_run([*manage, "shell", "--no-imports", "-c", script], env).split()[-1])
    value = json.dumps({"payload": "x" * 150})
    with sqlite3.connect(tmp / "var" / "demo" / "airflow.sqlite3") as db:  # the embedded (demo) Airflow file
        db.executemany(
            "INSERT INTO asset_state_store (asset_id, key, value, updated_at) VALUES (?, ?, ?, '2026-12-01 00:00')",
            ((asset, f"key_{i:07d}", value) for i in range(rows)),
        )
    return env, password, asset


def export(rows: int):
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        env, password, asset = prepare(tmp, rows, WEB_CONCURRENCY="1")
        with gunicorn(tmp, env) as master:
            time.sleep(1)
            worker = int(subprocess.run(["pgrep", "-P", str(master.pid)], capture_output=True, text=True).stdout)
            base = f"http://127.0.0.1:{env['PORT']}"
            session = requests.Session()
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', session.get(f"{base}/login/").text)
            session.post(
                f"{base}/login/", data={"username": "admin", "password": password, "csrfmiddlewaretoken": csrf[1]}
            )
            before = rss_mb(worker)
            peak, done = [before], threading.Event()

            def poll():
                while not done.is_set():
                    peak[0] = max(peak[0], rss_mb(worker))
                    time.sleep(0.1)

            threading.Thread(target=poll, daemon=True).start()
            started = time.monotonic()
            response = session.get(f"{base}/assets/{asset}/keys/export/?format=json", stream=True)
            chunks = response.iter_content(65536)
            size = sum(len(next(chunks)) for _ in range(16))
            time.sleep(5)
            paused = rss_mb(worker)
            size += sum(len(chunk) for chunk in chunks)
            elapsed = time.monotonic() - started
            done.set()
        print(
            f"export: {rows:,} keys, {size / 1e6:.1f} MB in {elapsed:.1f} s; worker RSS {before} MB before, "
            f"{paused} MB during the 5 s pause, {peak[0]} MB at peak"
        )


def stalled(count: int):
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        env, _, _ = prepare(tmp, 0)
        port = int(env["PORT"])
        with gunicorn(tmp, env):
            sockets = []
            try:
                for _ in range(count):
                    sock = socket.create_connection(("127.0.0.1", port))
                    sock.sendall(
                        b"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n"
                    )
                    sockets.append(sock)
                time.sleep(0.5)
                times = []
                for _ in range(20):
                    asked = time.monotonic()
                    requests.get(f"http://127.0.0.1:{port}/healthz", timeout=30).raise_for_status()
                    times.append(time.monotonic() - asked)
            finally:
                for sock in sockets:
                    sock.close()
        print(
            f"stalled: {count} connections holding a body back; /healthz x20: slowest {max(times) * 1000:.0f} ms, "
            f"median {sorted(times)[10] * 1000:.0f} ms"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--stalled", type=int, default=48)
    arguments = parser.parse_args()
    os.chdir(ROOT)
    stalled(arguments.stalled)
    export(arguments.rows)
