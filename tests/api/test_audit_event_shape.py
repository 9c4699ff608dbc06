"""An audit event has one shape: the API's event (docs/api.md) is the audit download's entry plus the
event's keys, and the download's CSV carries the same token as the API, by name."""

import csv
import io
import json

import pytest
from django.test import Client
from django.urls import reverse

from statestore_admin.records.models import AuditEvent
from statestore_admin.tokens.models import ApiToken

from ..conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
KEY_FIELDS = {"keys", "keys_truncated", "keys_next_cursor"}


def downloaded(client, **params) -> str:
    response = client.get(reverse("audit-export"), params)
    assert response.status_code == 200, response.content
    return b"".join(response.streaming_content).decode()


def test_the_download_entry_is_the_api_event_without_its_keys(operator):
    record, token = ApiToken.issue(operator, "nightly")
    AuditEvent.objects.create(
        actor="operator",
        via="api",
        action="set",
        store="task",
        dag_id="etl",
        key_count=1,
        token_id=record.pk,
        token_name="nightly",
        details={"n": 1},
    )
    AuditEvent.objects.create(actor="alice", via="ui", action="delete", store="asset", asset_id=3, key_count=2)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = api.get("/api/statestore/v1/audit-events")
    assert response.status_code == 200, response.content
    from_api = [{k: v for k, v in e.items() if k not in KEY_FIELDS} for e in response.json()["items"]]
    assert {e["actor"]: e["token"] for e in from_api} == {
        "operator": {"id": record.pk, "name": "nightly"},
        "alice": None,
    }
    page = Client()
    page.force_login(operator)
    assert json.loads(downloaded(page))["events"] == from_api
    rows = list(csv.DictReader(io.StringIO(downloaded(page, format="csv").lstrip("\ufeff"))))
    assert [(r["actor"], r["token_name"]) for r in rows] == [("alice", ""), ("operator", "nightly")]
    assert "token" not in rows[0] and "details" not in rows[0]
