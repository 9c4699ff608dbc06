"""The trusted-header mode over real HTTP, against gunicorn as `make serve` starts it: the server trusts
127.0.0.2 only (TRUSTED_PROXY_ADDRESSES), and the test connects from 127.0.0.2 (the proxy) or from 127.0.0.1
(anyone else) by binding its client socket's source address, which Linux allows anywhere in 127.0.0.0/8."""

import re
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest
import requests
from requests.adapters import HTTPAdapter

from tests.operations.test_serving import _run, gunicorn, server_environment

PROXY, ELSEWHERE = "127.0.0.2", "127.0.0.1"
# Its server runs on SQLite files of its own in a clean environment, whatever the pass (tests/conftest.py).
pytestmark = pytest.mark.any_database


class FromAddress(HTTPAdapter):
    """Connections from ``source`` (the client socket bound to it before connecting)."""

    def __init__(self, source):
        self.source = source
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, source_address=(self.source, 0), **kwargs)


def browser(source):
    session = requests.Session()
    session.mount("http://", FromAddress(source))
    return session


class Served(NamedTuple):
    base: str
    log: Path
    env: dict


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("proxy")
    env = server_environment(
        tmp_path,
        WEB_CONCURRENCY="2",
        GUNICORN_THREADS="2",
        TRUSTED_PROXY_ADDRESSES=PROXY,
        OIDC_GROUP_ROLES="airflow-viewers=Viewer,airflow-admins=Admin",
        PROXY_PROVIDER_NAME="oauth2-proxy",
        LOCAL_PASSWORDS="0",
    )
    _run([sys.executable, "manage.py", "migrate", "--noinput", "--verbosity", "0"], env)
    _run([sys.executable, "manage.py", "create_airflow_schema"], env)
    with gunicorn(tmp_path, env):
        yield Served(f"http://127.0.0.1:{env['PORT']}", tmp_path / "serve.log", env)


def as_proxy(user, groups, email=None):
    headers = {"X-Forwarded-User": user, "X-Forwarded-Groups": groups}
    if email:
        headers["X-Forwarded-Email"] = email
    return headers


def get(session, url, **kwargs):
    return session.get(url, allow_redirects=False, timeout=30, **kwargs)


def test_trusted_headers_sign_in_with_the_mapped_role_and_the_session_works(server):
    base = server.base
    proxy = browser(PROXY)

    page = get(proxy, base + "/", headers=as_proxy("alice", "airflow-viewers,other", "alice@example.com"))

    assert page.status_code == 200, page.text[:500]
    assert ">alice<" in page.text and "badge-read-only" in page.text  # the Viewer role
    cookie = proxy.cookies["sessionid"]
    again = get(proxy, base + "/", headers=as_proxy("alice", "other,airflow-viewers", "alice@example.com"))
    assert again.status_code == 200 and ">alice<" in again.text
    assert proxy.cookies["sessionid"] == cookie  # the same session, the same headers (groups in another order)


def test_a_group_change_maps_again_gain_and_loss(server):
    base = server.base
    proxy = browser(PROXY)
    viewer = get(proxy, base + "/", headers=as_proxy("bob", "airflow-viewers"))
    assert "badge-read-only" in viewer.text and 'href="/admin/"' not in viewer.text

    admin = get(proxy, base + "/", headers=as_proxy("bob", "airflow-admins"))  # gained Admin, lost Viewer
    assert admin.status_code == 200
    assert 'href="/admin/"' in admin.text and "badge-read-only" not in admin.text
    assert get(proxy, base + "/admin/", headers=as_proxy("bob", "airflow-admins")).status_code == 200

    back = get(proxy, base + "/", headers=as_proxy("bob", "airflow-viewers"))  # lost Admin
    assert "badge-read-only" in back.text and 'href="/admin/"' not in back.text
    assert get(proxy, base + "/admin/", headers=as_proxy("bob", "airflow-viewers")).status_code == 302


def test_no_mapped_group_is_the_no_access_page(server):
    base = server.base
    page = get(browser(PROXY), base + "/", headers=as_proxy("carol", "marketing,<script>x</script>"))

    assert page.status_code == 403
    assert 'data-testid="no-access"' in page.text
    assert "carol" in page.text and "marketing" in page.text and "oauth2-proxy" in page.text
    assert "<script>x</script>" not in page.text and "&lt;script&gt;x&lt;/script&gt;" in page.text
    assert "sessionid" not in page.cookies or not page.cookies["sessionid"]


def test_headers_from_an_untrusted_address_are_ignored_and_logged(server):
    base, log = server.base, server.log
    marker = f"probe-{uuid.uuid4().hex[:8]}"

    page = get(browser(ELSEWHERE), base + "/", headers=as_proxy(marker, "airflow-admins"))

    assert page.status_code == 302 and page.headers["Location"].startswith("/login/")  # anonymous
    deadline = time.monotonic() + 10
    while "ignored" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = [line for line in log.read_text().splitlines() if "proxy headers" in line]
    assert any(ELSEWHERE in line and "X-Forwarded-User" in line and "ignored" in line for line in lines), lines
    # ...and the user it named was not made: the proxy's own request for that name is the first sign-in
    first = get(browser(PROXY), base + "/", headers=as_proxy(marker, "airflow-viewers"))
    assert first.status_code == 200


def test_a_changed_user_header_ends_the_old_session(server):
    base = server.base
    proxy = browser(PROXY)
    assert get(proxy, base + "/", headers=as_proxy("dave", "airflow-admins")).status_code == 200
    dave_cookie = proxy.cookies["sessionid"]

    erin = get(proxy, base + "/", headers=as_proxy("erin", "airflow-viewers"))

    assert erin.status_code == 200 and ">erin<" in erin.text
    assert proxy.cookies["sessionid"] != dave_cookie
    # dave's session is gone, not merely replaced in this browser: his old cookie, from where no header
    # counts, is anonymous
    stale = requests.get(base + "/", cookies={"sessionid": dave_cookie}, allow_redirects=False, timeout=30)
    assert stale.status_code == 302 and stale.headers["Location"].startswith("/login/")


def test_the_user_header_gone_ends_the_proxy_session(server):
    base = server.base
    proxy = browser(PROXY)
    assert get(proxy, base + "/", headers=as_proxy("frank", "airflow-viewers")).status_code == 200

    page = get(proxy, base + "/")

    assert page.status_code == 302 and page.headers["Location"].startswith("/login/")


def test_with_local_passwords_off_a_password_is_refused_and_break_glass_gets_in(server):
    base = server.base
    person = browser(ELSEWHERE)  # not through the proxy: as over an SSH tunnel to the server
    login = get(person, base + "/login/")
    assert login.status_code == 200 and 'name="password"' not in login.text
    refused = person.post(
        base + "/login/",
        data={"csrfmiddlewaretoken": person.cookies["csrftoken"], "username": "rescue", "password": "anything"},
        headers={"Referer": base + "/login/"},
        allow_redirects=False,
        timeout=30,
    )
    assert refused.status_code == 403 and "Password sign-in is switched off" in refused.text

    link = _run([sys.executable, "manage.py", "break_glass", "rescue", "--create", "--url", base], server.env).strip()
    assert link.startswith(base + "/break-glass/")
    shown = get(person, link)
    assert shown.status_code == 200
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', shown.text).group(1)
    signed_in = person.post(link, data={"csrfmiddlewaretoken": csrf}, headers={"Referer": link}, timeout=30)
    assert signed_in.status_code == 200 and ">rescue<" in signed_in.text  # followed to the overview
    assert get(person, base + "/admin/").status_code == 200  # a superuser

    again = browser(ELSEWHERE)
    get(again, link)
    spent = again.post(link, data={"csrfmiddlewaretoken": again.cookies["csrftoken"]}, headers={"Referer": link})
    assert spent.status_code == 403 and "already used" in spent.text
    # The token is a secret: only the access log's request lines (the web server's) may show it, not the
    # Forbidden line or the login throttle's "successful login" line.
    token = link.partition("token=")[2]
    # The workers' last lines reach the log file: the access line of the refused request comes after the others.
    deadline = time.monotonic() + 30
    while (
        not re.search(r'"POST /break-glass/\S* HTTP/1\.1" 403', server.log.read_text()) and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    leaks = [line for line in server.log.read_text().splitlines() if token in line and '"GET /break-glass/' not in line]
    leaks = [line for line in leaks if '"POST /break-glass/' not in line]
    assert token and not leaks, leaks


def raw_request(server, header_lines: list[str], source: str = PROXY) -> tuple[int, str]:
    """A GET / with exactly these header lines (repeats included), over a socket from ``source``."""
    port = int(server.base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0)) as conn:
        lines = ["GET / HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close", *header_lines, "", ""]
        conn.sendall("\r\n".join(lines).encode("latin-1"))
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode("utf-8", "replace")


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param(
            ["X-Forwarded-User: grace", "X-Forwarded-Groups: viewers-only", "X-Forwarded-Groups: airflow-admins"],
            id="two groups headers",
        ),
        pytest.param(
            ["X-Forwarded-User: grace", "X-Forwarded-User: root", "X-Forwarded-Groups: airflow-viewers"],
            id="two user headers",
        ),
        pytest.param(
            [
                "X-Forwarded-User: grace",
                "X-Forwarded-Groups: airflow-viewers",
                "X-Forwarded-Email: a@x.org",
                "x-forwarded-email: b@x.org",
            ],
            id="two email headers, one in lower case",
        ),
    ],
)
def test_a_trusted_header_sent_twice_is_refused_and_logged(server, lines):
    status, body = raw_request(server, lines)
    assert status == 400 and "more than once" in body
    deadline = time.monotonic() + 10
    while "more than once" not in server.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert any("sent more than once from 127.0.0.2" in line for line in server.log.read_text().splitlines())
    # Nobody was made or signed in by it; the same headers once each sign in as before.
    status, body = raw_request(server, ["X-Forwarded-User: grace", "X-Forwarded-Groups: airflow-viewers"])
    assert status == 200 and ">grace<" in body and "badge-read-only" in body
