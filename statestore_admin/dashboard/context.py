from django.conf import settings
from django.utils.functional import SimpleLazyObject

from statestore_admin import gc
from statestore_admin.access import policies, scopes
from statestore_admin.airflow import rest
from statestore_admin.objects import orphans


def capabilities(request):
    """``caps.task.view``, ``caps.asset.delete``… for templates: buttons only for what the user may do;
    ``caps.gc.view`` and ``caps.gc.run`` for the GC page, ``caps.orphans`` for its menu entry;
    ``caps.read_only``: may view some state but change none (the header's "Read-only" badge);
    ``caps.no_scope``: may view state but no DAG or asset is in their scope (scopes fail closed), so every
    page would be empty without saying why (the notice above each page)."""

    def caps():
        stores = policies.capabilities(request.user)
        may_view = any(store["view"] for store in stores.values())
        may_write = any(store[action] for store in stores.values() for action in ("add", "change", "delete"))
        return {
            **stores,
            "gc": gc.access(request.user),
            "orphans": orphans.in_menu(request.user),
            "read_only": may_view and not may_write,
            "no_scope": may_view and scopes.scope_of(request.user).sees_nothing,
        }

    return {"caps": SimpleLazyObject(caps)}


def environment(request):
    """``environment.name`` and ``environment.color``: the band on every page and the title's prefix
    ("Where am I"); no name, no band."""
    return {"environment": {"name": settings.STATESTORE_ENVIRONMENT, "color": settings.STATESTORE_ENVIRONMENT_COLOR}}


def airflow_source(request):
    """``airflow_api_mode``: the deployment reads Airflow through its REST API (managed Airflow): the menu leads
    to the pages that work without Airflow's database (``views.browse``)."""
    return {"airflow_api_mode": rest.api_mode()}
