"""Which Airflow database the dashboard uses, and SQLAlchemy URL translation."""

import pytest

from statestore_admin.airflow.config import AirflowConfigError
from statestore_admin.airflow.dburl import NO_DATABASE, mask_url, resolve_airflow_database, sqlalchemy_url_to_django


@pytest.mark.parametrize("url", ["postgresql+psycopg2://", "postgresql+psycopg://", "postgresql://", "postgres://"])
def test_postgres_urls_of_every_driver(url):
    settings = sqlalchemy_url_to_django(url + "airflow:s3cr%40t@db.example:6432/airflow_meta?sslmode=require")
    assert settings == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "airflow_meta",
        "USER": "airflow",
        "PASSWORD": "s3cr@t",
        "HOST": "db.example",
        "PORT": "6432",
        "OPTIONS": {"sslmode": "require", "application_name": "statestore-admin"},
    }


def test_postgres_unix_socket_and_own_application_name():
    settings = sqlalchemy_url_to_django("postgresql://airflow@/airflow?host=/var/run/postgresql&application_name=x")
    assert settings["HOST"] == "/var/run/postgresql"
    assert settings["OPTIONS"] == {"application_name": "x"}


def test_sqlite_absolute_and_relative_paths():
    assert sqlalchemy_url_to_django("sqlite:////abs/path/airflow.db")["NAME"] == "/abs/path/airflow.db"
    assert sqlalchemy_url_to_django("sqlite:///relative.db")["NAME"] == "relative.db"


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("mysql+mysqldb://u:p@h/airflow", "supports PostgreSQL and SQLite"),
        ("sqlite://", "in-memory"),
        ("postgresql://u:secret@h:5432/", "names no database"),
    ],
)
def test_unsupported_urls_are_clear_errors_without_passwords(url, fragment):
    with pytest.raises(AirflowConfigError, match=fragment) as excinfo:
        sqlalchemy_url_to_django(url)
    assert "secret" not in str(excinfo.value)


def test_mask_url_hides_the_password():
    assert mask_url("postgresql://u:pw@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert mask_url("sqlite:////x.db") == "sqlite:////x.db"


def test_resolution_order(tmp_path):
    embedded = tmp_path / "embedded.sqlite3"
    home = tmp_path / "home"
    home.mkdir()
    env = {"AIRFLOW_HOME": str(home)}
    assert resolve_airflow_database(env, embedded).embedded
    assert resolve_airflow_database(env, embedded).settings["NAME"] == str(embedded)

    (home / "airflow.cfg").write_text("[database]\nsql_alchemy_conn = sqlite:////from/cfg.db\n")
    from_cfg = resolve_airflow_database(env, embedded)
    assert (from_cfg.settings["NAME"], from_cfg.source, from_cfg.embedded) == (
        "/from/cfg.db",
        str(home / "airflow.cfg"),
        False,
    )

    env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = "postgresql+psycopg2://u:pw@h/from_env"
    from_env = resolve_airflow_database(env, embedded)
    assert from_env.settings["NAME"] == "from_env"
    assert from_env.source == "environment variable AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"
    assert from_env.display_url == "postgresql+psycopg2://u:***@h/from_env"

    env["AIRFLOW_DATABASE_URL"] = "postgresql://u@h/ours"
    ours = resolve_airflow_database(env, embedded)
    assert (ours.settings["NAME"], ours.source) == ("ours", "environment variable AIRFLOW_DATABASE_URL")


def test_demo_forces_the_embedded_database(tmp_path):
    env = {"AIRFLOW_DATABASE_URL": "postgresql://u@h/ours", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "sqlite:////x.db"}
    demo = resolve_airflow_database(env, tmp_path / "e.sqlite3", demo=True)
    assert demo.embedded and demo.settings["NAME"] == str(tmp_path / "e.sqlite3")


def test_airflow_api_url_means_no_database_unless_one_is_named(tmp_path):
    """Managed Airflow: AIRFLOW_API_URL and no AIRFLOW_DATABASE_URL is the REST API, whatever airflow.cfg says;
    with AIRFLOW_DATABASE_URL too, the database is read (and the check warns that the API URL is ignored)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "airflow.cfg").write_text("[database]\nsql_alchemy_conn = sqlite:////from/cfg.db\n")
    env = {"AIRFLOW_HOME": str(home), "AIRFLOW_API_URL": "https://airflow.example.com"}
    managed = resolve_airflow_database(env, tmp_path / "e.sqlite3")
    assert (managed.settings["ENGINE"], managed.source) == (NO_DATABASE, "environment variable AIRFLOW_API_URL")
    assert not managed.embedded
    env["AIRFLOW_DATABASE_URL"] = "postgresql://u@h/ours"
    assert resolve_airflow_database(env, tmp_path / "e.sqlite3").settings["NAME"] == "ours"
    assert resolve_airflow_database(env, tmp_path / "e.sqlite3", demo=True).embedded
