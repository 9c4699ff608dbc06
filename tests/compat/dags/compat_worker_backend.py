"""A DAG writing through Airflow's task SDK with a worker-side state backend configured (issue 15's compat stage).

With ``[workers] state_store_backend`` = the common.io provider's ``StateStoreObjectStorageBackend`` and a
small ``[common.io] state_store_objectstorage_threshold``, short values stay inline (the row holds the JSON
text as the reference) and long ones become objects under ``state_store_objectstorage_path``. Keys carry the
characters that need quoting in object paths (``/``, spaces, ``:``, ``%``, ``<&>``; unicode in asset names
and asset keys); the task id is unicode (Airflow's ``[\\w.-]+`` allows it) and the run id of ``airflow dags
test`` holds ``:`` and ``+``. Task keys stay ASCII here: ``airflow dags test`` (Airflow 3.3.2) fails to write
a task key with non-ASCII characters (its in-process execution API decodes the request path wrongly), so
``airflow_side.py sdk-set-task`` writes those the way the SDK does.

Every writing task reads its keys back through the same SDK accessors and records what it got in
``$AIRFLOW_HOME/readback/<task>.<map_index>.json`` (``{"task"|"asset:<name>": {key: value}}``): what
Airflow's SDK reads back, for the tests to compare with what the dashboard shows. ``COMPAT_VARIANT`` in the
environment changes the long values (a later write of the same keys, with new content).
"""

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, NEVER_EXPIRE, Asset, task

DAG_ID = "compat.worker-backend"
WRITER = "schreibe_größe"
ORDERS = Asset(name="compat wb/orders: größe", uri="s3://compat-wb/orders")
EVENTS = Asset(name="compat_wb_events", uri="s3://compat-wb/events/2026")


def variant() -> str:
    return os.environ.get("COMPAT_VARIANT", "1")


def long(tag: str, **extra):
    """A value whose JSON is well over the threshold, with a distinctive marker the tests look for."""
    return {"marker": f"marker-{tag}-v{variant()}", "pad": "x" * 40, **extra}


TASK_VALUES = {
    "short": 7,
    "a/b: c d": "ok",
    "path/with: spaces": long("path", nested={"list": [1, 2, {"b": True}], "unicode": "Grüße 🚀"}),
    "html <b>&amp;</b>": long("html", text="Grüße 🚀 «quoted» <b>&amp;</b>"),
    "100%/encoded%20key": long("percent"),
    "never": long("never"),
    "expired long": long("expired"),
    "expired": 1,
}
RETENTION = {"never": NEVER_EXPIRE, "expired long": timedelta(seconds=-60), "expired": timedelta(seconds=-60)}
ORDERS_BY_NAME = {"watermark": long("watermark", date="2026-11-30", files=42), "tiny": 1, "wm/größe: x": long("wm")}
BY_URI = {
    ORDERS.uri: {"via uri/ü": long("via-uri")},
    EVENTS.uri: {"cursor": long("cursor", offset=17), "c": 2},
}


def record(name: str, read: dict) -> None:
    folder = Path(os.environ["AIRFLOW_HOME"]) / "readback"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(read, ensure_ascii=False))


with DAG(DAG_ID, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):

    @task(task_id=WRITER, outlets=[ORDERS])
    def write(**context):
        state = context["task_state_store"]
        for key, value in TASK_VALUES.items():
            if key in RETENTION:
                state.set(key, value, retention=RETENTION[key])
            else:
                state.set(key, value)
        orders = context["asset_state_store"][ORDERS]
        for key, value in ORDERS_BY_NAME.items():
            orders.set(key, value)
        record(
            f"{WRITER}.-1",
            {
                "task": {key: state.get(key) for key in TASK_VALUES},
                f"asset:{ORDERS.name}": {key: orders.get(key) for key in ORDERS_BY_NAME},
            },
        )

    @task(task_id="by_uri", outlets=[Asset.ref(uri=ORDERS.uri), Asset.ref(uri=EVENTS.uri), EVENTS])
    def by_uri(**context):
        read = {}
        for uri, values in BY_URI.items():
            accessor = context["asset_state_store"][Asset.ref(uri=uri)]
            for key, value in values.items():
                accessor.set(key, value)
            read[f"uri:{uri}"] = {key: accessor.get(key) for key in values}
        record("by_uri.-1", read)

    @task
    def fold(x, **context):
        state = context["task_state_store"]
        index = context["ti"].map_index
        values = {"checkpoint/x": long(f"fold-{x}", x=x), "n": x, "stale long": long(f"stale-{x}")}
        state.set("checkpoint/x", values["checkpoint/x"])
        state.set("n", x)
        state.set("stale long", values["stale long"], retention=timedelta(seconds=-1))
        record(f"fold.{index}", {"task": {key: state.get(key) for key in values}})

    write() >> by_uri() >> fold.expand(x=[0, 1, 2])
