"""The REST API (a face): Airflow's ``/api/v2`` state-store endpoints with Airflow's bodies and errors
(``airflow_v2``, ``errors``), and our own under ``/api/statestore/v1/`` (audit, GC, search, insights,
orphans), with the OpenAPI document (``schema``). It imports the domain, ``statestore_admin.tokens`` (Bearer
authentication) and ``statestore_admin.web``, never another face."""
