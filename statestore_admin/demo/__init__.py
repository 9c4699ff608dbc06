"""The embedded demo: a believable Airflow deployment's state (``data``, also used by tests and benchmarks;
its Airflow 3.4 regions ``regions``, the dates and ids of its runs ``runs``), the scale data of ``demo_data
--scale`` (``scale``), the ``demo_data`` and ``demo_setup`` commands that ``make run`` calls, and the demo's
accounts kept out of every other deployment (``accounts``, ``checks``: statestore.E050). It writes
through Airflow's tables (``statestore_admin.airflow``) and the domain (``statestore_admin.state``:
values, object storage, scopes, roles) and may import those two only; no face (pages, API, other
commands, admin) imports it, and it imports none of them.
"""
