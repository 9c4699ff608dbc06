"""The REST API (a face): Airflow's ``/api/v2`` state-store endpoints with Airflow's bodies and errors (``v2``),
and our own under ``/api/statestore/v1/`` (``ours``: stats, search, GC, orphans, insights, audit), with the
OpenAPI document (``schema``). Shared: the views' bases (``base``), reading a request as FastAPI does
(``parsing``), who may call what (``permissions``), the errors (``errors``), and the bodies (``serializers``),
which both render the answers and describe them. It imports the domain, ``statestore_admin.tokens`` (Bearer
authentication) and ``statestore_admin.web``, never another face."""
