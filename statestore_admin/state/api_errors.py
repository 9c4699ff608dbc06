"""Airflow's REST API's answers as the domain's errors (managed Airflow, ``AIRFLOW_API_URL``): what every read and
write through the API raises, so that each face answers them as it answers the database's."""

from __future__ import annotations

from django.utils.translation import gettext as _

from statestore_admin.airflow import rest
from statestore_admin.airflow.availability import AirflowDatabaseUnavailable
from statestore_admin.core.errors import Ambiguous, Forbidden, Invalid, NotFound, Unaddressable


class AirflowApiUnavailable(AirflowDatabaseUnavailable):
    """Airflow's REST API did not answer, cannot now, or refused the dashboard's token: the faces answer 503
    with ``detail`` (the same handling as an unavailable database)."""

    kind = "api"

    @property
    def detail(self) -> str:
        return f"Airflow's REST API is unavailable: {self.reason}"


class AirflowRefused(Forbidden):
    """Airflow answered 403: the dashboard's token may not do this in Airflow (the user may, here)."""


def translated(exc: rest.AirflowApiError) -> Exception:
    """The domain's error for an answer of Airflow's API."""
    if exc.unavailable:
        return AirflowApiUnavailable(exc.detail)
    if exc.status == 403:
        return AirflowRefused(
            _("Airflow refused: the dashboard's token may not do this in Airflow (%(detail)s).")
            % {"detail": exc.detail}
        )
    if exc.status == 404:
        return NotFound(exc.detail)
    if exc.status == 400:
        return Unaddressable(exc.detail)
    if exc.status == 409:
        return Ambiguous(exc.detail)
    return Invalid({"value": _("Airflow refused the request: %(detail)s") % {"detail": exc.detail}})


def call(api: rest.AirflowApi, method: str, path: str, **kwargs):
    """``api.request`` with its failure as the domain's error."""
    try:
        return api.request(method, path, **kwargs)
    except rest.AirflowApiError as exc:
        raise translated(exc) from None


def call_series(api: rest.AirflowApi) -> str:
    """The API server's Airflow series ("3.3" or "3.4"), its failure as the domain's error."""
    try:
        return rest.server_series(api)
    except rest.AirflowApiError as exc:
        raise translated(exc) from None


def api_asset(api: rest.AirflowApi, asset_id: int, scope) -> dict:
    """An asset as Airflow's API gives it, if ``scope`` reaches it; NotFound, in the state routes' words, for an
    asset that does not exist or is out of scope alike."""
    try:
        found = rest.asset(api, asset_id)
    except rest.AirflowApiError as exc:
        raise translated(exc) from None
    if found is None or not scope.allows_asset(found["name"], found["uri"]):
        raise NotFound(_("Asset with id %(id)s not found") % {"id": asset_id})
    return found
