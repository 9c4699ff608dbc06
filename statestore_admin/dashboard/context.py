from django.utils.functional import SimpleLazyObject

from statestore_admin.state import permissions


def capabilities(request):
    """``caps.task.view``, ``caps.asset.delete``… for templates: buttons only for what the user may do."""
    return {"caps": SimpleLazyObject(lambda: permissions.capabilities(request.user))}
