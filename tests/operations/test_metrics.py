"""``GET /metrics``: off without configuration (404), a bearer token or an IP allowlist (CIDRs, the client
address as throttling resolves it, behind TRUSTED_PROXY_COUNT proxies), and an exposition that parses, with
the latest snapshot's and GC run's figures."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from statestore_admin.records.models import GcRun, StatsSnapshot
from tests.conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
TOKEN = "metrics-token-for-tests-0123456789"


def samples(response) -> dict:
    """``{(name, frozenset(labels)): value}`` of the exposition."""
    text = response.content.decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.fixture
def figures():
    now = timezone.now()
    StatsSnapshot.objects.create(
        taken_at=now - timedelta(days=3), finished_at=now, status="done", task_keys=1, asset_keys=1
    )
    snapshot = StatsSnapshot.objects.create(
        taken_at=now - timedelta(minutes=10),
        finished_at=now - timedelta(minutes=10) + timedelta(seconds=95),
        status="done",
        task_keys=10_000_000,
        task_bytes=640_000_000,
        expired=1_000_000,
        expiring=120_000,
        never=500_000,
        live=9_000_000,
        dags=2000,
        asset_keys=100_000,
        asset_bytes=3_000_000,
        assets=50_000,
    )
    StatsSnapshot.objects.create(taken_at=now, status="running", task_keys=5)  # not finished: not shown
    GcRun.objects.create(
        started_at=now - timedelta(hours=2),
        finished_at=now - timedelta(hours=2) + timedelta(seconds=40),
        cutoff=now,
        batch_size=10_000,
        rows_deleted=999_999,
        outcome=GcRun.Outcome.PARTIAL,
        host="h",
        pid=1,
    )
    GcRun.objects.create(started_at=now, cutoff=now, batch_size=10_000, host="h", pid=2)  # running: not "last"
    return snapshot


def test_off_by_default(client, figures):
    with override_settings(METRICS_TOKEN="", METRICS_ALLOWED_IPS=[]):
        assert client.get("/metrics").status_code == 404
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer anything").status_code == 404


@override_settings(METRICS_TOKEN=TOKEN, METRICS_ALLOWED_IPS=[])
def test_token(client, figures):
    assert client.get("/metrics").status_code == 401
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong")
    assert wrong.status_code == 401 and wrong["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401
    ok = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert ok.status_code == 200 and ok["Content-Type"].startswith("text/plain; version=")
    assert "no-cache" in ok["Cache-Control"] or "max-age=0" in ok["Cache-Control"]
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code in (403, 405)


@override_settings(METRICS_TOKEN=TOKEN, METRICS_ALLOWED_IPS=[], TOKEN_FAILURE_LIMIT=3)
def test_wrong_tokens_are_throttled(client, figures):
    for _ in range(3):
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    throttled = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert throttled.status_code == 429 and int(throttled["Retry-After"]) > 0


@override_settings(METRICS_TOKEN="", METRICS_ALLOWED_IPS=["10.0.0.0/8", "192.0.2.7", "not-an-address"])
def test_ip_allowlist(client, figures):
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.8").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="::ffff:10.0.0.1").status_code == 200
    # without a proxy setting, X-Forwarded-For is not believed
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.8", HTTP_X_FORWARDED_FOR="10.0.0.1").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.8", HTTP_AUTHORIZATION="Bearer x").status_code == 403


@override_settings(METRICS_TOKEN="", METRICS_ALLOWED_IPS=["10.0.0.0/8"], TRUSTED_PROXY_COUNT=1)
def test_ip_allowlist_behind_a_proxy(client, figures):
    behind = {"REMOTE_ADDR": "172.16.0.1"}  # the proxy
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="10.0.0.9", **behind).status_code == 200
    # a client cannot forge its address: the proxy appends the real one on the right
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="10.0.0.9, 203.0.113.5", **behind).status_code == 403


@override_settings(METRICS_TOKEN=TOKEN, METRICS_ALLOWED_IPS=["10.0.0.0/8"])
def test_either_the_token_or_the_address(client, figures):
    assert client.get("/metrics", REMOTE_ADDR="10.0.0.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.1").status_code == 401
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.1", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200


@override_settings(METRICS_TOKEN=TOKEN)
def test_the_exposition(client, figures):
    got = samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}"))
    task, asset = frozenset({("store", "task")}), frozenset({("store", "asset")})
    assert got[("statestore_keys", task)] == 10_000_000
    assert got[("statestore_keys", asset)] == 100_000
    assert got[("statestore_bytes", task)] == 640_000_000
    assert got[("statestore_bytes", asset)] == 3_000_000
    none = frozenset()
    assert got[("statestore_expired_keys", none)] == 1_000_000
    assert got[("statestore_expiring_keys", none)] == 120_000
    assert got[("statestore_never_expiring_keys", none)] == 500_000
    assert got[("statestore_snapshot_present", none)] == 1
    assert got[("statestore_snapshot_duration_seconds", none)] == 95
    assert 590 <= got[("statestore_snapshot_age_seconds", none)] < 700
    assert got[("statestore_snapshot_timestamp_seconds", none)] == figures.taken_at.timestamp()
    assert got[("statestore_gc_last_outcome", frozenset({("outcome", "partial")}))] == 1
    assert got[("statestore_gc_last_outcome", frozenset({("outcome", "completed")}))] == 0
    assert ("statestore_gc_last_outcome", frozenset({("outcome", "running")})) not in got
    assert got[("statestore_gc_last_rows_deleted", none)] == 999_999
    assert got[("statestore_gc_last_duration_seconds", none)] == 40
    assert 2 * 3600 - 60 - 40 <= got[("statestore_gc_last_age_seconds", none)] < 2 * 3600
    assert got[("statestore_gc_runs_present", none)] == 1


@override_settings(METRICS_TOKEN=TOKEN)
def test_the_exposition_without_snapshot_or_gc_run(client):
    got = samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}"))
    assert got == {("statestore_snapshot_present", frozenset()): 0, ("statestore_gc_runs_present", frozenset()): 0}


def test_the_settings_come_from_the_environment(tmp_path):
    from .test_settings import run_manage

    env = {"HOME": str(tmp_path), "STATESTORE_VAR_DIR": str(tmp_path / "var")}
    env |= {"METRICS_TOKEN": "s3cret", "METRICS_ALLOWED_IPS": "10.0.0.0/8,192.0.2.7"}
    shown = run_manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings as s; print(s.METRICS_TOKEN, s.METRICS_ALLOWED_IPS)",
        env=env,
    )
    assert shown.stdout.strip() == "s3cret ['10.0.0.0/8', '192.0.2.7']", shown.stderr
