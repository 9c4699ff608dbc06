"""Search across task and asset keys: one parser of the parameters (``SearchQuery.from_params``) for the
Search page and the search API, and the queries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from statestore_admin.airflow.models import AssetStateStore, TaskStateStore

from .errors import Invalid
from .pagination import Page, paginate
from .scopes import Scope
from .selectors import STATUSES, scoped_asset_keys, scoped_task_keys, status_filter, with_previews

MATCHES = ("contains", "prefix", "exact")


@dataclass(frozen=True)
class SearchQuery:
    key: str = ""
    match: str = "contains"
    dag_id: str = ""
    run_id: str = ""
    task_id: str = ""
    status: str = ""
    asset: str = ""

    @classmethod
    def from_params(cls, params) -> SearchQuery:
        """From a query string, the same for the Search page and the API. An unknown ``match`` or ``status``
        is ``Invalid`` naming the parameter (code ``enum``, ``params["choices"]``); empty means the default.
        Ids and the asset text are stripped of surrounding spaces; the key is taken as typed."""
        names = ("key", "match", "dag_id", "run_id", "task_id", "status", "asset")
        values = {name: params.get(name) or "" for name in names}
        errors = {}
        for name, choices in (("match", MATCHES), ("status", tuple(STATUSES))):
            if values[name] and values[name] not in choices:
                typed = repr(values[name]).replace("%", "%%")  # the message is %-formatted with params
                errors[name] = [
                    Invalid(
                        f"Unknown {name} {typed}: use one of {', '.join(choices)}.",
                        code="enum",
                        params={"choices": choices},
                    )
                ]
        if errors:
            raise Invalid(errors)
        return cls(
            key=values["key"],
            match=values["match"] or "contains",
            dag_id=values["dag_id"].strip(),
            run_id=values["run_id"].strip(),
            task_id=values["task_id"].strip(),
            status=values["status"],
            asset=values["asset"].strip(),
        )

    def key_filter(self) -> Q:
        if not self.key:
            return Q()
        lookup = {"contains": "icontains", "prefix": "startswith", "exact": "exact"}[self.match]
        return Q(**{f"key__{lookup}": self.key})

    @property
    def task_only(self) -> bool:
        return bool(self.dag_id or self.run_id or self.task_id or self.status)


def search_task_keys(
    query: SearchQuery, now: datetime, cursor: str | None = None, size: int = 50, *, scope: Scope
) -> Page:
    if query.dag_id and not scope.allows_dag(query.dag_id):
        return Page([], None, cursor)
    rows = TaskStateStore.objects.filter(query.key_filter())
    if not query.dag_id:
        rows = scoped_task_keys(scope, rows)
    for name in ("dag_id", "run_id", "task_id"):
        if getattr(query, name):
            rows = rows.filter(**{name: getattr(query, name)})
    if query.status in STATUSES:
        rows = rows.filter(status_filter(query.status, now))
    return paginate(with_previews(rows), ["-id"], cursor, size)


def search_asset_keys(query: SearchQuery, cursor: str | None = None, size: int = 50, *, scope: Scope) -> Page:
    if query.task_only:
        return Page([], None, None)
    rows = scoped_asset_keys(scope, AssetStateStore.objects.filter(query.key_filter())).select_related("asset")
    if query.asset:
        rows = rows.filter(Q(asset__name__icontains=query.asset) | Q(asset__uri__icontains=query.asset))
    return paginate(with_previews(rows).defer("asset__extra"), ["asset_id", "key"], cursor, size)
