"""Django admin as one face: every ``ModelAdmin`` of the project, registered on Django's default site at
``/admin/`` when Django's autodiscovery imports ``admin.py`` (which imports the modules here): task and
asset state (``state_store``), the dashboard's GC runs and statistics snapshots (``records``), access
scopes with Django's users and groups registered again (``accounts``), and API tokens (``tokens``). Like
every face it may import the domain (``statestore_admin.state``), Airflow's models and configuration
(``statestore_admin.airflow``) and the tokens app's model, and never another face (the pages, the API, the
commands); nothing imports it."""
