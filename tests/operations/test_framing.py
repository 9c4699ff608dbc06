"""Framing by Airflow's UI (issues 25 and 36): off by default (every page refuses every frame); with
STATESTORE_FRAME_ANCESTORS, Airflow's origin only may frame the read pages (the allow-list of framable views), and
no origin may frame the admin, the tokens, signing in, break-glass or a confirmation shown as a page; the read
pages' dialogs (htmx partials) still open; only https origins (http on loopback) are accepted; the cookies work in
a frame of another site and a framed page has no header of its own. Real HTTP through the test client; the
variable in a fresh process."""

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
        **framing_settings(list(origins), middleware=settings.MIDDLEWARE),
    )


def signed_in(user) -> Client:
    client = Client()  # after override_settings: its middleware is the overridden one
    client.force_login(user)
    return client


def test_off_by_default_every_frame_is_refused(viewer):
    response = signed_in(viewer).get("/", **IFRAME)
    assert response["X-Frame-Options"] == "DENY"
    assert policy_of(response)["frame-ancestors"] == {"'none'"}


def allowed(response) -> bool:
    """Whether ``response`` lets Airflow's origin, and it alone, frame it; otherwise it must refuse every frame."""
    ancestors = policy_of(response)["frame-ancestors"]
    if ancestors == {AIRFLOW}:
        assert "X-Frame-Options" not in response  # a DENY would refuse Airflow too
        return True
    assert ancestors == {"'none'"} and response["X-Frame-Options"] == "DENY", (
        ancestors,
        response.get("X-Frame-Options"),
    )
    return False


@pytest.fixture
def world(dag_run_factory, task_instance_factory, task_key_factory, asset_factory):
    run = dag_run_factory(dag_id="etl", run_id="r1")
    task_instance_factory(run, task_id="t")
    key = task_key_factory(run, task_id="t", key="k")
    return {"run": run, "key": key, "asset": asset_factory(name="orders")}


def test_airflows_origin_only_may_frame_the_read_pages(operator, world):
    run, key = world["run"], world["key"]
    read_pages = [
        "/",
        "/dags/",
        "/dags/etl/",
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/tasks/t/?embed=1",
        f"/keys/task/{key.pk}/",
        f"/keys/task/{key.pk}/story/",
        f"/assets/{world['asset'].pk}/",
        "/search/?q=k",
        "/audit/",
        "/insights/",
        "/gc/",
        "/runs/999999/",  # its 404 page, in the frame: Airflow's link to a run that has gone
    ]
    with framed_by(AIRFLOW):
        client = signed_in(operator)
        for path in read_pages:
            response = client.get(path, **IFRAME)
            assert allowed(response), path
        assert policy_of(response)["script-src"] == {"'self'"}  # the rest of the policy unchanged
        entry = client.get("/airflow/dag_run/?dag_id=etl&run_id=r1&embed=1", **IFRAME)  # the plugin's link
        assert entry.status_code == 302 and allowed(entry)
        assert allowed(client.get(entry["Location"], **IFRAME))


def test_the_admin_tokens_sign_in_break_glass_and_confirmation_pages_refuse_every_frame(operator, world):
    key = world["key"]
    with framed_by(AIRFLOW):
        anonymous = Client()
        for path in ("/login/", "/oidc/login/", "/oidc/callback/", "/break-glass/not-a-link/", "/admin/login/"):
            response = anonymous.get(path, **IFRAME)
            assert not allowed(response), path
        tokens = anonymous.get("/account/tokens/", **IFRAME)  # not signed in, framed: a page never framed
        assert tokens.status_code == 302 and not allowed(tokens)
        whole = anonymous.get("/dags/?x=1")  # not signed in, in a window: to the sign-in form
        assert whole.status_code == 302 and whole["Location"].startswith("/login/") and not allowed(whole)

        client = signed_in(operator)
        confirmations = [
            "/admin/",
            "/account/tokens/",
            f"/keys/task/{key.pk}/edit/",  # the dialogs as pages of their own (no JavaScript)
            f"/keys/task/{key.pk}/expiry/",
            f"/keys/task/delete/?ids={key.pk}",
            "/gc/run/",
            f"/runs/{world['run'].pk}/export/?format=json",
        ]
        for path in confirmations:
            response = client.get(path, **IFRAME)
            assert response.status_code < 500 and not allowed(response), (path, response.status_code)
        posted = client.post(f"/keys/task/{key.pk}/expiry/", {"expiry": "never"}, **IFRAME)
        assert not allowed(posted)


def test_not_signed_in_a_framed_page_says_to_sign_in_in_a_tab_of_its_own(world):
    """The sign-in form is never framed (no password typed into a page whose address cannot be seen), so a
    framed read page asked for by someone not signed in says where to sign in instead of a refused frame."""
    with framed_by(AIRFLOW):
        link = "/airflow/dag_run/?dag_id=etl&run_id=r1&embed=1"
        for headers in (IFRAME, {}):  # the browser's Fetch metadata, or the plugin's embed=1 alone
            notice = Client().get(link, **headers)
            assert notice.status_code == 200 and allowed(notice)
            text = notice.content.decode()
            assert 'data-testid="sign-in-elsewhere"' in text and 'type="password"' not in text
            assert "http://testserver/airflow/dag_run/?dag_id=etl&amp;run_id=r1" in text and "embed" not in text
            assert "no-store" in notice["Cache-Control"] and "Sec-Fetch-Dest" in notice["Vary"]


def test_a_framed_pages_dialogs_still_open_inside_it(operator, world):
    """A framed page's actions (a row's menu, fetched when it opens) fetch their dialog with htmx (an XHR: no
    frame of its own, so the page's frame is all the browser checks), send it with htmx and refresh the page's
    panel: all still answer."""
    key = world["key"]
    with framed_by(AIRFLOW):
        client = signed_in(operator)
        page = client.get(f"/runs/{world['run'].pk}/tasks/t/", **IFRAME)
        assert allowed(page) and f"/keys/task/{key.pk}/actions/" in page.content.decode()
        hx = {"HTTP_HX_REQUEST": "true", "HTTP_SEC_FETCH_DEST": "empty"}
        menu = client.get(f"/keys/task/{key.pk}/actions/", **hx)
        assert menu.status_code == 200 and f"/keys/task/{key.pk}/expiry/" in menu.content.decode()
        dialog = client.get(f"/keys/task/{key.pk}/expiry/", **hx)
        assert dialog.status_code == 200 and "<html" not in dialog.content.decode()
        done = client.post(f"/keys/task/{key.pk}/expiry/", {"expiry": "never"}, **hx)
        assert done.status_code == 204 and "closeModal" in done["HX-Trigger"]
        panel = client.get(f"/runs/{world['run'].pk}/tasks/t/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="keys-panel")
        assert panel.status_code == 200


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
    "text",
    [
        "*",
        "'self'",
        "https://*.example.com",
        "https://a.example.com/ui",
        "airflow.example.com",
        "ftp://a",
        "http://airflow.example.com",  # anyone on the network path could frame the pages
        "http://10.0.0.5:8080",
        "http://localhost.example.com",
        "http://127.0.0.1.nip.io",
        "HTTP://airflow.example.com",
        # More than one origin in one entry: the CSP would list "http:" (every http origin) or a directive
        "https://airflow.example.com http:",
        "https://airflow.example.com data:",
        "https://airflow.example.com 'self'",
        "https://airflow.example.com;script-src *",
        "https://airflow.example.com%20http:",
        "https://airflow.example.com:",
        "https://-",
    ],
)
def test_only_https_origins_are_accepted(text):
    with pytest.raises(ValueError):
        frame_origin(text)


@pytest.mark.parametrize("text", ["http://localhost", "http://localhost:8080", "http://127.0.0.1:28080"])
def test_http_is_accepted_on_the_loopback_host_for_a_local_trial(text):
    assert frame_origin(text) == text


def test_the_variable_sets_the_origins_and_a_malformed_or_http_one_stops_the_start(tmp_path):
    env = {
        "STATESTORE_VAR_DIR": str(tmp_path),
        "STATESTORE_FRAME_ANCESTORS": "https://Airflow.example.com:8443/, http://localhost:8080",
    }
    show = "from django.conf import settings as s; print(s.STATESTORE_FRAME_ANCESTORS)"
    done = run_manage("shell", "--no-imports", "-c", show, env={"HOME": str(tmp_path), **env})
    assert done.stdout.strip() == "['https://airflow.example.com:8443', 'http://localhost:8080']", done.stderr
    for refused in ("*", "https://airflow.example.com, http://airflow.example.com"):
        env["STATESTORE_FRAME_ANCESTORS"] = refused
        done = run_manage("check", env={"HOME": str(tmp_path), **env})
        assert done.returncode != 0 and "STATESTORE_FRAME_ANCESTORS" in done.stderr, refused


@pytest.mark.parametrize("framing", [(), (AIRFLOW,)])
def test_the_apis_error_answers_refuse_every_frame_too(framing):
    """An error under /api/ that Django or a renderer answered in another format is rewritten as JSON
    (``ApiErrorsAsJsonMiddleware``): the rewritten answer kept no header of the one it replaced, so it had neither
    ``X-Frame-Options`` nor a CSP (the schema's and Swagger UI's 401, an unrouted path's 404, a 405)."""
    with framed_by(*framing) if framing else override_settings():
        client = Client()
        answers = [
            client.get("/api/schema/", **IFRAME),
            client.get("/api/docs/", **IFRAME),
            client.get("/api/nowhere", **IFRAME),
            client.post("/api/v2/assets/x/state-store/", **IFRAME),
            client.get("/api/v2/assets/1/state-store", **IFRAME),  # DRF's own JSON: it had them
        ]
    for response in answers:
        assert response.status_code >= 400 and response["Content-Type"].startswith("application/json")
        assert not allowed(response), response.request["PATH_INFO"]
