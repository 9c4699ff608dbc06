"""The container image as a platform engineer uses it (docs/container.md, README "Container"): `make image` with
podman on a plain Debian bookworm base (no registry is reachable here), then, against a real PostgreSQL holding a
real Airflow schema, the README's three commands: migrate, createsuperuser, serve on a read-only root file system.

Runs only in its own CI stage (`make test-image`, marker ``image``): building an image takes minutes. Needs podman,
runc and debootstrap (`apt-get install -y debootstrap podman runc`) and PostgreSQL on 127.0.0.1:5432.
"""

import functools
import http.cookies
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import psycopg
import pytest
from django.utils import translation

from tests.operations.test_production import scratch_databases
from tests.ports import free_port

pytestmark = pytest.mark.image

ROOT = Path(__file__).resolve().parents[2]
# podman's storage for the image stage: its own store on native overlay where the kernel mounts it, each step
# adding only what it changed; vfs (the default of scripts/container_base.sh) copies the whole file system at every
# step and was most of the stage's CPU (docs/testing.md). A store records its driver, hence a store of its own.
OVERLAY = [
    "--storage-driver", "overlay",
    "--root", "/var/lib/containers/statestore-overlay", "--runroot", "/run/containers/statestore-overlay",
]  # fmt: skip
VFS = ["--storage-driver", "vfs"]
BASE = "localhost/statestore-admin-base:bookworm"
IMAGE = "localhost/statestore-admin:test"
# Containers share the host's network (PostgreSQL on 127.0.0.1); the limits keep podman within this sandbox's.
# The engine runs no health check timer of its own here (no systemd): `podman healthcheck run` runs it once.
RUN_OPTIONS = [
    "run", "--network", "host", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
    "--health-interval", "disable",
]  # fmt: skip
GRACEFUL_TIMEOUT = 10  # GUNICORN_GRACEFUL_TIMEOUT of the served container
MAX_LAYERS_MB = 250  # what the image's own layers may add to the base (issue 39)


@functools.cache
def engine_command() -> tuple[str, ...]:
    """podman with runc, on overlay storage if it answers on it (root, a kernel with native overlay), else vfs."""
    podman = ("podman", "--runtime", "runc")
    if os.geteuid() == 0:
        probe = subprocess.run([*podman, *OVERLAY, "info"], capture_output=True, text=True, timeout=120)
        if probe.returncode == 0:
            return (*podman, *OVERLAY)
        print(f"\noverlay storage not available, vfs instead: {probe.stderr.strip()[-500:]}", file=sys.stderr)
    return (*podman, *VFS)


def run_command() -> list[str]:
    return [*engine_command(), *RUN_OPTIONS]


def engine(*args, timeout=600, check=True):
    result = subprocess.run([*engine_command(), *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert result.returncode == 0, f"podman {' '.join(args)}: {result.stderr}"
    return result


def run(*args, timeout=300, check=True):
    """``podman run --rm IMAGE …`` with this sandbox's limits."""
    result = subprocess.run([*run_command(), "--rm", *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert result.returncode == 0, f"podman run {' '.join(args)}: {result.stdout}{result.stderr}"
    return result


def image_size(name: str) -> int:
    return int(engine("image", "inspect", "--format", "{{.Size}}", name).stdout.strip())


@pytest.fixture(scope="module")
def image():
    """`make image` on the debootstrapped base; its figures are printed for docs/container.md."""
    missing = [tool for tool in ("podman", "runc", "debootstrap") if not shutil.which(tool)]
    if missing:
        message = f"{', '.join(missing)} missing: apt-get install -y debootstrap podman runc"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    base = subprocess.run(
        ["bash", "scripts/container_base.sh", BASE],
        cwd=ROOT,
        env={**os.environ, "CONTAINER_ENGINE": " ".join(engine_command())},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert base.returncode == 0, base.stderr
    before = engine("image", "inspect", "--format", "{{.Id}}", IMAGE, check=False).stdout.strip()
    started = time.monotonic()
    build = subprocess.run(
        [
            "make",
            "image",
            f"IMAGE={IMAGE}",
            f"IMAGE_BASE={BASE}",
            f"CONTAINER_ENGINE={' '.join(engine_command())}",
            "IMAGE_BUILD_FLAGS=--format docker --network host",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    seconds = time.monotonic() - started
    assert build.returncode == 0, build.stdout[-5000:] + build.stderr[-5000:]
    added = (image_size(IMAGE) - image_size(BASE)) / 1e6
    print(f"\nimage build: {seconds:.0f} s; the image's own layers: {added:.0f} MB above the base", file=sys.stderr)
    assert added <= MAX_LAYERS_MB, f"the image adds {added:.0f} MB to its base"
    # What earlier builds left untagged, some 300 MB a run otherwise: the previous image (this build took its
    # tag) and, in the store of our own only (the default one may hold someone else's), older build stages; the
    # newest stage stays, the next build's cache.
    if before and before != engine("image", "inspect", "--format", "{{.Id}}", IMAGE).stdout.strip():
        engine("rmi", before, check=False)
    if set(OVERLAY) <= set(engine_command()):
        stages = json.loads(engine("images", "--filter", "dangling=true", "--format", "json").stdout or "[]")
        older = sorted(stages, key=lambda stage: stage["Created"])[:-1]
        if older:
            engine("rmi", *[stage["Id"] for stage in older], check=False)
    return IMAGE


def test_image_metadata(image):
    """Non-root numeric user of group 0, serving by default with no shell in between, a health check, labels."""
    config = json.loads(engine("image", "inspect", image).stdout)[0]
    # The HEALTHCHECK is kept by docker's image format (podman build --format docker), not by OCI's.
    settings = config["Config"]
    assert settings["User"] == "50000:0"
    assert settings["Cmd"] == ["gunicorn", "--config", "/opt/statestore-admin/gunicorn.conf.py"]
    assert not settings.get("Entrypoint")
    assert "PORT=8080" in settings["Env"]
    assert config["Healthcheck"]["Test"] == ["CMD", "healthcheck"]
    labels = settings["Labels"]
    for name in ("source", "version", "licenses", "revision"):
        assert labels.get(f"org.opencontainers.image.{name}"), name
    # Nothing of the build: no tests, no .git, no pip, no compiler.
    listing = run(
        "--entrypoint", "sh", image, "-c",
        "ls -a /opt/statestore-admin; command -v gcc cc pip pip3 || true; ls /opt/statestore-admin/venv/bin",
    ).stdout  # fmt: skip
    assert "tests" not in listing.split() and ".git" not in listing.split()
    assert "/gcc" not in listing and "/pip" not in listing and "\npip" not in listing, listing
    # The one path of the image the dashboard may write (when not read-only): group 0, group-writable.
    var = run(image, "stat", "-c", "%u:%g %a", "/opt/statestore-admin/var").stdout.strip()
    assert var == "50000:0 2775", var


def _sign_in(base_url: str, username: str, password: str) -> dict:
    """The login form over HTTP, as a browser submits it; the session's cookies."""
    cookies = {}

    def request(path, data=None):
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())}
        req = urllib.request.Request(base_url + path, data=body, headers=headers)
        opener = urllib.request.build_opener(NoRedirect)
        try:
            response = opener.open(req, timeout=30)
        except urllib.error.HTTPError as error:
            response = error
        # Secure cookies (SECURE_COOKIES, on by default in production) kept by hand: this client speaks plain
        # HTTP to the container, where a TLS proxy would stand in front.
        for header in response.headers.get_all("Set-Cookie") or ():
            cookies.update({name: morsel.value for name, morsel in http.cookies.SimpleCookie(header).items()})
        return response.status, response.headers, response.read()

    status, _, page = request("/login/")
    assert status == 200, page[:2000]
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1).decode()
    status, headers, body = request(
        "/login/", {"csrfmiddlewaretoken": token, "username": username, "password": password, "next": ""}
    )
    assert status == 302, body[:2000]
    assert "sessionid" in cookies
    return request


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_migrate_create_a_superuser_serve_and_stop(image, tmp_path):
    """The README's Container section: migrate, createsuperuser, then serve read-only on a real Airflow schema."""
    name = f"statestore_image_{uuid.uuid4().hex[:8]}"
    with scratch_databases(name, f"{name}_airflow"):
        _migrate_create_a_superuser_serve_and_stop(
            image,
            tmp_path,
            dashboard_url=f"postgres://postgres@127.0.0.1:5432/{name}",
            # As the official Airflow Helm chart writes its metadata connection (docs/container.md).
            airflow_url=f"postgresql://postgres@127.0.0.1:5432/{name}_airflow?sslmode=disable",
        )


def _migrate_create_a_superuser_serve_and_stop(image, tmp_path, dashboard_url, airflow_url):
    # Airflow's database as Airflow leaves it: its real schema (the fixture of `airflow db migrate`), a run with state.
    setup = subprocess.run(
        [sys.executable, "manage.py", "create_airflow_schema"],
        cwd=ROOT,
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "AIRFLOW_DATABASE_URL": airflow_url,
            "STATESTORE_VAR_DIR": str(tmp_path / "setup-var"),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert setup.returncode == 0, setup.stderr
    with psycopg.connect(airflow_url) as conn:
        run_pk = conn.execute(
            "INSERT INTO dag_run (dag_id, run_id, run_type, run_after) "
            "VALUES ('orders_daily', 'manual__image', 'manual', now()) RETURNING id"
        ).fetchone()[0]
        conn.execute(
            "INSERT INTO task_state_store (dag_run_id, task_id, key, dag_id, run_id, value, updated_at) "
            "VALUES (%s, 'extract', 'cursor', 'orders_daily', 'manual__image', '\"2026-12-01\"', now())",
            [run_pk],
        )

    port = free_port()
    password = uuid.uuid4().hex
    environment = {
        "DATABASE_URL": dashboard_url,
        "AIRFLOW_DATABASE_URL": airflow_url,
        "SECRET_KEY": "image-test-" + uuid.uuid4().hex,
        "ALLOWED_HOSTS": "127.0.0.1",
        "PORT": str(port),
        "WEB_CONCURRENCY": "2",
        "GUNICORN_GRACEFUL_TIMEOUT": str(GRACEFUL_TIMEOUT),
        "DJANGO_SUPERUSER_USERNAME": "admin",
        "DJANGO_SUPERUSER_EMAIL": "admin@example.com",
        "DJANGO_SUPERUSER_PASSWORD": password,
    }
    env_args = [arg for name, value in environment.items() for arg in ("--env", f"{name}={value}")]
    read_only = ["--read-only", "--tmpfs", "/tmp"]

    def manage(*args):
        return run(*read_only, *env_args, image, "manage.py", *args, check=False)

    migrate = manage("migrate", "--noinput")
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    assert "Applying" in migrate.stdout
    superuser = manage("createsuperuser", "--noinput")
    assert superuser.returncode == 0, superuser.stderr
    dry_run = manage("state_store_clean", "--dry-run")
    assert dry_run.returncode == 0, dry_run.stdout + dry_run.stderr

    container = f"statestore-image-{uuid.uuid4().hex[:8]}"
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            [*run_command(), "--name", container, *read_only, *env_args, image], stdout=log, stderr=subprocess.STDOUT
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        started = time.monotonic()
        while True:
            assert server.poll() is None, f"the container exited with {server.returncode}:\n{log_path.read_text()}"
            assert time.monotonic() - started < 120, f"not serving after 2 minutes:\n{log_path.read_text()}"
            try:
                with urllib.request.urlopen(f"{base_url}/healthz", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        print(f"\nimage: serving {time.monotonic() - started:.1f} s after `podman run`", file=sys.stderr)

        with urllib.request.urlopen(f"{base_url}/healthz", timeout=10) as response:
            assert (response.status, json.loads(response.read())) == (200, {"status": "ok"})
        with urllib.request.urlopen(f"{base_url}/readyz", timeout=10) as response:
            ready = json.loads(response.read())
            assert response.status == 200, ready
        assert ready["databases"] == {"default": "ok", "airflow": "ok"}, ready

        # The compiled catalogues are in the image: a Korean browser's sign-in page is in Korean.
        korean = urllib.request.Request(f"{base_url}/login/", headers={"Accept-Language": "ko-KR,ko;q=0.9"})
        with urllib.request.urlopen(korean, timeout=10) as response:
            login = response.read().decode()
        assert response.headers["Content-Language"] == "ko" and '<html lang="ko"' in login
        with translation.override("ko"):
            assert translation.gettext("Sign in") in login and translation.gettext("Sign in") != "Sign in"

        # The image's own HEALTHCHECK, as the engine runs it.
        assert engine("healthcheck", "run", container, check=False).returncode == 0

        # Signed in over HTTP, the DAG's page lists its run, and the run's page the task's key and value.
        request = _sign_in(base_url, "admin", password)
        status, _, page = request("/dags/orders_daily/")
        assert status == 200 and b"manual__image" in page, page[:3000]
        status, _, page = request(f"/runs/{run_pk}/")
        assert status == 200, page[:3000]
        assert b"extract" in page and b"cursor" in page and b"2026-12-01" in page, page[:3000]
        # Collected at build time: hashed, compressed static files, cached for good.
        stylesheet = re.search(rb'<link rel="stylesheet" href="([^"]+)"', page).group(1).decode()
        assert re.fullmatch(r"/static/css/app\.[0-9a-f]{12}\.css", stylesheet), stylesheet

        # Every process of the container runs as UID 50000, GID 0 (real, effective, saved and file system IDs).
        statuses = engine(
            "exec", container, "sh", "-c",
            'for s in /proc/[0-9]*/status; do grep -E "^(Name|Uid|Gid):" "$s" | tr -s "\\t\\n" "  "; echo; done',
        ).stdout  # fmt: skip
        processes = [line.split() for line in statuses.splitlines() if line.strip()]
        assert any(fields[1] == "gunicorn" for fields in processes), statuses
        for fields in processes:
            assert fields[2:] == ["Uid:", *["50000"] * 4, "Gid:", *["0"] * 4], statuses
        assert engine("exec", container, "id", "-u").stdout.strip() == "50000"
        # The root file system refuses writes; /tmp takes them.
        written = engine("exec", container, "sh", "-c", "touch /opt/statestore-admin/x 2>&1; touch /tmp/x", check=False)
        assert "Read-only file system" in written.stdout, written.stdout + written.stderr

        # SIGTERM (podman stop, a pod's termination) reaches gunicorn, which stops within its graceful timeout.
        stopping = time.monotonic()
        engine("kill", "--signal", "TERM", container)
        server.wait(timeout=GRACEFUL_TIMEOUT + 20)
        elapsed = time.monotonic() - stopping
        assert server.returncode == 0, log_path.read_text()
        assert elapsed < GRACEFUL_TIMEOUT + 5, elapsed
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGKILL)
        engine("rm", "--force", "--ignore", container, check=False)
        server.wait(timeout=60)
    log = log_path.read_text()
    assert "Booting worker" in log and "Handling signal: term" in log, log
    assert '"GET /healthz HTTP/1.1" 200' in log  # the access log, on stdout
