"""A page's links out: its list as a download (``export_links``) and the same object in Airflow's UI
(``airflow_link``). Each is one line in a page's header."""

from django import template
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _

from statestore_admin.airflow import ui_links
from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.exports import documents as exports

register = template.Library()
CURSORS = ("cursor", "task_cursor", "asset_cursor")  # a download holds the whole list, not a page


@register.inclusion_tag("includes/_export_links.html", takes_context=True)
def export_links(context, url_name, *args, **params):
    """JSON and CSV links to ``url_name`` (with ``args``), keeping the page's filters (its query string but
    the cursors) and ``params``."""
    query = [(name, value) for name, value in context["request"].GET.lists() if name not in CURSORS]
    query = [(name, value) for name, value in query if name not in params and name != "format"]
    query += [(name, [str(value)]) for name, value in params.items()]
    base = reverse(url_name, args=args)
    return {
        "links": [
            (chosen.upper(), f"{base}?{urlencode([*query, ('format', [chosen])], doseq=True)}")
            for chosen in exports.FORMATS
        ]
    }


@register.simple_tag
def coordinate_query(map_index, region_id=None) -> str:
    """A task page's query for one coordinate: ``map_index=N``, and Airflow 3.4's ``region_id`` when it sits
    in a region (the sentinel is left out, so 3.3's links stay as they were)."""
    query = [("map_index", "all" if map_index is None else map_index)]
    if region_id is not None and str(region_id) != str(SENTINEL_REGION_ID):
        query.append(("region_id", str(region_id)))
    return urlencode(query)


@register.inclusion_tag("includes/_airflow_link.html")
def airflow_link(dag_id=None, run_id=None, task_id=None, map_index=-1, asset_id=None, coordinate=None):
    """The same object in Airflow's UI: an asset, a task instance (``map_index`` None: every map index; with
    an Airflow 3.4 ``coordinate`` in a region, that iteration or map position), a run or a DAG, by the
    arguments given; nothing when Airflow's UI address is not known."""
    if asset_id is not None:
        url, what = ui_links.asset_url(asset_id), _("this asset's state")
    elif task_id is not None and coordinate is not None and coordinate.in_region:
        url = ui_links.task_instance_url(
            dag_id, run_id, task_id, coordinate.public_map_index, coordinate.region_id, coordinate.index
        )
        what = _("this task instance's state (%(coordinate)s)") % {"coordinate": coordinate.label}
    elif task_id is not None:
        url, what = ui_links.task_instance_url(dag_id, run_id, task_id, map_index), _("this task instance's state")
        if map_index is None:
            what = _("this task's mapped instances")
    elif run_id is not None:
        url, what = ui_links.run_url(dag_id, run_id), _("this DAG run")
    else:
        url, what = ui_links.dag_url(dag_id), _("this DAG")
    return {"url": url, "what": what}
