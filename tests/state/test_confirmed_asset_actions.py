"""The pages' confirmed delete and clear of an asset's keys: one call lists the keys (``preview_asset_keys``),
one acts on exactly those (``apply_asset_keys``), each checking the permission, the scope and the selection."""

from datetime import timedelta

import pytest
from django.utils import timezone

from statestore_admin.access.actors import Actor
from statestore_admin.airflow.models import AssetStateStore
from statestore_admin.core.errors import Forbidden, Invalid, NotFound
from statestore_admin.state import services

from ..conftest import BOTH_DATABASES

pytestmark = pytest.mark.django_db(databases=BOTH_DATABASES)


@pytest.fixture
def asset(asset_factory, asset_key_factory):
    asset = asset_factory(name="orders")
    for key in ("b", "a", "c"):
        asset_key_factory(asset, key=key, value=key)
    return asset


def keys_of(asset) -> list[str]:
    return sorted(AssetStateStore.objects.filter(asset=asset).values_list("key", flat=True))


def test_preview_lists_the_chosen_keys_and_apply_deletes_exactly_those(asset, ui):
    preview = services.preview_asset_keys(actor=ui, asset_id=asset.pk, keys=["a", "c"], sample=10)
    assert preview.asset == asset and [r.key for r in preview.listing.sample] == ["a", "c"]
    outcome, acted_on = services.apply_asset_keys(
        actor=ui, asset_id=asset.pk, keys=["a", "c"], token=preview.listing.token
    )
    assert acted_on == asset and outcome.changed == 2 and outcome.event.action == "delete"
    assert keys_of(asset) == ["b"]


def test_a_clear_takes_every_key_listed_and_keeps_one_written_since(asset, ui):
    preview = services.preview_asset_keys(actor=ui, asset_id=asset.pk, keys=None)
    assert preview.listing.count == 3
    AssetStateStore.objects.filter(asset=asset, key="b").update(updated_at=timezone.now() + timedelta(hours=1))
    outcome, _ = services.apply_asset_keys(actor=ui, asset_id=asset.pk, keys=None, token=preview.listing.token)
    assert outcome.event.action == "clear" and (outcome.changed, outcome.rewritten) == (2, 1)
    assert keys_of(asset) == ["b"]


def test_the_refusals_change_nothing(asset, ui, viewer):
    with pytest.raises(Invalid):  # no key chosen
        services.preview_asset_keys(actor=ui, asset_id=asset.pk, keys=[])
    with pytest.raises(Invalid):  # none of the chosen keys is there
        services.preview_asset_keys(actor=ui, asset_id=asset.pk, keys=["nope"])
    with pytest.raises(NotFound):
        services.preview_asset_keys(actor=ui, asset_id=asset.pk + 1000, keys=None)
    with pytest.raises(Invalid):  # a damaged confirmation
        services.apply_asset_keys(actor=ui, asset_id=asset.pk, keys=None, token="not a token")
    viewer_actor = Actor(via="ui", user=viewer, host="127.0.0.1")
    with pytest.raises(Forbidden):
        services.preview_asset_keys(actor=viewer_actor, asset_id=asset.pk, keys=None)
    token = services.preview_asset_keys(actor=ui, asset_id=asset.pk, keys=None).listing.token
    with pytest.raises(Forbidden):
        services.apply_asset_keys(actor=viewer_actor, asset_id=asset.pk, keys=None, token=token)
    assert keys_of(asset) == ["a", "b", "c"]
