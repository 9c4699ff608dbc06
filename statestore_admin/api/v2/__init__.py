"""Airflow 3.3's ``/api/v2`` state-store endpoints (docs/airflow.md), on the shared domain services.

Same paths, parameters, bodies, status codes, defaults and error bodies as Airflow 3.3.2, so that
Airflow's Python client and scripts written for Airflow work unchanged. Where Airflow errs (NaN → 500,
a 513-character key → a database error), the answer is a 422 with a validation message instead.

Our extensions (docs/api.md), invisible to Airflow's clients: ``?resolve=true`` on a key's GET (the value
behind a worker-side reference), and ``X-Statestore-*`` headers on the 204 of a delete or clear.
"""
