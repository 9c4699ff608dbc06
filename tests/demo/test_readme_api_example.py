"""The README's curl example works against the demo as written (issue 23, item 16): its create_api_token names a
user the demo creates, its URL a run the demo has; and demo_setup's start message prints the same lines and
names demo-etl's scope by its patterns."""

import io
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command

from statestore_admin.demo.management.commands.demo_setup import create_demo_users, start_message
from statestore_admin.identity import roles
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> tuple[list[str], str]:
    """The create_api_token arguments and the curl URL of the README's example."""
    text = README.read_text()
    block = text[text.index("## The REST API") :]
    block = block[block.index("```sh\n") + 6 : block.index("```", block.index("```sh\n") + 6)]
    command = re.search(r"manage\.py (create_api_token [^)]*)\)", block).group(1)
    url = re.search(r'"(http://127\.0\.0\.1:8000/api/v2/[^"]+)"', block).group(1)
    return shlex.split(command), url


def test_the_readmes_curl_example_answers_the_demos_keys(client):
    roles.sync_roles()
    call_command("demo_data", allow_any_database=True, verbosity=0)
    create_demo_users("pw-for-tests")
    (name, *arguments), url = readme_example()
    out = io.StringIO()
    call_command(name, *arguments, stdout=out)
    token = out.getvalue().strip()
    response = client.get(urlsplit(url).path, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    keys = {entry["key"] for entry in response.json()["task_state_store"]}
    assert {"job_id", "attempt"} <= keys


def test_the_start_message_prints_the_example_and_names_the_scope_by_its_patterns():
    _, url = readme_example()
    message = start_message("http://127.0.0.1:8000/", "secret")
    assert "demo-etl (Operator, scoped to DAGs etl_* and assets s3://warehouse/raw/*)" in message
    assert "demo-team-etl" not in message
    assert "create_api_token demo " in message and f'"{url}"' in message
