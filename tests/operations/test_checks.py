"""System checks: the Airflow database, Airflow's configuration, separate databases."""

import sqlite3

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connections
from django.db.utils import ConnectionHandler

from statestore_admin.airflow.checks import check_airflow_config, check_airflow_database, inspect_airflow_database
from statestore_admin.airflow.schema import fixture_sql
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


def sqlite_connection(path):
    handler = ConnectionHandler({"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path)}})
    return handler["default"]


def ids(messages):
    return [m.id for m in messages]


def test_the_fixture_database_passes_and_check_names_its_schema(capsys):
    series = settings.AIRFLOW_FIXTURE_SERIES
    messages = inspect_airflow_database(connections["airflow"])
    assert ids(messages) == ["statestore.I001"]
    assert f"has the Airflow {series}" in messages[0].msg
    call_command("check")
    out = capsys.readouterr().err  # Django writes any issue, an Info too, to stderr
    assert "statestore.I001" in out and f"Airflow {series}" in out
    assert "ERRORS" not in out and "WARNINGS" not in out


def inspect_file(path):
    connection = sqlite_connection(path)
    try:
        return inspect_airflow_database(connection)
    finally:
        connection.close()


@pytest.mark.parametrize("series", ["3.3", "3.4"])
def test_each_supported_schema_is_recognised(tmp_path, series):
    """Both fixtures made by `airflow db migrate` (3.3.2 and 3.4.0b2): the check says which, with the revision."""
    sqlite3.connect(tmp_path / "airflow.db").executescript(fixture_sql("sqlite", series))
    messages = inspect_file(tmp_path / "airflow.db")
    assert ids(messages) == ["statestore.I001"]
    revision = {"3.3": "d2f4e1b3c5a7", "3.4": "9cffe90fa0c0"}[series]
    assert f"Airflow {series}" in messages[0].msg and revision in messages[0].msg


def test_an_unknown_revision_with_known_columns_is_a_warning(tmp_path):
    """A later release of a known series (3.4.0 after 3.4.0b2) may record another head: the columns decide."""
    db = sqlite3.connect(tmp_path / "airflow.db")
    db.executescript(fixture_sql("sqlite", "3.4"))
    db.execute("UPDATE alembic_version SET version_num = 'abcdef012345'")
    db.commit()
    messages = inspect_file(tmp_path / "airflow.db")
    assert ids(messages) == ["statestore.I001", "statestore.W003"]
    assert "abcdef012345 is not Airflow 3.4" in messages[1].msg


def test_a_migration_that_has_not_finished_is_named(tmp_path):
    """Between 3.3 and 3.4 (`airflow db migrate` stopped after 0143: region_id added, map_index not renamed)."""
    db = sqlite3.connect(tmp_path / "airflow.db")
    db.executescript(fixture_sql("sqlite", "3.3"))
    db.execute("ALTER TABLE task_state_store ADD COLUMN region_id CHAR(32) NOT NULL DEFAULT '0'")
    db.execute("UPDATE alembic_version SET version_num = '54a27b6f9d01'")  # 0143's revision
    db.commit()
    messages = inspect_file(tmp_path / "airflow.db")
    assert ids(messages) == ["statestore.E003"]
    assert "54a27b6f9d01" in messages[0].msg and "`airflow db migrate` has not finished" in messages[0].msg


def test_a_future_schema_is_an_error_naming_what_differs(tmp_path):
    db = sqlite3.connect(tmp_path / "airflow.db")
    db.executescript(fixture_sql("sqlite", "3.4"))
    db.execute("ALTER TABLE task_state_store ADD COLUMN region_path BLOB")
    db.execute("UPDATE alembic_version SET version_num = 'f00dfeed0001'")
    db.commit()
    messages = inspect_file(tmp_path / "airflow.db")
    assert ids(messages) == ["statestore.E003"]
    assert "task_state_store has unknown columns region_path" in messages[0].msg
    assert "against Airflow 3.3" in messages[0].msg and "against Airflow 3.4" in messages[0].msg


def test_a_database_without_the_state_tables(tmp_path):
    sqlite3.connect(tmp_path / "old.db").execute("CREATE TABLE dag_run (id INTEGER PRIMARY KEY)")
    messages = inspect_file(tmp_path / "old.db")
    assert ids(messages) == ["statestore.E002"]
    assert "task_state_store" in messages[0].msg and "asset_state_store" in messages[0].msg


def test_a_state_table_without_a_column(tmp_path):
    db = sqlite3.connect(tmp_path / "partial.db")
    db.execute(
        "CREATE TABLE task_state_store (id INTEGER PRIMARY KEY, dag_run_id INTEGER, task_id TEXT, map_index INTEGER, "
        "key TEXT, dag_id TEXT, run_id TEXT, value TEXT, updated_at TIMESTAMP)"
    )
    db.execute("CREATE TABLE asset_state_store (asset_id INTEGER, key TEXT, value TEXT, updated_at TIMESTAMP)")
    db.execute("CREATE TABLE task_instance (id TEXT, dag_id TEXT, task_id TEXT, run_id TEXT, map_index INTEGER)")
    db.commit()
    messages = inspect_file(tmp_path / "partial.db")
    assert ids(messages) == ["statestore.E003"]
    assert "task_state_store lacks expires_at" in messages[0].msg
    assert "last_updated_by_kind" in messages[0].msg


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
    assert ids(check_airflow_database(databases=None)) == ["statestore.I001"]
    assert ids(check_airflow_database(databases=["airflow"])) == ["statestore.I001"]


def test_invalid_airflow_option_is_reported(monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS", "abc")
    messages = check_airflow_config()
    assert ids(messages) == ["statestore.E004"]
    assert "[state_store] default_retention_days" in messages[0].msg
    assert "AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS" in messages[0].msg


# Worker-side objects (docs/worker-backends.md) --------------------------------------------------------
OBJECT_PATH = "AIRFLOW__COMMON_IO__STATE_STORE_OBJECTSTORAGE_PATH"


def worker_checks():
    from statestore_admin.objects.checks import check_worker_backend_settings

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


@pytest.mark.parametrize(
    ("settings_of", "expected"),
    [
        ({"AIRFLOW_API_URL": "https://airflow.example.com"}, ["statestore.W070"]),  # a database is read instead
        ({"AIRFLOW_API_MODE": True, "AIRFLOW_API_TOKEN": "t"}, []),
        (
            {"AIRFLOW_API_MODE": True, "AIRFLOW_API_TOKEN": "t", "AIRFLOW_API_TOKEN_COMMAND": "get-token"},
            ["statestore.E072"],
        ),
        ({"AIRFLOW_API_MODE": True, "AUDIT_TO_AIRFLOW_LOG": True}, ["statestore.E073"]),
        ({"AIRFLOW_API_MODE": True, "AIRFLOW_API_TIMEOUT": 0.0}, ["statestore.E074"]),
        ({"AIRFLOW_API_MODE": True, "AIRFLOW_API_CONCURRENCY": 0}, ["statestore.E074"]),
    ],
)
def test_managed_airflow_settings_that_contradict_each_other(settings_of, expected):
    from django.test import override_settings

    from statestore_admin.airflow.checks import check_airflow_api_settings

    with override_settings(**settings_of):
        assert ids(check_airflow_api_settings()) == expected
