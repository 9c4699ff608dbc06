"""The management-command face: ``manage.py`` commands for operators, cron and schedulers (GC,
orphans, statistics, restore, audit pruning) in ``management/commands/``, and the account commands
(break-glass links, API tokens, access scopes) in the ``accounts`` app's.
Like the pages and the API it is a thin face over the domain: it may import ``statestore_admin.state``,
``statestore_admin.airflow`` and ``statestore_admin.tokens``, never another face (``dashboard``,
``api``, the admin). Airflow's schema plumbing (``migrate``, ``create_airflow_schema``) stays in
``statestore_admin.airflow`` and the demo's commands in ``statestore_admin.demo``.
"""
