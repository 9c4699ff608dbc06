"""A task instance named in a page's query string by Airflow's names (``views.browse`` and ``actions.browse``),
and the query string and page address of one."""

from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _

from statestore_admin.core.errors import Invalid
from statestore_admin.dashboard.http import params
from statestore_admin.state.addresses import TaskAddress


def address_of(request) -> TaskAddress:
    """The task instance the query string names: ``dag_id``, ``run_id``, ``task_id``, ``map_index`` (on Airflow
    3.4, its index in ``region_id`` when that is given). A malformed index or region is ``Invalid``."""
    index = params.map_index(request.GET)
    if index is None:
        raise Invalid({"map_index": _("map_index is a whole number from -1.")})
    region = params.region_id(request.GET)
    names = [request.GET.get(name, "") for name in ("dag_id", "run_id", "task_id")]
    return TaskAddress(*names, index) if region is None else TaskAddress(*names, index, region)


def address_query(address: TaskAddress, **more) -> str:
    query = {"dag_id": address.dag_id, "run_id": address.run_id, "task_id": address.task_id}
    query["map_index"] = address.map_index
    if address.in_region:
        query["region_id"] = str(address.region_id)
    return urlencode({**query, **more})


def task_url(address: TaskAddress) -> str:
    return f"{reverse('browse-task')}?{address_query(address)}"
