"""Security headers and `check --deploy` with the documented production settings (README, Production)."""

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connections

from statestore_admin.tokens.models import ApiToken
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
ROOT = Path(__file__).resolve().parents[2]

# Warnings of `check --deploy` that the README explains (Production → Security headers): HSTS for every
# subdomain and the browsers' preload list are the operator's decision, off unless asked for.
EXPLAINED = {"security.W005", "security.W021", "statestore.I001"}  # I001: which Airflow schema

POLICY = {
    "default-src": {"'self'"},
    "script-src": {"'self'"},
    "style-src": {"'self'"},
    "img-src": {"'self'", "data:"},
    "object-src": {"'none'"},
    "base-uri": {"'self'"},
    "form-action": {"'self'"},
    "frame-ancestors": {"'none'"},
}
HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def url_of(alias):
    db = connections[alias].settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def production_env(tmp_path):
    """README's production settings, on the test databases."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "AIRFLOW_HOME": os.environ["AIRFLOW_HOME"],
        "STATESTORE_VAR_DIR": str(tmp_path / "var"),
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "dash.example.org",
        "DATABASE_URL": url_of("default"),
        "AIRFLOW_DATABASE_URL": url_of("airflow"),
        "BEHIND_TLS_PROXY": "1",
        "SECURE_HSTS_SECONDS": "31536000",
    }


def manage(*args, env):
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )


def issue_ids(output: str) -> set[str]:
    return set(re.findall(r"\(([\w.]+\.[CEWI]\d{3})\)", output))


def policy_of(response) -> dict[str, set[str]]:
    directives = [part.split() for part in response["Content-Security-Policy"].split(";") if part.strip()]
    return {name: set(values) for name, *values in directives}


def assert_security_headers(response):
    assert policy_of(response) == POLICY
    for name, value in HEADERS.items():
        assert response[name] == value, name


def test_check_deploy_warns_only_of_what_the_readme_explains(production_env):
    result = manage("check", "--deploy", env=production_env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert issue_ids(output) <= EXPLAINED, output
    assert "drf_spectacular" not in output  # the Bearer scheme is known to the schema (api/schema.py)


def test_check_deploy_is_clean_once_the_operator_opts_into_hsts_preload(production_env):
    env = {**production_env, "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1", "SECURE_HSTS_PRELOAD": "1"}
    result = manage("check", "--deploy", env=env)
    assert result.returncode == 0, result.stderr
    # Only the Info naming Airflow's schema: no warning, no error.
    assert "System check identified 1 issue" in result.stderr, result.stdout + result.stderr
    assert "statestore.I001" in result.stderr and "WARNINGS" not in result.stderr


def test_check_deploy_catches_an_insecure_setting(production_env):
    """The allow-list above is not a blanket: what the README does not explain is reported."""
    result = manage("check", "--deploy", env={**production_env, "SECURE_HSTS_SECONDS": "0"})
    assert "security.W004" in issue_ids(result.stdout + result.stderr)


def test_headers_behind_the_tls_proxy(production_env):
    """HTTPS as the proxy reports it: HSTS and secure cookies; plain HTTP is redirected."""
    probe = (
        "import json\n"
        "from django.test import Client\n"
        "c = Client(HTTP_HOST='dash.example.org')\n"
        "s = c.get('/login/', HTTP_X_FORWARDED_PROTO='https')\n"
        "p = c.get('/login/')\n"
        "print(json.dumps({'status': s.status_code, 'hsts': s.get('Strict-Transport-Security'),"
        " 'csp': s.get('Content-Security-Policy'), 'csrf_secure': bool(s.cookies['csrftoken']['secure']),"
        " 'plain': p.status_code, 'location': p.get('Location')}))\n"
    )
    # Not collected (the headers do not depend on it): the production storage then serves the source folders
    # (tests/operations/test_production.py); collectstatic hashed and compressed every file for nothing here.
    static_root = Path(production_env["STATESTORE_VAR_DIR"]) / "static"
    static_root.mkdir(parents=True, exist_ok=True)
    result = manage("shell", "--no-imports", "-c", probe, env={**production_env, "STATIC_ROOT": str(static_root)})
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["status"] == 200
    assert seen["hsts"] == "max-age=31536000"
    assert "default-src 'self'" in seen["csp"]
    assert seen["csrf_secure"] is True
    assert (seen["plain"], seen["location"]) == (301, "https://dash.example.org/login/")


def test_security_headers_on_pages(client, operator):
    assert_security_headers(client.get("/login/"))
    client.force_login(operator)
    response = client.get("/search/")
    assert response.status_code == 200
    assert_security_headers(response)
    assert "unsafe" not in response["Content-Security-Policy"]


def test_security_headers_on_api_responses(client, operator):
    assert_security_headers(client.get("/api/statestore/v1/stats"))  # 401
    _, token = ApiToken.issue(operator, "tests")
    response = client.get("/api/statestore/v1/stats", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    assert_security_headers(response)


def test_schema_declares_the_bearer_scheme(client, operator):
    _, token = ApiToken.issue(operator, "tests")
    response = client.get("/api/schema/?format=json", HTTP_AUTHORIZATION=f"Bearer {token}")
    schema = json.loads(response.content)
    assert schema["components"]["securitySchemes"]["Bearer"]["scheme"] == "bearer"
    stats = schema["paths"]["/api/statestore/v1/stats"]["get"]
    assert {"Bearer": []} in stats["security"]
