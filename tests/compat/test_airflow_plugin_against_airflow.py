"""The plugin of `manage.py airflow_plugin` (issue 25) in real Airflow, each pinned version: `airflow plugins`
lists it without import errors, and `airflow api-server` serves it in /api/v2/plugins with the entries that
version accepts (the asset tab only where Airflow offers that destination: an entry it does not accept would
hide the whole plugin)."""

import json

import pytest
import requests

from .conftest import AIRFLOW_33, AIRFLOW_34, Dashboard, side_of

pytestmark = pytest.mark.compat
DESTINATIONS = {
    AIRFLOW_33: ["nav", "dag", "dag_run", "task", "task_instance"],
    AIRFLOW_34: ["nav", "dag", "dag_run", "task", "task_instance", "asset"],
}


@pytest.mark.parametrize("version", [AIRFLOW_33, AIRFLOW_34])
def test_airflow_loads_and_serves_the_plugin(request, version, servers, tmp_path):
    airflow, golden = side_of(request, version)
    # A copy of the database `airflow db migrate` made for the run: migrating an empty one was 4 s of its 14 s of CPU.
    db = airflow.copy(golden["db"], "plugin")
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    airflow.extra_cfg[db] = f"plugins_folder = {plugins}\n"
    made = Dashboard(airflow, db).manage("airflow_plugin", "--url", "https://statestore.example.com", "--embed")
    assert made.returncode == 0, made.stderr
    (plugins / "statestore_admin.py").write_text(made.stdout)

    listed = airflow.run(db, "plugins", "--output", "json")
    assert "statestore_admin" in listed.stdout and "rror" not in listed.stderr, (listed.stdout, listed.stderr)
    assert any(p["name"] == "statestore_admin" for p in json.loads(listed.stdout))

    process, airflow_url = airflow.api_server(db)  # the simple auth manager, all admins: no token needed
    servers.append(process)
    served = requests.get(f"{airflow_url}/api/v2/plugins", timeout=30).json()["plugins"]
    ours = next(p for p in served if p["name"] == "statestore_admin")
    assert [v["destination"] for v in ours["external_views"]] == DESTINATIONS[version]
    assert {v["name"] for v in ours["external_views"]} == {"State store"}
    errors = requests.get(f"{airflow_url}/api/v2/plugins/importErrors", timeout=30).json()
    assert errors["total_entries"] == 0, errors
