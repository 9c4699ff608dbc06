"""Assets and their keys: the asset list with key counts, one asset, its keys and the run that wrote one;
the value previews of listings."""

from __future__ import annotations

from django.db.models import (
    BooleanField,
    Case,
    Count,
    Exists,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Length, Substr
from django.db.models.lookups import IsNull
from django.utils.translation import gettext as _

from statestore_admin.access.reach import scoped_assets
from statestore_admin.access.scopes import Scope
from statestore_admin.airflow import rest
from statestore_admin.airflow.models import Asset, AssetActive, AssetStateStore, DagRun, TaskStateStore
from statestore_admin.audit.trail import name_writers
from statestore_admin.core.errors import NotFound
from statestore_admin.core.pagination import Page, paginate
from statestore_admin.state import api_errors
from statestore_admin.state.selectors.regions import with_writer_coordinates


def _active() -> IsNull:
    """Whether the asset is active: a probe of asset_active's primary key per asset. Not ``Exists``: PostgreSQL
    turns an EXISTS in a select list into a hash of the whole asset_active table (25 ms at 50,000 assets), where
    a scalar subquery stays one index probe per row of the page."""
    probe = AssetActive.objects.filter(name=OuterRef("name"), uri=OuterRef("uri")).values("name")[:1]
    return IsNull(Subquery(probe), False)


def assets_with_key_counts(scope: Scope) -> QuerySet:
    """The assets in ``scope``, each with ``key_count`` (None for none), without their ``extra``."""
    key_count = (
        AssetStateStore.objects.filter(asset=OuterRef("pk"))
        .order_by()
        .values("asset")
        .annotate(n=Count("key"))
        .values("n")
    )
    return scoped_assets(scope).defer("extra").annotate(key_count=Subquery(key_count))


def assets(cursor: str | None = None, q: str = "", with_state: bool = False, size: int = 50, *, scope: Scope) -> Page:
    """Assets with their number of keys and whether they are active: one query a page."""
    rows = assets_with_key_counts(scope).annotate(active=_active())
    if q:
        rows = rows.filter(Q(name__icontains=q) | Q(uri__icontains=q) | Q(group__icontains=q))
    if with_state:
        rows = rows.filter(Exists(AssetStateStore.objects.filter(asset=OuterRef("pk"))))
    return paginate(rows, ["id"], cursor, size)


def get_asset(asset_id: int, *, scope: Scope) -> Asset:
    """An asset by id; one out of ``scope`` is NotFound in the same words as a missing one. Over Airflow's REST
    API, as Airflow gives it (its id, name and URI)."""
    if rest.api_mode():
        return Asset(**api_errors.api_asset(rest.client(), asset_id, scope))
    try:
        return scoped_assets(scope).annotate(active=_active()).defer("extra").get(pk=asset_id)
    except Asset.DoesNotExist:
        raise NotFound(_("Asset with id %(id)s not found") % {"id": asset_id}) from None


def asset_state(asset: Asset, cursor: str | None = None, size: int = 100) -> Page:
    """A page of an asset's keys, each with its writer's coordinate (``with_writer_coordinates``); a key whose
    writer Airflow's columns cannot name says who wrote it (``name_writers``)."""
    page = paginate(with_previews(AssetStateStore.objects.filter(asset=asset)), ["key"], cursor, size)
    page.items = with_writer_coordinates(page.items)
    name_writers(page.items)
    return page


def get_asset_key(asset_id: int, key: str, *, scope: Scope) -> AssetStateStore:
    row = AssetStateStore.objects.select_related("asset").filter(asset_id=asset_id, key=key).first()
    if row is None or not scope.allows_asset(row.asset.name, row.asset.uri):
        message = _("Asset %(id)s has no key %(key)r: it may have been deleted.")
        raise NotFound(message % {"id": asset_id, "key": key})
    return name_writers([row])[0]


def writer_run(key: AssetStateStore, *, scope: Scope) -> DagRun | None:
    """The DAG run of the task that last wrote an asset key, when it still exists and is in ``scope``."""
    if key.last_updated_by_kind != "task" or not key.last_updated_by_dag_id:
        return None
    if not scope.allows_dag(key.last_updated_by_dag_id):
        return None
    return DagRun.objects.filter(dag_id=key.last_updated_by_dag_id, run_id=key.last_updated_by_run_id).first()


PREVIEW_CHARS = 160


REF_PREFIX = TaskStateStore.REF_PREFIX  # a worker-side reference's stored text starts so


def with_previews(rows: QuerySet) -> QuerySet:
    """Rows with ``preview`` (the value's first characters), ``size`` and ``is_ref`` (a worker-side
    reference), instead of the whole value: a page never loads megabytes of values."""
    return rows.defer("value").annotate(
        preview=Substr("value", 1, PREVIEW_CHARS),
        size=Length("value"),
        is_ref=Case(
            When(value__startswith=REF_PREFIX, then=Value(True)), default=Value(False), output_field=BooleanField()
        ),
    )
