from django.utils.functional import SimpleLazyObject

from statestore_admin.state import gc, permissions


def capabilities(request):
    """``caps.task.view``, ``caps.asset.delete``… for templates: buttons only for what the user may do;
    ``caps.gc.view`` and ``caps.gc.run`` for the GC page."""
    return {"caps": SimpleLazyObject(lambda: {**permissions.capabilities(request.user), "gc": gc.access(request.user)})}
