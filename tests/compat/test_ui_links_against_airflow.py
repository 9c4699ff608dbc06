"""Links into Airflow's UI, against Airflow 3.3.2 itself (issue 14): the dashboard configured only by Airflow's
``[api] base_url`` links its DAG, run, task instance (mapped too) and asset pages to URLs that Airflow's own
API server answers with its UI, on routes that the UI's router, as shipped in the installed package, declares.

The UI is a single-page app: its server answers every path under it with the same ``index.html`` and the
router in the browser decides. So each URL is fetched (200, the UI's page) and its path is also matched
against the route paths found in the shipped router bundle (``airflow/ui/dist/assets/index-*.js``).
"""

import html
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import requests

from .conftest import DAG_ID, Dashboard, query
from .test_against_airflow import logged_in

pytestmark = pytest.mark.compat
LINK = re.compile(r'<a class="airflow-link" href="([^"]+)"')


def declared_routes(venv: Path) -> set[str]:
    """Every route path the UI's router declares (``path: "dags/:dagId"``, and tab paths such as
    ``task-state-store``), read from the JavaScript bundle of the installed Airflow."""
    bundles = list(venv.glob("lib/python3*/site-packages/airflow/ui/dist/assets/index-*.js"))
    assert bundles, "Airflow's UI bundle is not in the installed package"
    text = "".join(bundle.read_text(encoding="utf-8", errors="replace") for bundle in bundles)
    return {path for path in re.findall(r"""path:\s*[`"']([^`"'$]+)[`"']""", text) if path != "*"}


def routed(path: str, routes: set[str]) -> bool:
    """Whether ``path`` is a declared route (``:name`` matches one segment), alone or followed by one more
    declared route path (a tab)."""
    segments = path.strip("/").split("/")
    for route in routes:
        pattern = route.strip("/").split("/")
        if not route.strip("/") or len(pattern) > len(segments):
            continue
        if all(p.startswith(":") or p == s for p, s in zip(pattern, segments, strict=False)):
            rest = "/".join(segments[len(pattern) :])
            if not rest or rest in routes:
                return True
    return False


def test_links_open_the_same_objects_in_airflows_ui(airflow, golden, servers):
    routes = declared_routes(airflow.venv)
    assert {"dags/:dagId", "dags/:dagId/runs/:runId", "assets/:assetId"} <= routes
    assert not routed("/dags/d/runs/r/tasks/t/no-such-tab", routes) and not routed("/no-such-page/x", routes)

    db = airflow.copy(golden["db"], "uilinks")
    process, airflow_url = airflow.api_server(db)
    servers.append(process)
    dashboard = Dashboard(airflow, db)
    dashboard.setup()
    # Only Airflow's own option tells the dashboard where the UI is (AIRFLOW_UI_URL is not set).
    process, url = dashboard.server(AIRFLOW__API__BASE_URL=airflow_url + "/")
    servers.append(process)
    session = logged_in(url)

    run_pk, run_id = query(db, "SELECT id, run_id FROM dag_run WHERE dag_id = %s", [DAG_ID])[0]
    asset_id = golden["asset_id"]
    run_path = f"/dags/{DAG_ID}/runs/{run_id}"
    pages = {
        f"/dags/{DAG_ID}/": f"/dags/{DAG_ID}",
        f"/runs/{run_pk}/": run_path,
        f"/runs/{run_pk}/tasks/write/?map_index=-1": f"{run_path}/tasks/write/task-state-store",
        f"/runs/{run_pk}/tasks/fold/?map_index=1": f"{run_path}/tasks/fold/mapped/1/task-state-store",
        f"/runs/{run_pk}/tasks/fold/?map_index=all": f"{run_path}/tasks/fold/mapped",
        f"/assets/{asset_id}/": f"/assets/{asset_id}/asset-state-store",
    }
    for page, expected in pages.items():
        response = session.get(url + page)
        assert response.status_code == 200, page
        found = LINK.findall(response.text)
        assert len(found) == 1, (page, found)
        link = html.unescape(found[0])
        assert link.startswith(airflow_url + "/"), link
        path = urlsplit(link).path
        assert [unquote(s) for s in path.split("/")] == expected.split("/"), (page, link)  # each id one segment
        assert routed(path, routes), (page, path)
        answer = requests.get(link, timeout=30)
        assert answer.status_code == 200 and '<div id="root"' in answer.text, (link, answer.status_code)
