"""The Airflow configuration reader: env over airflow.cfg over default, with sources and clear errors."""

import sys

import pytest

from statestore_admin.airflow.config import METASTORE_BACKEND, AirflowConfig, AirflowConfigError


@pytest.fixture
def home(tmp_path):
    return tmp_path / "airflow_home"


def write_cfg(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_when_nothing_is_configured(home):
    config = AirflowConfig({"AIRFLOW_HOME": str(home)})
    assert config.backend == METASTORE_BACKEND
    assert config.default_retention_days == 30
    assert config.clear_on_success is False
    assert config.state_cleanup_batch_size == 0
    assert config.max_value_storage_bytes == 65535
    assert config.worker_backend == ""
    assert config.sql_alchemy_conn.value is None
    assert {v.source for v in config.state_store_values()} == {"default"}


def test_airflow_cfg_in_airflow_home_overrides_the_default(home):
    cfg = write_cfg(home / "airflow.cfg", "[state_store]\ndefault_retention_days = 7\nclear_on_success = True\n")
    config = AirflowConfig({"AIRFLOW_HOME": str(home)})
    retention = config.get("state_store", "default_retention_days")
    assert (retention.value, retention.source) == (7, str(cfg))
    assert config.clear_on_success is True
    assert config.get("state_store", "backend").source == "default"


def test_airflow_config_variable_wins_over_airflow_home(home, tmp_path):
    write_cfg(home / "airflow.cfg", "[state_store]\nstate_cleanup_batch_size = 5\n")
    other = write_cfg(tmp_path / "elsewhere.cfg", "[state_store]\nstate_cleanup_batch_size = 500\n")
    config = AirflowConfig({"AIRFLOW_HOME": str(home), "AIRFLOW_CONFIG": str(other)})
    assert config.state_cleanup_batch_size == 500
    assert config.config_path == other


def test_airflow_home_defaults_to_home_airflow(tmp_path):
    write_cfg(tmp_path / "airflow" / "airflow.cfg", "[state_store]\nmax_value_storage_bytes = 10\n")
    config = AirflowConfig({"HOME": str(tmp_path)})
    assert config.config_path == tmp_path / "airflow" / "airflow.cfg"
    assert config.max_value_storage_bytes == 10


def test_environment_variable_overrides_airflow_cfg(home):
    write_cfg(home / "airflow.cfg", "[state_store]\ndefault_retention_days = 7\n")
    config = AirflowConfig({"AIRFLOW_HOME": str(home), "AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS": "0"})
    value = config.get("state_store", "default_retention_days")
    assert value.value == 0
    assert value.source == "environment variable AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS"


def test_workers_section_and_env_var_expansion(home):
    env = {
        "AIRFLOW_HOME": str(home),
        "PKG": "mypackage",
        "AIRFLOW__WORKERS__STATE_STORE_BACKEND": "$PKG.state.S3StateBackend",
    }
    assert AirflowConfig(env).worker_backend == "mypackage.state.S3StateBackend"


def test_sql_alchemy_conn_from_file_with_percent_escape_and_from_command(home):
    write_cfg(home / "airflow.cfg", "[database]\nsql_alchemy_conn = postgresql://u:p%%40ss@db/airflow\n")
    config = AirflowConfig({"AIRFLOW_HOME": str(home)})
    assert config.sql_alchemy_conn.value == "postgresql://u:p%40ss@db/airflow"
    cmd = f"{sys.executable} -c \"print('sqlite:////tmp/from-cmd.db')\""
    env = {"AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_CMD": cmd}
    conn = AirflowConfig(env).sql_alchemy_conn
    assert conn.value == "sqlite:////tmp/from-cmd.db"
    assert conn.source == "command in AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_CMD"


def test_cmd_variant_is_ignored_for_non_sensitive_options(home):
    env = {"AIRFLOW_HOME": str(home), "AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS_CMD": "echo 3"}
    assert AirflowConfig(env).default_retention_days == 30  # as Airflow: _CMD only for sensitive options


def test_secret_variant_is_refused_with_a_clear_message(home):
    env = {"AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_SECRET": "airflow/conn"}
    with pytest.raises(AirflowConfigError, match="AIRFLOW_DATABASE_URL"):
        _ = AirflowConfig(env).sql_alchemy_conn


@pytest.mark.parametrize(
    ("option", "raw", "fragment"),
    [
        ("DEFAULT_RETENTION_DAYS", "abc", "whole number of days"),
        ("DEFAULT_RETENTION_DAYS", "-1", "0 or more"),
        ("STATE_CLEANUP_BATCH_SIZE", "x", "whole number of rows"),
        ("MAX_VALUE_STORAGE_BYTES", "1.5", "whole number of bytes"),
        ("CLEAR_ON_SUCCESS", "maybe", "boolean"),
        ("BACKEND", "not a path", "dotted path"),
    ],
)
def test_invalid_values_name_the_option_and_its_source(home, option, raw, fragment):
    env = {"AIRFLOW_HOME": str(home), f"AIRFLOW__STATE_STORE__{option}": raw}
    config = AirflowConfig(env)
    with pytest.raises(AirflowConfigError) as excinfo:
        config.get("state_store", option.lower())
    message = str(excinfo.value)
    assert f"[state_store] {option.lower()}" in message
    assert f"AIRFLOW__STATE_STORE__{option}" in message
    assert fragment in message
    assert [message] == config.errors()


def test_invalid_value_in_the_file_names_the_file(home):
    cfg = write_cfg(home / "airflow.cfg", "[state_store]\nstate_cleanup_batch_size = lots\n")
    with pytest.raises(AirflowConfigError, match=str(cfg)):
        _ = AirflowConfig({"AIRFLOW_HOME": str(home)}).state_cleanup_batch_size


def test_airflow_style_booleans_and_integers(home):
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__STATE_STORE__CLEAR_ON_SUCCESS": "t # comment",
        "AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS": "14.0",
    }
    config = AirflowConfig(env)
    assert config.clear_on_success is True
    assert config.default_retention_days == 14


def test_unreadable_config_file_is_a_clear_error(home):
    write_cfg(home / "airflow.cfg", "this is not ini\n")
    with pytest.raises(AirflowConfigError, match="Cannot read Airflow's configuration file"):
        _ = AirflowConfig({"AIRFLOW_HOME": str(home)}).backend
