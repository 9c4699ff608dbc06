"""The real test OpenID provider (tests/oidc_provider: panva's oidc-provider from npm, pinned by its
package-lock.json; `make install-dev` runs `npm ci` there), started on loopback for a test module or session:
tests/sso/test_oidc_real_provider.py (no browser) and tests/browser/shell/test_oidc_sign_in.py (Chromium)."""

import os
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.ports import free_port

PROVIDER_DIR = Path(__file__).resolve().parent / "oidc_provider"


@contextmanager
def running_provider(*, client_id: str, client_secret: str, dashboard: str, accounts: Path):
    """The provider's issuer URL while it runs, for the client ``client_id`` of the dashboard at ``dashboard``;
    who may sign in with which groups is ``accounts`` (login -> {"email", "groups"}), read at each sign-in.
    Skipped without node or the installed package (a failure in CI, where make install-dev installs them)."""
    node = shutil.which("node")
    if node is None or not (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir():
        message = "the test OpenID provider is not installed: cd tests/oidc_provider && npm ci (make install-dev does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "CLIENT_ID": client_id,
        "CLIENT_SECRET": client_secret,
        "REDIRECT_URI": f"{dashboard}/oidc/callback/",
        "POST_LOGOUT_REDIRECT_URI": f"{dashboard}/login/",
        "ACCOUNTS_FILE": str(accounts),
    }
    process = subprocess.Popen(
        [node, "provider.js"], cwd=PROVIDER_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()
                    pytest.fail(f"the test OpenID provider did not start:\n{process.stdout.read()}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)
