"""Links to the same object in Airflow 3.3's UI: its React router's routes, below the UI's address.

The address is the ``AIRFLOW_UI_URL`` setting, else Airflow's ``[api] base_url`` (where Airflow's API server
serves its UI); without either, or with anything but an absolute http(s) address, there are no links. Each
id is one path segment, percent-encoded whole (``/``, ``:``, ``+``, ``#``, ``?``, ``%`` and spaces too),
as the UI's own links encode them.

The routes, as Airflow 3.3.2's ``airflow/ui/src/router.tsx`` declares them (the compat stage checks each
against the router shipped in the installed Airflow):

    /dags/{dag_id}
    /dags/{dag_id}/runs/{run_id}
    /dags/{dag_id}/runs/{run_id}/tasks/{task_id}/task-state-store                      (map index -1)
    /dags/{dag_id}/runs/{run_id}/tasks/{task_id}/mapped/{map_index}/task-state-store
    /dags/{dag_id}/runs/{run_id}/tasks/{task_id}/mapped                                (every map index)
    /assets/{asset_id}/asset-state-store

A task instance and an asset link to their state store tab, the UI's view of what the page here shows.

Airflow 3.4's UI (3.4.0b2) addresses a task instance in a dynamic region (a loop iteration, a map position
inside one) with the same routes and the query ``?region_id={uuid}&region_index={index}``: its task instance
links build the path from the public map index (``/mapped/{n}`` only when the task is mapped: -1 for a task
that sits directly in a loop) and add both parameters, which its pages read back (``searchParams``
``region_id``/``region_index``). ``task_instance_url`` does the same, so a link opens that very iteration.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode, urlsplit
from uuid import UUID

from django.conf import settings

from statestore_admin.airflow.config import AirflowConfigError, airflow_config
from statestore_admin.airflow.versions import SENTINEL_REGION_ID

TASK_STATE_TAB = "task-state-store"
ASSET_STATE_TAB = "asset-state-store"


def _usable(address: str) -> str:
    """``address`` without its trailing slashes, if it is an absolute http(s) URL without a query or
    fragment; else ''."""
    address = (address or "").strip()
    try:
        parts = urlsplit(address)
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        return ""
    return address.rstrip("/")


def ui_base_url() -> str:
    """Airflow's UI address, or '' when it is not known (no links)."""
    if settings.AIRFLOW_UI_URL:
        return _usable(settings.AIRFLOW_UI_URL)
    try:
        return _usable(airflow_config().api_base_url)
    except AirflowConfigError:
        return ""


def _url(*segments) -> str:
    base = ui_base_url()
    if not base:
        return ""
    return base + "".join("/" + quote(str(segment), safe="") for segment in segments)


def dag_url(dag_id: str) -> str:
    return _url("dags", dag_id)


def run_url(dag_id: str, run_id: str) -> str:
    return _url("dags", dag_id, "runs", run_id)


def task_instance_url(
    dag_id: str,
    run_id: str,
    task_id: str,
    map_index: int | None,
    region_id: UUID | None = None,
    region_index: int | None = None,
) -> str:
    """A task instance's state store tab; ``map_index`` None: the list of a mapped task's instances. In an
    Airflow 3.4 region, ``map_index`` is the public map index (-1 directly in a loop) and ``region_id`` with
    ``region_index`` the coordinate, as the 3.4 UI's query parameters."""
    path = ("dags", dag_id, "runs", run_id, "tasks", task_id)
    if map_index is None:
        return _url(*path, "mapped")
    url = _url(*path, TASK_STATE_TAB) if map_index < 0 else _url(*path, "mapped", map_index, TASK_STATE_TAB)
    if url and region_id is not None and region_id != SENTINEL_REGION_ID and region_index is not None:
        url += "?" + urlencode({"region_id": str(region_id), "region_index": region_index})
    return url


def asset_url(asset_id: int) -> str:
    return _url("assets", asset_id, ASSET_STATE_TAB)
