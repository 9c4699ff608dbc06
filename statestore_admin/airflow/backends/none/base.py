"""The Airflow alias when the dashboard reaches Airflow through its REST API (``AIRFLOW_API_URL``): there is no
metadata database. Django's dummy backend, whose every use is ``AirflowDatabaseUnavailable`` with a reason a
person understands instead of "ENGINE is improperly configured": what needs the database (statistics, GC,
search across DAGs) then answers 503 on the page and in the API, saying why, and never 500."""

from django.db.backends.dummy import base as dummy

from statestore_admin.airflow.availability import AirflowDatabaseUnavailable

REASON = (
    "this dashboard reaches Airflow through its REST API (AIRFLOW_API_URL) and has no connection to Airflow's "
    "metadata database, which this needs"
)


class NoAirflowDatabase(AirflowDatabaseUnavailable):
    kind = "no_database"  # the 503 page says what the mode offers instead

    @property
    def detail(self) -> str:
        return f"Not available: {self.reason}"


def refuse(*args, **kwargs):
    raise NoAirflowDatabase(REASON)


class DatabaseOperations(dummy.DatabaseOperations):
    quote_name = refuse


class DatabaseWrapper(dummy.DatabaseWrapper):
    vendor = "none"
    display_name = "none (Airflow's REST API)"
    ops_class = DatabaseOperations
    _cursor = refuse
    ensure_connection = refuse
    _commit = refuse
    _savepoint_commit = refuse
    _set_autocommit = refuse
