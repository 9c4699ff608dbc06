"""Values, expiry and keyset pagination of the domain layer, called directly (both databases)."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from statestore_admin.access.scopes import EVERYTHING
from statestore_admin.airflow.models import TaskStateStore
from statestore_admin.core import pagination
from statestore_admin.core.errors import Invalid, NotFound
from statestore_admin.core.values import (
    AT,
    DEFAULT,
    NEVER,
    Expiry,
    clean_key,
    decode_json_text,
    encode_value,
    parse_datetime_aware,
    pretty,
)
from statestore_admin.state import selectors
from statestore_admin.state.selectors import TaskAddress

from ..conftest import BOTH_DATABASES
from ..factories import make_task_keys


# Values -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "code"),
    [("", "key_required"), ("k" * 513, "key_too_long"), ("a\x00b", "key_nul"), (None, "key_required")],
)
def test_bad_keys_are_invalid_with_a_code(key, code):
    with pytest.raises(Invalid) as error:
        clean_key(key)
    assert error.value.error_dict["key"][0].code == code


def test_any_other_key_is_kept_as_it_is():
    for key in ("a/b c:d", "k" * 512, " spaced ", "Grüße"):
        assert clean_key(key) == key


@pytest.mark.parametrize(
    ("value", "code"),
    [(None, "null"), (float("nan"), "non_finite"), ({"x": float("inf")}, "non_finite"), ({1, 2}, "not_json")],
)
def test_unstorable_values_are_invalid(value, code):
    with pytest.raises(Invalid) as error:
        encode_value(value, max_bytes=0)
    assert error.value.error_dict["value"][0].code == code


def test_values_are_stored_as_airflow_stores_them_and_the_limit_counts_bytes():
    assert encode_value({"a": [1, 2.5, True]}, max_bytes=0) == '{"a": [1, 2.5, true]}'
    assert encode_value("ü", max_bytes=0) == '"\\u00fc"'  # json.dumps' default, as Airflow's writers
    assert encode_value("x" * 8, max_bytes=10) == '"xxxxxxxx"'
    with pytest.raises(Invalid, match="11 bytes as JSON"):
        encode_value("x" * 9, max_bytes=10)


def test_the_limit_comes_from_airflows_configuration(monkeypatch):
    monkeypatch.setenv("AIRFLOW__STATE_STORE__MAX_VALUE_STORAGE_BYTES", "5")
    with pytest.raises(Invalid, match="allows 5"):
        encode_value("long enough")
    monkeypatch.setenv("AIRFLOW__STATE_STORE__MAX_VALUE_STORAGE_BYTES", "0")
    assert encode_value("x" * 100_000)


def test_typed_json_and_pretty_printing():
    assert decode_json_text('{"a": NaN}')["a"] != decode_json_text('{"a": NaN}')["a"]  # NaN, refused later
    with pytest.raises(Invalid, match="Not valid JSON"):
        decode_json_text("{bad")
    assert pretty('{"a":1}') == '{\n  "a": 1\n}' and pretty("not json") == "not json"
    assert pretty('"\\u00fc"') == '"ü"'


def test_expiry_is_computed_at_write_time(monkeypatch):
    now = datetime(2026, 11, 30, tzinfo=UTC)
    monkeypatch.setenv("AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS", "7")
    assert Expiry(DEFAULT).resolve(now) == now + timedelta(days=7)
    monkeypatch.setenv("AIRFLOW__STATE_STORE__DEFAULT_RETENTION_DAYS", "0")
    assert Expiry(DEFAULT).resolve(now) is None
    assert Expiry(NEVER).resolve(now) is None
    assert Expiry(AT, now - timedelta(days=1)).resolve(now) == now - timedelta(days=1)


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-01T00:00:00",
        "tomorrow",
        "",
        "2026-13-01T00:00:00+00:00",
        "2026-02-30T00:00:00+00:00",
        "2026-01-01T25:00:00+00:00",
        "2026-01-01T00:00:00+25:00",
        "0001-01-01T00:00:00+01:00",
    ],
)
def test_naive_or_bad_datetimes_are_invalid(text):
    with pytest.raises(Invalid):
        parse_datetime_aware(text)


def test_aware_datetimes_are_converted_to_utc():
    assert parse_datetime_aware("2026-12-01T02:00:00+02:00") == datetime(2026, 12, 1, tzinfo=UTC)


# Pagination and selectors on both databases ----------------------------------------------------------------
@pytest.fixture
def many_keys(dag_run_factory, task_instance_factory):
    run = dag_run_factory(dag_id="p", run_id="r")
    task_instance_factory(run, task_id="t")
    now = timezone.now()
    make_task_keys(run, 125, key="k{i:03}", value=json.dumps, updated_at=now)
    return run


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_keyset_pages_cover_every_row_once_in_order(many_keys):
    seen, cursor = [], None
    for _ in range(10):
        page = selectors.instance_state(many_keys, "t", -1, cursor, size=50)
        seen += [k.key for k in page.items]
        if not page.has_more:
            break
        cursor = page.next_cursor
    assert seen == [f"k{i:03}" for i in range(125)]


@pytest.mark.django_db(databases=BOTH_DATABASES)
@pytest.mark.parametrize(
    "cursor", ["not-base64!", "WyJhYmMiXQ", "W1sxLDJdXQ", "W251bGxd", pagination.encode_cursor(["a", 1])]
)
def test_a_tampered_cursor_is_the_first_page(many_keys, cursor):
    page = selectors.instance_state(many_keys, "t", -1, cursor, size=10)
    assert [k.key for k in page.items][:1] == ["k000"]


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_previews_never_load_whole_values(many_keys):
    TaskStateStore.objects.filter(key="k000").update(value=json.dumps("x" * 10_000))
    row = selectors.instance_state(many_keys, "t", -1, None, size=1).items[0]
    assert len(row.preview) == selectors.PREVIEW_CHARS and row.size == 10_002 and "value" in row.get_deferred_fields()


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_task_instance_lookup_is_airflows_404(many_keys):
    assert selectors.require_task_instance(TaskAddress("p", "r", "t")).pk == many_keys.pk
    with pytest.raises(NotFound, match="map_index=3"):
        selectors.require_task_instance(TaskAddress("p", "r", "t", 3))
    with pytest.raises(NotFound, match="all_map_indices=True"):
        selectors.require_task_instance(TaskAddress("p", "r", "other"), any_map_index=True)
    with pytest.raises(NotFound, match="Asset with id 424242 not found"):
        selectors.get_asset(424242, scope=EVERYTHING)


@pytest.mark.django_db(databases=BOTH_DATABASES)
def test_audit_query_parses_and_refuses_bad_filters():
    query = selectors.AuditQuery.from_params({"action": "delete", "asset_id": "4", "since": "2026-01-01T00:00:00Z"})
    assert (query.action, query.asset_id, query.since.year) == ("delete", 4, 2026)
    with pytest.raises(Invalid) as error:
        selectors.AuditQuery.from_params({"action": "drop", "via": "x", "asset_id": "a", "until": "2026-01-01"})
    assert set(error.value.message_dict) == {"action", "via", "asset_id", "until"}


@pytest.mark.parametrize(
    "entry",
    [
        {"dag_id": "d\x00", "run_id": "r", "task_id": "t", "key": "k", "value": 1},
        {"dag_id": "d", "run_id": "r" * 251, "task_id": "t", "key": "k", "value": 1},
        {"dag_id": "d", "run_id": "r", "task_id": "t", "map_index": 2**31, "key": "k", "value": 1},
        {"dag_id": "d", "run_id": "r", "task_id": "t", "map_index": True, "key": "k", "value": 1},
        {"dag_id": "d", "run_id": "r", "task_id": "t", "key": "k\x00", "value": 1},
        {"dag_id": "d", "run_id": "r", "task_id": "t", "key": "k", "value": None},
        {"dag_id": "d", "run_id": "r", "task_id": "t", "key": "k", "value": 1, "expires_at": "2026-01-01T00:00:00"},
        {"store": "asset", "asset_id": 2**40, "key": "k", "value": 1},
    ],
)
def test_export_documents_are_validated_entry_by_entry(entry):
    from statestore_admin.exports.documents import FORMAT, parse_document

    entry = {"store": "task", **entry}
    with pytest.raises(Invalid, match=r"keys\[0\]"):
        parse_document({"format": FORMAT, "version": 1, "keys": [entry]})
