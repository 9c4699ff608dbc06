"""Reading objects for display: the deadline on storage that does not answer, and links out of the base path."""

import os
import threading

import pytest

from statestore_admin.objects import store as objects


@pytest.fixture
def store(tmp_path, settings):
    settings.WORKER_BACKEND_READ = True
    (tmp_path / "state").mkdir()
    return objects.Storage(f"file://{tmp_path}/state")


def test_storage_that_does_not_answer_is_reported_after_the_deadline(store, settings, tmp_path):
    """A named pipe without a writer blocks its reader in open(), like storage that stops answering."""
    settings.WORKER_BACKEND_READ_TIMEOUT = 0.5
    ref = store.task_ref("etl", "r", "t", -1, "k")
    path = store.path(ref)
    os.makedirs(os.path.dirname(path))
    os.mkfifo(path)
    try:
        resolved = objects.resolve(objects.classify(ref, store, [ref]), store)
        assert resolved.text is None
        assert resolved.error == "The storage did not answer within 0.5 s."
    finally:  # let the blocked reader go: open the pipe for writing, then close it (end of file)
        opened = threading.Event()

        def release():
            fd = os.open(path, os.O_WRONLY)
            opened.set()
            os.close(fd)

        threading.Thread(target=release, daemon=True).start()
        assert opened.wait(5)


def test_a_link_out_of_the_base_path_is_never_read(store, tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text('{"password": "hunter2"}')
    ref = store.task_ref("etl", "r", "t", -1, "k")
    path = store.path(ref)
    os.makedirs(os.path.dirname(path))
    os.symlink(secret, path)
    resolved = objects.resolve(objects.classify(ref, store, [ref]), store)
    assert resolved.text is None and "hunter2" not in (resolved.error or "")
    assert "link out of the configured base path" in resolved.error


def test_a_link_inside_the_base_path_is_read(store, tmp_path):
    target = tmp_path / "state" / "shared.json"
    target.write_text('{"ok": true}')
    ref = store.task_ref("etl", "r", "t", -1, "k")
    path = store.path(ref)
    os.makedirs(os.path.dirname(path))
    os.symlink(target, path)
    assert objects.resolve(objects.classify(ref, store, [ref]), store).text == '{"ok": true}'
