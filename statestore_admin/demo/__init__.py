"""The embedded demo: a believable Airflow deployment's state (``data``, also used by tests and
benchmarks), the ``demo_data`` and ``demo_setup`` commands that ``make run`` calls, and the demo's accounts
kept out of every other deployment (``accounts``, ``checks``: statestore.E050). It writes
through Airflow's tables (``statestore_admin.airflow``) and the domain (``statestore_admin.state``:
values, object storage, scopes, roles) and may import those two only; no face (pages, API, other
commands, admin) imports it, and it imports none of them.
"""
