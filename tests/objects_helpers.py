"""Worker-side objects in tests: a real ``file://`` object storage configured as Airflow's common.io backend
is, objects written as the provider writes them, and a directory whose entries cannot be deleted.

Import from here directly (``from tests.objects_helpers import file_storage, write_object, read_only`` or
relatively); the ``object_storage`` fixture is the gzip storage of the most common case.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import uuid
from pathlib import Path

import pytest

from statestore_admin.objects import store as objects

# Airflow's names: a section's dot becomes an underscore ([common.io] → AIRFLOW__COMMON_IO__…).
ENV_PATH = "AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_PATH"
ENV_COMPRESSION = "AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_COMPRESSION"
ENV_THRESHOLD = "AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_THRESHOLD"
ENV_BACKEND = "AIRFLOW__WORKERS__STATE_STORE_BACKEND"
REF_KEY = "__airflow_state_ref__"


def set_option(monkeypatch, name: str, value: str | None) -> None:
    """Set (None: unset) an Airflow option's environment variable, ``name`` in Airflow's spelling."""
    if value is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, value)


def file_storage(tmp_path: Path, monkeypatch, compression: str | None = "gzip", threshold: int = 0) -> objects.Storage:
    """Configure common.io's object storage at ``file://<tmp_path>/state/`` through Airflow's environment
    variables (as a worker and the dashboard both read them) and return the dashboard's ``Storage``.
    ``compression`` None or "" means none."""
    root = tmp_path / "state"
    root.mkdir(parents=True, exist_ok=True)
    set_option(monkeypatch, ENV_BACKEND, objects.PROVIDER_BACKEND)
    set_option(monkeypatch, ENV_PATH, f"file://{root}/")  # Airflow's examples end with a slash; refs print without
    set_option(monkeypatch, ENV_COMPRESSION, compression or None)
    set_option(monkeypatch, ENV_THRESHOLD, str(threshold))
    store = objects.storage()
    assert store is not None, "the Airflow configuration did not pick up the object storage"
    assert store.base == f"file://{root}"
    return store


def ref_value(ref: str) -> dict:
    """What the SDK stores in the row for a reference (pass it as a factory's ``value``)."""
    return {REF_KEY: ref}


def write_object(storage: objects.Storage, ref: str, value) -> str:
    """Write ``json.dumps(value)`` at ``ref`` as common.io's backend does: parents created, opened "wb" with
    the configured compression. Returns ``ref``. Refuses a ref outside the storage (a test's mistake)."""
    assert storage.contains(ref), f"{ref} is outside {storage.base}"
    fs = storage.filesystem()
    path = storage.path(ref)
    fs.makedirs(fs._parent(path), exist_ok=True)
    with fs.open(path, "wb", compression=storage.compression or None) as f:
        f.write(json.dumps(value).encode("utf-8"))
    return ref


def write_bytes(storage: objects.Storage, ref: str, data: bytes) -> str:
    """Raw (already encoded, not compressed by us) bytes at ``ref``: for corrupt or non-JSON objects."""
    fs = storage.filesystem()
    path = storage.path(ref)
    fs.makedirs(fs._parent(path), exist_ok=True)
    with fs.open(path, "wb") as f:
        f.write(data)
    return ref


def object_exists(storage: objects.Storage, ref: str) -> bool:
    return storage.filesystem().exists(storage.path(ref))


def _can_create_in(directory: Path) -> bool:
    probe = directory / f".probe-{uuid.uuid4().hex}"
    try:
        probe.touch()
    except OSError:
        return False
    probe.unlink()
    return True


@contextlib.contextmanager
def read_only(directory: Path | str):
    """A directory whose entries can be neither created nor deleted (its files stay readable): chmod 0o555,
    and where that is not enough (root ignores the mode bits) ``chattr +i``. Undone on exit. Skips the test
    when neither works here."""
    directory = Path(directory)
    mode = stat.S_IMODE(directory.stat().st_mode)
    immutable = False
    os.chmod(directory, 0o555)
    try:
        if _can_create_in(directory):
            chattr = shutil.which("chattr")
            reason = "" if chattr else "chattr is not installed"
            if chattr:
                done = subprocess.run([chattr, "+i", str(directory)], capture_output=True, text=True)
                immutable = done.returncode == 0
                reason = done.stderr.strip()
            if not immutable or _can_create_in(directory):
                why = reason or "no effect"
                pytest.skip(f"cannot make {directory} read-only here (running as root; chattr +i: {why})")
        yield directory
    finally:
        if immutable:
            subprocess.run([shutil.which("chattr"), "-i", str(directory)], check=True)
        os.chmod(directory, mode)


@pytest.fixture
def object_storage(tmp_path, monkeypatch):
    """common.io's backend on ``file://<tmp>/state/`` with gzip (the ``Storage``)."""
    return file_storage(tmp_path, monkeypatch)


@pytest.fixture
def read_objects(settings):
    """Resolving references for display on (``WORKER_BACKEND_READ``)."""
    settings.WORKER_BACKEND_READ = True
    return settings
