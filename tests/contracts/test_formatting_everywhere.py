"""The same bytes, the same count and the same time read the same on every face that shows them: a key
page, Insights, the Orphans page, the GC page, a download, the API and the commands, through Django's test
client (or ``call_command``) with real rows. The text each one must contain is ``core.formatting``'s."""

import io
import json
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from statestore_admin.core import formatting

from ..conftest import BOTH_DATABASES
from ..factories import make_task_keys
from ..objects_helpers import file_storage, write_bytes

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)

BYTES = 1_536_000  # the JSON text of the value: "1.5 MiB" everywhere
SIZE = "1.5 MiB"
EXPIRED = 1_234  # rows past their expiry: "1,234" everywhere
COUNT = "1,234"
AT = datetime(2026, 11, 30, 16, 43, 28, 123456, tzinfo=UTC)
TIME = "2026-11-30T16:43:28.123456Z"


def test_the_conventions_these_tests_assert():
    assert formatting.size(BYTES) == SIZE
    assert formatting.count(EXPIRED) == COUNT
    assert formatting.iso(AT) == TIME


def logged_in(user):
    client = Client()
    client.force_login(user)
    return client


def run_command(name, *args, **options):
    out = io.StringIO()
    call_command(name, *args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


@pytest.fixture
def big_key(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="manual__big")
    task_instance_factory(run, task_id="load")
    key = task_key_factory(run, task_id="load", key="blob", value="x" * (BYTES - 2))  # the quotes are 2 bytes
    assert len(key.value.encode()) == BYTES
    return key


def test_sizes(big_key, viewer, operator, user_factory, tmp_path, monkeypatch):
    pages = logged_in(viewer)
    key_page = pages.get(f"/keys/task/{big_key.pk}/").content.decode()
    assert SIZE in key_page
    task_table = pages.get(f"/runs/{big_key.dag_run_id}/tasks/load/").content.decode()
    assert SIZE in task_table

    stats_text = run_command("state_store_stats")
    assert f"({SIZE})" in stats_text
    insights = pages.get("/insights/").content.decode()
    assert SIZE in insights

    store = file_storage(tmp_path, monkeypatch, compression=None)
    write_bytes(store, store.task_ref("gone", "r", "t", -1, "k"), b"x" * BYTES)
    orphans_page = pages.get("/orphans/").content.decode()
    assert SIZE in orphans_page
    assert f"({SIZE})" in run_command("state_store_orphans")


@pytest.fixture
def expired_keys(dag_run_factory, task_instance_factory):
    run = dag_run_factory(dag_id="etl", run_id="manual__old")
    task_instance_factory(run, task_id="t")
    past = timezone.now() - timedelta(days=1)
    make_task_keys(run, EXPIRED, updated_at=past, expires_at=past)
    return run


def test_counts(expired_keys, viewer, user_factory):
    admin = user_factory(username="admin", is_superuser=True, is_staff=True)
    pages = logged_in(viewer)
    assert COUNT in run_command("state_store_stats")
    assert f'data-testid="insights-task-keys">{COUNT}<' in pages.get("/insights/").content.decode()
    run_page = pages.get(f"/dags/{expired_keys.dag_id}/").content.decode()
    assert COUNT in run_page
    assert COUNT in logged_in(admin).get("/gc/").content.decode()


def test_counts_and_times_in_the_gc_dry_run_command(expired_keys):
    text = run_command("state_store_clean", "--dry-run")
    assert f"{COUNT} task state row" in text
    assert "+00:00" not in text


def test_times(dag_run_factory, task_instance_factory, task_key_factory, operator):
    run = dag_run_factory(dag_id="etl", run_id="manual__t")
    task_instance_factory(run, task_id="load")
    key = task_key_factory(run, task_id="load", key="k", value=1, updated_at=AT, expires_at=AT + timedelta(days=3650))
    client = logged_in(operator)

    key_page = client.get(f"/keys/task/{key.pk}/").content.decode()
    assert f'datetime="{TIME}"' in key_page

    url = reverse("run-keys-export", args=[run.pk])
    document = json.loads(b"".join(client.get(url).streaming_content))
    (row,) = [r for r in document["keys"] if r["key"] == "k"]
    assert row["updated_at"] == TIME
    csv_text = b"".join(client.get(url, {"format": "csv"}).streaming_content).decode()
    assert TIME in csv_text and "+00:00" not in csv_text.replace(run.run_id, "")

    api = client.get(f"/api/v2/dags/etl/dagRuns/{quote(run.run_id)}/taskInstances/load/state-store")
    assert api.status_code == 200, api.content
    assert TIME in api.content.decode()

    stats = json.loads(run_command("state_store_stats", "--json"))
    assert stats["taken_at"].endswith("Z")
