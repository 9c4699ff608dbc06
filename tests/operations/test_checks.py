"""System checks: the Airflow database, Airflow's configuration, separate databases."""

import sqlite3

import pytest
from django.core.management import call_command
from django.db import connections
from django.db.utils import ConnectionHandler

from statestore_admin.airflow.checks import check_airflow_config, check_airflow_database, inspect_airflow_database
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


def sqlite_connection(path):
    handler = ConnectionHandler({"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path)}})
    return handler["default"]


def ids(messages):
    return [m.id for m in messages]


def test_the_fixture_database_passes(capsys):
    assert inspect_airflow_database(connections["airflow"]) == []
    call_command("check")
    assert "no issues" in capsys.readouterr().out


def test_a_database_without_the_state_tables(tmp_path):
    sqlite3.connect(tmp_path / "old.db").execute("CREATE TABLE dag_run (id INTEGER PRIMARY KEY)")
    connection = sqlite_connection(tmp_path / "old.db")
    try:
        messages = inspect_airflow_database(connection)
    finally:
        connection.close()
    assert ids(messages) == ["statestore.E002", "statestore.E002"]
    assert "task_state_store" in messages[0].msg and "asset_state_store" in messages[1].msg


def test_a_state_table_without_a_column(tmp_path):
    db = sqlite3.connect(tmp_path / "partial.db")
    db.execute(
        "CREATE TABLE task_state_store (id INTEGER PRIMARY KEY, dag_run_id INTEGER, task_id TEXT, map_index INTEGER, "
        "key TEXT, dag_id TEXT, run_id TEXT, value TEXT, updated_at TIMESTAMP)"
    )
    db.execute("CREATE TABLE asset_state_store (asset_id INTEGER, key TEXT, value TEXT, updated_at TIMESTAMP)")
    connection = sqlite_connection(tmp_path / "partial.db")
    try:
        messages = inspect_airflow_database(connection)
    finally:
        connection.close()
    assert ids(messages) == ["statestore.E003", "statestore.E003"]
    assert "expires_at" in messages[0].msg
    assert "last_updated_by_kind" in messages[1].msg


def test_an_unreachable_database():
    handler = ConnectionHandler(
        {
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": "airflow",
                "USER": "nobody",
                "HOST": "127.0.0.1",
                "PORT": "1",
                "OPTIONS": {"connect_timeout": 2},
            }
        }
    )
    messages = inspect_airflow_database(handler["default"])
    assert ids(messages) == ["statestore.E001"]
    assert "Cannot reach the Airflow database" in messages[0].msg


def test_database_check_skipped_for_other_databases_only():
    assert check_airflow_database(databases=["default"]) == []
    assert check_airflow_database(databases=None) == []
    assert check_airflow_database(databases=["airflow"]) == []


def test_invalid_airflow_option_is_reported(monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS", "abc")
    messages = check_airflow_config()
    assert ids(messages) == ["statestore.E004"]
    assert "[state_store] default_retention_days" in messages[0].msg
    assert "AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS" in messages[0].msg


# Worker-side objects (docs/worker-backends.md) --------------------------------------------------------
OBJECT_PATH = "AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_PATH"


def worker_checks():
    from statestore_admin.state.checks import check_worker_backend_settings

    return check_worker_backend_settings()


def test_worker_backend_settings_pass_without_storage(monkeypatch):
    monkeypatch.delenv(OBJECT_PATH, raising=False)
    assert worker_checks() == []


def test_reading_objects_without_storage_is_a_warning(monkeypatch, settings):
    monkeypatch.delenv(OBJECT_PATH, raising=False)
    settings.WORKER_BACKEND_READ = True
    assert ids(worker_checks()) == ["statestore.W001"]


def test_a_reachable_file_storage_passes(monkeypatch, settings, tmp_path):
    monkeypatch.setenv(OBJECT_PATH, f"file://{tmp_path}/state/")
    settings.WORKER_BACKEND_READ = True
    assert worker_checks() == []


def test_a_storage_whose_fsspec_package_is_missing_is_a_warning(monkeypatch):
    pytest.importorskip("fsspec")
    try:
        import s3fs  # noqa: F401

        pytest.skip("s3fs is installed here: the optional extra is present")
    except ImportError:
        pass
    monkeypatch.setenv(OBJECT_PATH, "s3://aws_default@bucket/task-state/")
    messages = worker_checks()
    assert ids(messages) == ["statestore.W002"]
    assert "s3fs" in messages[0].msg and "s3://aws_default@bucket/task-state" in messages[0].msg


def test_an_unsupported_compression_is_a_warning(monkeypatch, tmp_path):
    monkeypatch.setenv(OBJECT_PATH, f"file://{tmp_path}/state/")
    monkeypatch.setenv("AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_COMPRESSION", "snappy")
    messages = worker_checks()
    assert ids(messages) == ["statestore.W002"] and "snappy" in messages[0].msg


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        ("WORKER_BACKEND_READ_MAX_BYTES", 0, "statestore.E009"),
        ("WORKER_BACKEND_STORAGE_OPTIONS", {"aws_default": "profile"}, "statestore.E010"),
        ("WORKER_BACKEND_STORAGE_OPTIONS", ["x"], "statestore.E010"),
    ],
)
def test_invalid_worker_backend_settings_are_errors(settings, name, value, code):
    setattr(settings, name, value)
    assert code in ids(worker_checks())
