"""statestore.E050: no demo account outside the demo (issue 24).

``make run`` prints the demo's shared password and writes it to a file; a dashboard on any Airflow database but
the demo's must not let those accounts sign in. The check runs at every start (``manage.py check``, ``migrate``,
``runserver``) and ``statestore_admin.wsgi`` runs it in each gunicorn worker, which then does not start.
"""

from django.conf import settings
from django.core import checks
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from statestore_admin.demo.accounts import demo_accounts


@checks.register("statestore")
def check_demo_accounts(app_configs=None, databases=None, **kwargs):
    if settings.AIRFLOW_DATABASE.embedded:  # the demo itself
        return []
    if databases is not None and DEFAULT_DB_ALIAS not in databases:
        return []
    try:
        # Before the first `migrate` there is no user table, hence no demo account either.
        if "auth_user" not in connections[DEFAULT_DB_ALIAS].introspection.table_names():
            return []
        names = list(demo_accounts().order_by("username").values_list("username", flat=True))
    except DatabaseError:  # an unreachable dashboard database fails on its own, loudly, at the first request
        return []
    if not names:
        return []
    return [
        checks.Error(
            f"The dashboard's database holds the demo's accounts ({', '.join(names)}), whose shared password "
            f"`make run` printed, and the dashboard is on the Airflow database "
            f"{settings.AIRFLOW_DATABASE.display_url}, not the demo's.",
            hint="Delete them with `manage.py remove_demo_accounts` (their API tokens go too; their audit events "
            "stay), or set DATABASE_URL to a fresh database. An account listed here that is a real person's and "
            "merely named like the demo's: rename it (in /admin/) before removing the others.",
            id="statestore.E050",
        )
    ]
