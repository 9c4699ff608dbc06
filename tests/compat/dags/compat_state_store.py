"""A DAG whose tasks write task and asset state through Airflow's own task SDK (for the compat stage)."""

from datetime import datetime, timedelta

from airflow.sdk import DAG, NEVER_EXPIRE, Asset, task

ORDERS = Asset(name="compat_orders", uri="s3://compat/orders")

with DAG("compat_state_store", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):

    @task(outlets=[ORDERS])
    def write(**context):
        state = context["task_state_store"]
        state.set("never", {"job": "j-1"}, retention=NEVER_EXPIRE)
        state.set("default", "n")
        state.set("expired", 3.5, retention=timedelta(seconds=-60))
        state.set("path/with: spaces", {"nested": {"list": [1, 2, {"b": True}], "unicode": "Grüße 🚀"}})
        context["asset_state_store"].set("watermark", {"date": "2026-11-30", "files": 42})

    @task
    def fold(x, **context):
        state = context["task_state_store"]
        state.set("checkpoint", {"x": x})
        state.set("stale", x, retention=timedelta(seconds=-1))

    write() >> fold.expand(x=[0, 1, 2])
