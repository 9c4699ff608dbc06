"""`manage.py airflow_plugin` (issue 25): one self-contained Airflow plugin file with the dashboard's address
written in, or a clear refusal (exit status 1) of an address that cannot be one. That Airflow itself loads the
file and serves it is tests/compat/test_airflow_plugin_against_airflow.py."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from statestore_admin.commands.airflow_plugin import views

ROOT = Path(__file__).resolve().parents[2]


def generated(*args) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", "airflow_plugin", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("embed", [(), ("--embed",)])
def test_the_file_compiles_and_imports_airflow_only(embed):
    source = generated("--url", "https://statestore.example.com/sub/", *embed)
    tree = ast.parse(source)  # compiles
    imported = {
        alias.name.split(".")[0] if isinstance(node, ast.Import) else (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported == {"airflow", "typing"}
    assert "'https://statestore.example.com/sub/" in source  # the address written in, its path kept


def test_linked_is_one_navigation_entry_and_embedded_one_tab_per_object():
    """Airflow shows per-object entries only framed (url_route), so they come with --embed."""
    base = "https://s.example"
    assert views(base, embed=False) == [
        {"name": "State store", "href": "https://s.example/", "destination": "nav", "category": "browse"}
    ]
    embedded = views(base, embed=True)
    assert [v["destination"] for v in embedded] == ["nav", "dag", "dag_run", "task", "task_instance", "asset"]
    assert len({v["url_route"] for v in embedded}) == len(embedded)  # Airflow drops a repeated url_route
    assert {v["name"] for v in embedded} == {"State store"}
    assert all(v["href"].endswith(("&embed=1", "?embed=1")) for v in embedded)
    ti = next(v for v in embedded if v["destination"] == "task_instance")
    assert ti["href"] == (
        "https://s.example/airflow/task_instance/?dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}"
        "&map_index={MAP_INDEX}&embed=1"
    )


@pytest.mark.parametrize(
    "url, words",
    [
        ("ftp://s.example", "http:// or https://"),
        ("statestore.example.com", "http:// or https://"),
        ("https://", "names no host"),
        ("https://s.example/?a=1", "no query"),
        ("https://s.example/#top", "no query"),
        ("https://user:pw@s.example/", "credentials"),
        ("https://s.example:99999/", "is not a URL"),
        ("https://s.example/a b", "characters"),
        ('https://s.example/"""', "characters"),
        ("https://s.example/{DAG_ID}", "characters"),
    ],
)
def test_a_malformed_url_is_refused(url, words):
    with pytest.raises(CommandError, match=words):
        call_command("airflow_plugin", url=url)


def test_a_refusal_exits_non_zero_and_prints_no_file():
    done = subprocess.run(
        [sys.executable, "manage.py", "airflow_plugin", "--url", "javascript:alert(1)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and done.stdout == ""
    assert "http:// or https://" in done.stderr
