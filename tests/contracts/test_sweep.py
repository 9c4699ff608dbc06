"""The sweep: what the permission matrix (tests/contracts/test_permission_matrix.py) does not check cell by cell, over
the same routes (its cases, which ``test_the_matrix_lists_every_url`` keeps complete: a new URL pattern
is swept as soon as it is listed there), the same principals and the same data:

- every method a route does not list (GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE) answers below 500,
  in JSON under ``/api/``, changes nothing, and shows a principal nothing it may not see;
- an object out of the principal's scope answers exactly as a missing one: each request addressing the
  ``ml_x`` DAG or the ``ml.two`` asset is sent again after they and everything of theirs are deleted, and
  the status and body must be the same (the per-request CSRF token aside);
- keys, values, run ids and asset names holding markup are escaped in every HTML answer, for those who
  see them (a positive control shows the escaped text);
- a ``next`` or ``HX-Current-URL`` naming another site is never where a write sends the browser.

Each request runs in savepoints of both databases, rolled back afterwards, as in the matrix.
"""

from __future__ import annotations

import re

import pytest
from django.db import connections, transaction

from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.records.models import AuditEvent
from statestore_admin.state import services
from tests import factories
from tests.conftest import BOTH_DATABASES
from tests.contracts.test_permission_matrix import (
    API,
    GHOST,
    HX,
    ML,
    PRINCIPALS,
    Case,
    _body,
    _leaks,
    all_cases,
    build_world,
    offsite_redirect,
    snapshot,
)

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
METHODS = ("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE")
BY_NAME = {p.name: p for p in PRINCIPALS}


@pytest.fixture(autouse=True)
def _no_token_throttle(settings):
    settings.TOKEN_FAILURE_LIMIT = 0  # many refused tokens: throttling has its own tests


def fresh(w) -> None:
    """A 500 is an answer to report, not an exception; a message a previous request left in its cookie
    would be shown by whichever page comes next."""
    w.client.raise_request_exception = False
    w.client.cookies.pop("messages", None)


def send(w, case: Case, method: str, data=None, content_type=None, headers=None, watch=False):
    """``method`` to ``case.path`` as the world's principal (with the CSRF token on writes), in savepoints
    rolled back afterwards; returns (response, body, state before, state after), the states only when
    ``watch`` asks for them (reading every table twice was a fifth of the sweep's time)."""
    fresh(w)
    kwargs = {"headers": {**case.headers, **(headers or {}), "X-CSRFToken": w.csrf}}
    if data is not None:
        kwargs["data"] = data
    if content_type:
        kwargs["content_type"] = content_type
    with transaction.atomic(using="default"), transaction.atomic(using="airflow"):
        before = snapshot() if watch else None
        response = getattr(w.client, method.lower())(case.path, **kwargs)
        body = _body(response)
        after = snapshot() if watch else None
        transaction.set_rollback(True, using="airflow")
        transaction.set_rollback(True, using="default")
    return response, body, before, after


# 1. Methods a route does not list ------------------------------------------------------------------------
def unlisted_methods(cases: list[Case]) -> list[tuple[Case, str]]:
    """Each distinct path of the matrix with each method its route does not list."""
    listed: dict[str, set[str]] = {}
    for case in cases:
        listed.setdefault(case.route, set()).add(case.method)
    seen, found = set(), []
    for case in cases:
        if (case.route, case.target) in seen or case.fresh_client:  # logout ends the session the others need
            continue
        seen.add((case.route, case.target))
        found += [
            (case, m)
            for m in METHODS
            if m not in listed[case.route] and not (m == "HEAD" and "GET" in listed[case.route])
        ]
    return found


# What a method reaches depends little on the principal (most answer 405 before any check): those that
# reach furthest, and one of each kind of credential, keep the sweep's time reasonable.
METHOD_PRINCIPALS = [
    BY_NAME[n]
    for n in (
        "anonymous",
        "no-permission",
        "Admin",
        "scoped Admin, own grant, scope permissions",
        "token",
        "scoped token read-only",
        "token revoked",
    )
]


@pytest.mark.parametrize("who", METHOD_PRINCIPALS, ids=[p.name for p in METHOD_PRINCIPALS])
def test_methods_a_route_does_not_serve_answer_below_500_and_change_nothing(who):
    w = build_world(who)
    requests = unlisted_methods(all_cases(w))
    assert len(requests) > 100
    problems = []
    for case, method in requests:
        api = case.path.startswith("/api/")
        data, content_type = ("{}", "application/json") if api and method in ("POST", "PUT", "PATCH") else (None, None)
        unsafe = method not in ("GET", "HEAD", "OPTIONS")
        response, body, before, after = send(w, case, method, data, content_type, watch=unsafe)
        status = response.status_code
        wrong = []
        if status >= 500:
            wrong.append("5xx")
        if api and status >= 400 and not response.get("Content-Type", "").startswith("application/json"):
            wrong.append(f"not JSON: {response.get('Content-Type')}")
        if unsafe and before != after:
            wrong.append("state changed")
        if unsafe and not api and not case.route.startswith("admin/") and 200 <= status < 300:
            wrong.append("answered like a method it serves")  # a read page renders for a DELETE: 405 instead
        if leaks := _leaks(case, who, body, case.path):
            wrong.append("leaks " + ", ".join(leaks))
        if away := offsite_redirect(response):
            wrong.append(away)
        if wrong:
            problems.append(f"{method} {case.path}: {status} {'; '.join(wrong)}")
    assert not problems, f"{len(problems)} of {len(requests)} requests:\n" + "\n".join(problems)


# 2. Out of scope answers as missing ----------------------------------------------------------------------
SCOPED = [p for p in PRINCIPALS if p.scoped]
VOLATILE = [
    (re.compile(r'(name="csrfmiddlewaretoken" value=")[^"]+'), r"\1…"),
    (re.compile(r'(csrf[-_]token[^>]*?content=")[^"]+', re.I), r"\1…"),
    (re.compile(r'("X-CSRFToken": ")[^"]+'), r"\1…"),
    (re.compile(r'(nonce=")[^"]+'), r"\1…"),
    (re.compile(r'("exported_at": ")[^"]+'), r"\1…"),
]


def normalized(body: str) -> str:
    for pattern, replacement in VOLATILE:
        body = pattern.sub(replacement, body)
    return body


def delete_the_ml_world(w) -> None:
    """The ml_x DAG, its runs, instances and keys, the asset ml.two and its keys, and their audit events:
    what an out-of-scope id must look like, missing."""
    with connections["airflow"].cursor() as cursor:
        cursor.execute("DELETE FROM task_state_store WHERE dag_id = %s", ["ml_x"])
        cursor.execute("DELETE FROM asset_state_store WHERE asset_id = %s", [w.ml_asset.pk])
        cursor.execute("DELETE FROM task_instance WHERE dag_id = %s", ["ml_x"])
        cursor.execute("DELETE FROM dag_run WHERE dag_id = %s", ["ml_x"])
        cursor.execute("DELETE FROM asset_active WHERE name = %s", [w.ml_asset.name])
        cursor.execute("DELETE FROM asset WHERE id = %s", [w.ml_asset.pk])
    AuditEvent.objects.filter(pk__in=[w.events[("task", ML)].pk, w.events[("asset", ML)].pk, w.gc_event.pk]).delete()


def answer(w, case: Case, missing: bool):
    data = case.data() if callable(case.data) else case.data
    fresh(w)
    kwargs = {"headers": {**case.headers, "X-CSRFToken": w.csrf}}
    if data is not None:
        kwargs["data"] = data
    if case.content_type:
        kwargs["content_type"] = case.content_type
    with transaction.atomic(using="default"), transaction.atomic(using="airflow"):
        if missing:
            delete_the_ml_world(w)
        response = getattr(w.client, case.method.lower())(case.path, **kwargs)
        body = _body(response)
        transaction.set_rollback(True, using="airflow")
        transaction.set_rollback(True, using="default")
    return response.status_code, response.get("Location", ""), normalized(body)


@pytest.mark.parametrize("who", SCOPED, ids=[p.name for p in SCOPED])
def test_an_out_of_scope_object_answers_exactly_as_a_missing_one(who):
    w = build_world(who)
    cases = [c for c in all_cases(w) if c.target in (ML, GHOST) and not c.fresh_client]
    assert len(cases) > 30
    differ = []
    for case in cases:
        there, gone = answer(w, case, missing=False), answer(w, case, missing=True)
        if there != gone:
            differ.append(f"{case.method} {case.label}: {there[:2]} vs missing {gone[:2]}" + _diff(there[2], gone[2]))
    assert not differ, (
        f"{len(differ)} of {len(cases)} answers tell an out-of-scope object from a missing one:\n" + "\n".join(differ)
    )


def _diff(a: str, b: str) -> str:
    if a == b:
        return ""
    start = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    there, gone = a[max(0, start - 60) : start + 80], b[max(0, start - 60) : start + 80]
    return f"\n    out of scope: …{there!r}\n    missing:      …{gone!r}"


# 3. Markup in keys, values, run ids and asset names is escaped -------------------------------------------
RAW = ["<script>xss", "<img src=x onerror=xss", "<svg onload=xss", "<b>xss-akey</b>", "</textarea><script>"]
ESCAPED = ["&lt;script&gt;xss-run", "&lt;img src=x onerror=xss-key", "&lt;svg onload=xss-asset", "&lt;b&gt;xss-akey"]


def markup_world(w) -> dict:
    """In the scope of the scoped principals: a run, a key and an asset whose names and values are markup
    (written through the services, so that the audit trail holds them too)."""
    run = factories.make_dag_run("etl_a", run_id="manual__<script>xss-run</script>")
    factories.make_task_instance(run, task_id="t")
    key = factories.make_task_key(run, key="<img src=x onerror=xss-key>", value="before", task_id="t")
    asset = factories.make_asset(name="etl.<svg onload=xss-asset>", uri="s3://bucket/etl.xss")
    factories.make_asset_key(asset, key="<b>xss-akey</b>", value="before", kind="api")
    system = Actor.command()
    services.patch_task_key(actor=system, ref=services.TaskKeyRef(id=key.pk), value="</textarea><script>xss-v</script>")
    services.set_asset_key(
        actor=system,
        asset_id=asset.pk,
        key="<b>xss-akey</b>",
        value="</textarea><script>xss-av</script>",
        mode=services.UPDATE,
    )
    return {"run": run, "key": TaskStateStore.objects.get(pk=key.pk), "asset": asset}


def markup_pages(w, m) -> list[Case]:
    run, key, asset = m["run"], m["key"], m["asset"]
    akey = "%3Cb%3Exss-akey%3C%2Fb%3E"
    paths = [
        "/",
        "/dags/",
        "/dags/etl_a/",
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/tasks/t/",
        f"/keys/task/{key.pk}/",
        "/search/?key=xss",
        "/search/?value=xss",
        "/assets/",
        f"/assets/{asset.pk}/",
        f"/assets/{asset.pk}/key/?key={akey}",
        "/audit/",
        "/admin/airflow/taskstatestore/?q=xss",
        "/admin/airflow/asset/",
        f"/admin/airflow/taskstatestore/{key.pk}/change/",
    ]
    paths += [
        f"/audit/{e.pk}/" for e in AuditEvent.objects.filter(dag_id="etl_a").exclude(pk=w.events[("task", "etl")].pk)
    ]
    paths += [f"/audit/{e.pk}/" for e in AuditEvent.objects.filter(asset_id=asset.pk)]
    cases = [Case(p, "GET", p) for p in paths]
    cases += [
        Case(p, "GET", p, headers=HX)
        for p in (
            f"/keys/task/{key.pk}/edit/",
            f"/keys/task/{key.pk}/expiry/",
            f"/assets/{asset.pk}/key/edit/?key={akey}",
        )
    ]
    cases += [
        Case(p, "GET", p, headers=HX)
        for p in (
            f"/keys/task/delete/?ids={key.pk}",
            f"/keys/task/expire/?ids={key.pk}",
            f"/assets/{asset.pk}/delete/?keys={akey}",
        )
    ]
    return cases


MARKUP_PRINCIPALS = [BY_NAME[n] for n in ("Admin", "view-only", "change-only", "scoped Operator", "scoped Admin")]


@pytest.mark.parametrize("who", MARKUP_PRINCIPALS, ids=[p.name for p in MARKUP_PRINCIPALS])
def test_markup_in_names_and_values_is_escaped_in_every_html_answer(who):
    w = build_world(who)
    m = markup_world(w)
    cases = markup_pages(w, m) + [c for c in all_cases(w) if c.method == "GET" and c.face != API]
    raw, shown = [], set()
    for case in cases:
        response, body, _, _ = send(w, case, "GET")
        assert response.status_code < 500, (case.path, response.status_code)
        if not response.get("Content-Type", "").startswith("text/html"):
            continue
        raw += [f"{case.path}: {marker!r}" for marker in RAW if marker in body]
        shown |= {marker for marker in ESCAPED if marker in body}
    assert not raw, "markup not escaped:\n" + "\n".join(raw)
    if who.name == "Admin":  # the positive control: these pages do show the names and values, escaped
        assert shown == set(ESCAPED)
    if who.name == "view-only":
        assert "&lt;script&gt;xss-run" in shown


# 4. A next naming another site ---------------------------------------------------------------------------
EVIL = ["https://evil.example/", "//evil.example/", "/\\evil.example/", "http:/\\evil.example", " //evil.example"]
EVIL_WRITES = EVIL[:3]  # for every write, twice: the shapes the others are variants of


@pytest.mark.parametrize("who", [BY_NAME["Admin"], BY_NAME["scoped Operator"]], ids=["Admin", "scoped Operator"])
def test_no_write_sends_the_browser_to_another_site(who):
    w = build_world(who)
    writes = [c for c in all_cases(w) if c.unsafe and c.face != API and isinstance(c.data, dict) and not c.fresh_client]
    assert len(writes) > 10
    away = []
    for case in writes:
        for evil in EVIL_WRITES:
            for htmx in (True, False):
                headers = {"HX-Current-URL": evil, **({"HX-Request": "true"} if htmx else {})}
                case_headers = {k: v for k, v in case.headers.items() if htmx or k != "HX-Request"}
                probe = Case(case.route, case.method, case.path, headers=case_headers)
                response, _, _, _ = send(w, probe, case.method, {**case.data, "next": evil}, headers=headers)
                assert response.status_code < 500, (case.path, response.status_code)
                if problem := offsite_redirect(response):
                    away.append(f"{case.method} {case.path} next={evil!r} htmx={htmx}: {problem}")
    for evil in EVIL:
        login = w.client.post(f"/login/?next={evil}", {"username": "matrix-nobody", "password": "wrong"})
        assert not offsite_redirect(login)
    assert not away, "\n".join(away)


def test_signing_in_never_follows_a_next_to_another_site(client, user_factory):
    user = user_factory("sweeper")
    for evil in EVIL:
        client.logout()
        response = client.post(f"/login/?next={evil}", {"username": "sweeper", "password": user.raw_password})
        assert response.status_code == 302 and not offsite_redirect(response), (evil, response.get("Location"))
        response = client.post("/login/", {"username": "sweeper", "password": user.raw_password, "next": evil})
        assert response.status_code == 302 and not offsite_redirect(response), (evil, response.get("Location"))
