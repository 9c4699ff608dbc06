"""The embedded demo: a believable Airflow deployment's state (``data``, also used by tests and
benchmarks) and the ``demo_data`` and ``demo_setup`` commands that ``make run`` calls. It writes
through Airflow's tables (``statestore_admin.airflow``) and the domain (``statestore_admin.state``:
values, object storage, scopes, roles) and may import those two only; no face (pages, API, other
commands, admin) imports it, and it imports none of them.
"""
