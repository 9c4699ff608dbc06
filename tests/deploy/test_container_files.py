"""The image's build files, in the normal suite (building the image is the image stage's: test_image.py)."""

import re

from tests.operations.test_production import ROOT


def test_docker_and_podman_send_the_same_build_context():
    """podman reads .containerignore, docker .dockerignore: the same allow-list, so neither sends .git or .venv."""
    ignore = (ROOT / ".containerignore").read_text()
    assert (ROOT / ".dockerignore").read_text() == ignore
    lines = [line for line in ignore.splitlines() if line and not line.startswith("#")]
    assert lines[0] == "*"  # everything out, then only what the build reads back in
    assert "!requirements.txt" in lines and "!statestore_admin/" in lines
    assert not any(name in line for line in lines for name in ("tests", ".git", ".venv", "var"))


def test_the_runtime_stage_runs_as_uid_50000_and_serves_without_a_shell():
    runtime = (ROOT / "Containerfile").read_text().split("\nFROM ")[-1]
    assert re.search(r"^USER 50000:0$", runtime, re.M)
    assert re.search(r'^CMD \["gunicorn", "--config", "/opt/statestore-admin/gunicorn.conf.py"\]$', runtime, re.M)
    assert "ENTRYPOINT" not in runtime and "RUN " not in runtime  # no shell needed, nothing built at this stage
    assert re.search(r'^HEALTHCHECK .* CMD \["healthcheck"\]$', runtime, re.M)
    assert "PORT=8080" in runtime
