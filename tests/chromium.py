"""The Chromium every browser test drives (tests/browser, and the compat stage's pages in Airflow's UI): Debian's.

Its headless shell (``apt-get install -y chromium-headless-shell``: the same Chromium release, built as the "old
headless" shell, which is what Playwright itself runs for headless Chromium) where it is installed; else the whole
browser (``apt-get install -y chromium``) run headless. Both render with the same Blink and V8. The shell has no
browser window, profile or GPU process to keep up: the same 52 browser tests used 148 s of CPU on it against 218 s
on the whole browser, whose processes were a sixth of CI's CPU (docs/testing.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HEADLESS_SHELL = Path("/usr/bin/chromium-headless-shell")
BROWSER = Path("/usr/bin/chromium")
INSTALL = "apt-get install -y chromium-headless-shell (or chromium)"
# No sandbox: the tests run as root in a container, which Chromium's sandbox refuses. No GPU: there is none.
ARGS = ["--no-sandbox", "--disable-gpu"]


def executable() -> Path | None:
    """The headless shell, else the browser, else None."""
    return next((path for path in (HEADLESS_SHELL, BROWSER) if path.exists()), None)


def required() -> Path:
    """``executable()``, or the test stops: it fails in CI (CI=true, where .ci/run installs it), else it skips
    with the command that installs it."""
    path = executable()
    if path is None:
        message = f"no Chromium at {HEADLESS_SHELL} or {BROWSER}: {INSTALL} (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path
