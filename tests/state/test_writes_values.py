"""The rules behind issue 14's writes (#5, #6, #14): values as people read them, duplicate keys, no-op
writes and confirmations that act on exactly what they listed, called directly."""

import json
import unicodedata
from datetime import timedelta

import pytest
from django.utils import timezone

from statestore_admin.access.scopes import EVERYTHING
from statestore_admin.airflow.models import AssetStateStore, TaskStateStore
from statestore_admin.core import values
from statestore_admin.core.errors import Conflict, Invalid
from statestore_admin.core.values import NEVER, Expiry
from statestore_admin.records.models import AuditEvent
from statestore_admin.state import services
from statestore_admin.state.selectors import TaskAddress

from ..conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)
GRUSS = "Grüße, مرحبا"


# Showing values -------------------------------------------------------------------------------------
def test_hidden_characters_are_derived_from_the_unicode_data():
    """HIDDEN is a literal (no start-up cost): it matches what its comment says, from Python's data."""
    wanted = {
        code
        for code in [*range(0x30000), *range(0xE0000, 0xE1000)]
        if unicodedata.category(chr(code)) in ("Cc", "Cf", "Zl", "Zp")
        and code not in (0x200C, 0x200D)
        and not 0xE0020 <= code <= 0xE007F
    } | set(range(0xD800, 0xE000))
    matched = {code for code in [*range(0x30000), *range(0xE0000, 0xE1000)] if values.HIDDEN.fullmatch(chr(code))}
    assert matched == wanted


def test_stored_escapes_are_shown_as_characters_and_stay_json():
    stored = json.dumps({"grüße": GRUSS, "quote": '"\\', "emoji": "😀"})  # Airflow's json.dumps: all escaped
    assert "\\u00fc" in stored
    shown = values.unescaped(stored)
    assert shown == '{"grüße": "Grüße, مرحبا", "quote": "\\"\\\\", "emoji": "😀"}'
    assert json.loads(shown) == json.loads(stored)
    assert values.unescaped('"Gr\\u00fc\\u00d') == '"Grü\\u00d'  # a preview may cut an escape short: it stays


def test_control_and_bidi_characters_are_shown_not_obeyed():
    segments = values.visible_segments("abc\u202edef\x00\n\u200bok\u200d")
    assert segments == [
        ("abc", None),
        ("\\u202e", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("def", None),
        ("␀", "U+0000 control character"),
        ("␊", "U+000A control character"),
        ("\\u200b", "U+200B ZERO WIDTH SPACE"),
        ("ok\u200d", None),  # a joiner, needed by emoji sequences and scripts, stays
    ]
    assert values.visible_segments("") == [("", None)]


def test_the_editor_shows_hidden_characters_as_escapes_and_saves_the_same_value():
    stored = json.dumps({"k": "a\u202eb\x7f", "n": GRUSS})
    text = values.pretty(stored)
    assert "\\u202e" in text and "\\u007f" in text and GRUSS in text and "\u202e" not in text
    assert values.encode_value(values.decode_json_text(text)) == stored


# Parsing and no-op writes ---------------------------------------------------------------------------
@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', '[{"x": {"b": 1, "b": 1}}]'])
def test_an_object_naming_a_key_twice_is_refused(text):
    with pytest.raises(Invalid) as refused:
        values.decode_json_text(text)
    assert "twice" in str(refused.value) and refused.value.error_dict["value"][0].code == "duplicate_key"


def test_same_value_compares_values_not_spellings():
    assert values.same_value('{"a":1}', '{"a": 1}')
    assert values.same_value('"Grüße"', json.dumps("Grüße"))
    assert not values.same_value("1.0", "1") and not values.same_value("true", "1")
    assert not values.same_value('{"a": 1, "b": 2}', '{"b": 2, "a": 1}')  # the order is visible to readers
    assert not values.same_value("not json", '"not json"')


@pytest.fixture
def run(dag_run_factory, task_instance_factory, task_key_factory):
    run = dag_run_factory(dag_id="etl", run_id="r1")
    task_instance_factory(run, task_id="t")
    task_key_factory(run, task_id="t", key="job", value={"id": 1}, updated_at=timezone.now() - timedelta(hours=1))
    return run


def test_an_unchanged_value_is_not_written_by_any_write(run, ui, asset_factory, asset_key_factory):
    job = TaskStateStore.objects.get(key="job")
    TaskStateStore.objects.filter(pk=job.pk).update(value='{"id":1}')  # another writer's spelling
    row = services.patch_task_key(actor=ui, ref=services.TaskKeyRef(id=job.pk), value={"id": 1})
    assert row.written is False
    again = services.set_task_key(
        actor=ui, address=TaskAddress("etl", "r1", "t"), key="job", value={"id": 1}, expiry=Expiry(NEVER)
    )
    assert again.written is False  # the same value and the same expiry (none)
    assert TaskStateStore.objects.get(pk=job.pk).updated_at == job.updated_at
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="cursor", value=7, kind="task", dag_id="etl", run_id="r1", task_id="t")
    before = AssetStateStore.objects.get(key="cursor")
    edit = services.set_asset_key(actor=ui, asset_id=asset.pk, key="cursor", value=7, mode=services.UPDATE)
    assert edit.written is False and AssetStateStore.objects.get(key="cursor").updated_at == before.updated_at
    assert not AuditEvent.objects.exists()
    # Airflow's PUT records the API as the writer: a real change while a task wrote it last.
    put = services.set_asset_key(actor=ui, asset_id=asset.pk, key="cursor", value=7)
    assert put.written is True and AssetStateStore.objects.get(key="cursor").last_updated_by_kind == "api"
    assert services.set_asset_key(actor=ui, asset_id=asset.pk, key="cursor", value=7).written is False
    changed = services.patch_task_key(actor=ui, ref=services.TaskKeyRef(id=job.pk), value={"id": 2})
    assert changed.written is True and AuditEvent.objects.count() == 2


def test_a_conflict_carries_the_current_version(run, ui):
    job = TaskStateStore.objects.get(key="job")
    later = timezone.now()
    TaskStateStore.objects.filter(pk=job.pk).update(value='"by a task"', updated_at=later)
    with pytest.raises(Conflict) as conflict:
        services.patch_task_key(actor=ui, ref=services.TaskKeyRef(id=job.pk), value=3, seen_updated_at=job.updated_at)
    assert conflict.value.details == [{"key": "job", "current": '"by a task"', "updated_at": later}]
    # Saving over the version now shown writes.
    row = services.patch_task_key(actor=ui, ref=services.TaskKeyRef(id=job.pk), value=3, seen_updated_at=later)
    assert row.written and TaskStateStore.objects.get(pk=job.pk).value == "3"


# Confirmations -------------------------------------------------------------------------------------
def test_a_listing_survives_its_token_and_refuses_a_forged_one(run):
    listing = services.list_keys(TaskStateStore.objects.all(), sample=5)
    again = services.Listing.from_token(listing.token)
    assert again.versions == listing.versions and again.count == 1
    assert listing.sample[0].preview == '{"id": 1}' and listing.sample[0].size == 9
    for forged in ("", listing.token[:-2] + "xx", "abc:def"):
        with pytest.raises(Invalid):
            services.Listing.from_token(forged)


def test_the_asset_clear_deletes_exactly_the_listed_versions_whatever_the_clocks(ui, asset_factory, asset_key_factory):
    asset = asset_factory(name="orders")
    for key in ("a", "b", "c"):
        asset_key_factory(asset, key=key, value=key)
    listed = services.list_keys(services.asset_selection(asset.pk))
    now = timezone.now()
    # While the dialog is open: a writer with a slow clock adds a key, another rewrites "b" with an older
    # time, and one with a fast clock had written "c" in the future (listed as such: it goes).
    asset_key_factory(asset, key="late", value=1)
    AssetStateStore.objects.filter(key="late").update(updated_at=now - timedelta(hours=2))
    AssetStateStore.objects.filter(key="b").update(value='"b2"', updated_at=now - timedelta(hours=3))
    outcome = services.clear_asset(actor=ui, asset_id=asset.pk, listed=listed)
    assert (outcome.changed, outcome.added, outcome.rewritten, outcome.gone) == (2, 1, 1, 0)
    assert set(outcome.kept_keys) == {"late", "b"}
    assert set(AssetStateStore.objects.values_list("key", flat=True)) == {"b", "late"}
    assert "kept 2 keys that changed after the list was shown (1 added, 1 written since)" in outcome.describe("deleted")


def test_a_key_written_in_the_future_can_be_cleared(ui, asset_factory, asset_key_factory):
    asset = asset_factory(name="orders")
    asset_key_factory(asset, key="future", value=1)
    AssetStateStore.objects.filter(key="future").update(updated_at=timezone.now() + timedelta(days=2))
    listed = services.list_keys(services.asset_selection(asset.pk))
    assert services.clear_asset(actor=ui, asset_id=asset.pk, listed=listed).changed == 1
    assert not AssetStateStore.objects.exists()


def test_task_clears_and_expiry_keep_what_the_listing_does_not_hold(run, ui, task_instance_factory, task_key_factory):
    for map_index in (0, 1):
        task_instance_factory(run, task_id="m", map_index=map_index)
        task_key_factory(run, task_id="m", map_index=map_index, key="k", value=map_index)
    address = TaskAddress("etl", "r1", "m", -1)
    listed = services.list_keys(services.TaskSelection.of_instance(address, True).queryset(EVERYTHING))
    task_key_factory(run, task_id="m", map_index=1, key="old-clock", updated_at=timezone.now() - timedelta(days=1))
    TaskStateStore.objects.filter(task_id="m", map_index=0).update(value="5")  # same time, another value
    outcome = services.clear_task_instance(actor=ui, address=address, all_map_indices=True, listed=listed)
    assert (outcome.changed, outcome.added, outcome.rewritten) == (1, 1, 1)
    assert set(TaskStateStore.objects.filter(task_id="m").values_list("key", "value")) == {
        ("old-clock", '"v"'),
        ("k", "5"),
    }
    job = services.TaskSelection(ids=(TaskStateStore.objects.get(key="job").pk,))
    listed = services.list_keys(job.queryset(EVERYTHING))
    TaskStateStore.objects.filter(key="job").update(updated_at=timezone.now() + timedelta(hours=5))
    expired = services.expire_task_keys(actor=ui, selection=job, listed=listed)
    assert (expired.changed, expired.rewritten) == (0, 1) and TaskStateStore.objects.get(key="job").expires_at is None


def test_a_listing_holds_at_most_listed_max_keys(run, monkeypatch):
    monkeypatch.setattr(services.confirmations, "LISTED_MAX", 0)
    with pytest.raises(Invalid) as refused:
        services.list_keys(TaskStateStore.objects.all())
    assert "a confirmation lists at most 0" in str(refused.value)
