"""For tests that write Airflow's tables with raw SQL, as Airflow does: the column names of the schema the
test database has (Airflow 3.3's by default, 3.4's with AIRFLOW_FIXTURE_SERIES=3.4)."""

from django.conf import settings
from django.db import connections

from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.airflow.versions import schema_of
from statestore_admin.state.services.rows import natural_key


def index_column(alias: str = "airflow") -> str:
    """``map_index`` on 3.3, ``region_index`` on 3.4."""
    return schema_of(connections[alias]).index_column


def fixture_index_column() -> str:
    """The index column of a database made from the fixture of ``AIRFLOW_FIXTURE_SERIES`` (no connection)."""
    return "region_index" if settings.AIRFLOW_FIXTURE_SERIES == "3.4" else "map_index"


def task_key_conflict(alias: str = "airflow") -> str:
    """The columns of Airflow's unique key of a task key, for ``ON CONFLICT (…)``."""
    return ", ".join(natural_key(TaskStateStore, schema_of(connections[alias])))
