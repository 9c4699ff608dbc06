"""Test settings: the real settings module, on test databases chosen by ``STATESTORE_TEST_DB``.

``STATESTORE_TEST_DB=sqlite`` (default) or ``postgres`` (127.0.0.1:5432, user postgres, or
``TEST_DATABASE_URL`` / ``TEST_AIRFLOW_DATABASE_URL``). pytest-django creates ``test_*`` databases
from these, so nothing here touches a real database. Airflow variables of the developer's shell are
removed so that tests see Airflow's defaults unless a test sets an option itself.
"""

import os
import tempfile
from pathlib import Path

for name in list(os.environ):
    if name.startswith(("AIRFLOW__", "WORKER_BACKEND_")) or name in ("AIRFLOW_CONFIG", "AIRFLOW_DATABASE_URL"):
        del os.environ[name]
os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="statestore-test-airflow-home-")

TEST_DB = os.environ.get("STATESTORE_TEST_DB", "sqlite")
_var = Path(tempfile.mkdtemp(prefix="statestore-test-var-"))
os.environ["STATESTORE_VAR_DIR"] = str(_var)
if TEST_DB == "postgres":
    os.environ["DATABASE_URL"] = os.environ.get("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/statestore")
    os.environ["AIRFLOW_DATABASE_URL"] = os.environ.get(
        "TEST_AIRFLOW_DATABASE_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/statestore_airflow"
    )
elif TEST_DB == "sqlite":
    os.environ["DATABASE_URL"] = f"sqlite:///{_var / 'dashboard.sqlite3'}"
    os.environ["AIRFLOW_DATABASE_URL"] = f"sqlite:///{_var / 'airflow.sqlite3'}"
else:
    raise RuntimeError(f"STATESTORE_TEST_DB must be sqlite or postgres, not {TEST_DB!r}")
os.environ["SECRET_KEY"] = "tests-only-not-secret"

from statestore_admin.settings import *  # noqa: E402,F403

if TEST_DB == "sqlite":  # files, not memory: tests that run manage.py in a subprocess share them
    for _alias, _db in DATABASES.items():  # noqa: F405
        _db["TEST"] = {"NAME": str(_var / f"test-{_alias}.sqlite3")}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405
WHITENOISE_USE_FINDERS = True
_SHARED_TABLE = {"whitenoise.middleware.WhiteNoiseMiddleware": "tests.static_files.SharedTableWhiteNoiseMiddleware"}
MIDDLEWARE = [_SHARED_TABLE.get(name, name) for name in MIDDLEWARE]  # noqa: F405
