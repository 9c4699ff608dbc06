"""Framing by Airflow's UI (issue 25): off by default (the page refuses every frame); with
STATESTORE_FRAME_ANCESTORS, Airflow's origin only may frame it, its cookies work in a frame of another site and
a framed page has no header of its own. Headers through the test client; the variable in a fresh process."""

import pytest
from django.conf import settings
from django.test import Client, override_settings

from statestore_admin.framing import frame_origin, framing_settings
from tests.conftest import BOTH_DATABASES
from tests.contracts.test_security import policy_of
from tests.operations.test_settings import run_manage

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
AIRFLOW = "https://airflow.example.com"
IFRAME = {"HTTP_SEC_FETCH_DEST": "iframe"}


def framed_by(*origins):
    return override_settings(
        STATESTORE_FRAME_ANCESTORS=list(origins),
        **framing_settings(list(origins), middleware=settings.MIDDLEWARE, csp=settings.CONTENT_SECURITY_POLICY),
    )


def signed_in(user) -> Client:
    client = Client()  # after override_settings: its middleware is the overridden one
    client.force_login(user)
    return client


def test_off_by_default_every_frame_is_refused(viewer):
    response = signed_in(viewer).get("/", **IFRAME)
    assert response["X-Frame-Options"] == "DENY"
    assert policy_of(response)["frame-ancestors"] == {"'none'"}


def test_airflows_origin_only_may_frame_the_pages(viewer):
    with framed_by(AIRFLOW):
        for path in ("/", "/dags/", "/login/"):
            response = signed_in(viewer).get(path, **IFRAME)
            assert policy_of(response)["frame-ancestors"] == {AIRFLOW}, path  # every other origin refused
            assert "X-Frame-Options" not in response, path  # a DENY would refuse Airflow too
        assert policy_of(response)["script-src"] == {"'self'"}  # the rest of the policy unchanged


def test_framed_cookies_are_samesite_none_and_secure(viewer):
    with framed_by(AIRFLOW):
        response = Client().get("/login/", **IFRAME)
        cookie = response.cookies[settings.CSRF_COOKIE_NAME]
        assert cookie["samesite"] == "None" and cookie["secure"] is True
        assert settings.SESSION_COOKIE_SAMESITE == "None" and settings.SESSION_COOKIE_SECURE


def test_off_by_default_the_cookies_are_not_partitioned(viewer):
    response = Client().post("/login/", {"username": viewer.username, "password": viewer.raw_password})
    assert response.status_code == 302
    assert "Partitioned" not in response.cookies[settings.SESSION_COOKIE_NAME].output()


def test_framed_sign_in_sets_partitioned_cookies_and_sign_out_deletes_them(viewer):
    """A browser blocking third-party cookies keeps partitioned ones (CHIPS): signing in inside Airflow's frame
    of another site works there (the compat test signs in so in Chromium). Signing out must delete the
    partitioned cookie, so its deletion carries the attribute too."""
    with framed_by(AIRFLOW):
        client = Client(enforce_csrf_checks=True)
        form = client.get("/login/?next=/dags/%3Fembed%3D1", **IFRAME)
        csrf = form.cookies[settings.CSRF_COOKIE_NAME]
        assert csrf.output().endswith("; Partitioned") and "SameSite=None" in csrf.output()
        token = form.context["csrf_token"]
        signed = client.post(
            "/login/?next=/dags/%3Fembed%3D1",
            {"username": viewer.username, "password": viewer.raw_password, "csrfmiddlewaretoken": token,
             "next": "/dags/?embed=1"},
            headers={"Sec-Fetch-Dest": "iframe"},
        )  # fmt: skip
        assert signed.status_code == 302 and signed["Location"] == "/dags/?embed=1"  # the framed page again
        session = signed.cookies[settings.SESSION_COOKIE_NAME].output()
        assert "Secure" in session and "SameSite=None" in session and session.endswith("; Partitioned")
        landed = client.get(signed["Location"], **IFRAME)
        assert landed.status_code == 200 and 'class="topbar"' not in landed.content.decode()

        gone = client.post("/logout/", {"csrfmiddlewaretoken": client.cookies[settings.CSRF_COOKIE_NAME].value})
        deleted = gone.cookies[settings.SESSION_COOKIE_NAME].output()
        assert "Max-Age=0" in deleted and deleted.endswith("; Partitioned")


def test_a_framed_page_has_no_header_of_its_own(viewer):
    with framed_by(AIRFLOW):
        client = signed_in(viewer)
        framed = client.get("/dags/", **IFRAME)
        asked = client.get("/dags/?embed=1")
        whole = client.get("/dags/")
    assert 'class="topbar"' not in framed.content.decode() and 'class="topbar"' not in asked.content.decode()
    assert 'class="topbar"' in whole.content.decode()
    assert "Sec-Fetch-Dest" in whole["Vary"]  # a cache must not give the framed page to a whole window
    assert "Sec-Fetch-Dest" not in client.get("/api/v2/version").get("Vary", "")  # JSON is the same framed or not


@pytest.mark.parametrize(
    "text", ["*", "'self'", "https://*.example.com", "https://a.example.com/ui", "airflow.example.com", "ftp://a"]
)
def test_only_origins_are_accepted(text):
    with pytest.raises(ValueError):
        frame_origin(text)


def test_the_variable_sets_the_policy_and_a_malformed_one_stops_the_start(tmp_path):
    show = "from django.conf import settings as s; print(s.CONTENT_SECURITY_POLICY['DIRECTIVES']['frame-ancestors'])"
    env = {
        "STATESTORE_VAR_DIR": str(tmp_path),
        "STATESTORE_FRAME_ANCESTORS": "https://Airflow.example.com:8443/, http://a.local",
    }
    done = run_manage("shell", "--no-imports", "-c", show, env={"HOME": str(tmp_path), **env})
    assert done.stdout.strip() == "['https://airflow.example.com:8443', 'http://a.local']", done.stderr
    env["STATESTORE_FRAME_ANCESTORS"] = "*"
    done = run_manage("check", env={"HOME": str(tmp_path), **env})
    assert done.returncode != 0 and "STATESTORE_FRAME_ANCESTORS" in done.stderr
