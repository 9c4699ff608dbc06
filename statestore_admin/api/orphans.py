"""The orphans report (``/api/statestore/v1/orphans``): worker-side objects no row references, and rows whose
object is missing; the same report as ``state_store_orphans --json`` and the Orphans page."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions as drf_permissions
from rest_framework.response import Response

from statestore_admin.access.actors import API, Actor
from statestore_admin.api import shapes
from statestore_admin.api.airflow_v2 import ERRORS, MAX_INT, integer, query_int
from statestore_admin.api.errors import ErrorBody
from statestore_admin.api.ours import OwnView
from statestore_admin.objects import orphans

DESCRIPTION = """What `state_store_orphans --json` prints: the objects under `[common.io]
state_store_objectstorage_path` (`storage`, null when none is configured: then nothing is listed, and
`config_error` says why when the options are invalid) that no row references (`orphans`: count, bytes, a
sample of `{ref, size, modified, store, scope, key}`, `store`/`scope`/`key` being the key the path names, null
for a path outside the provider's layout), rows whose object is missing (`dangling`), references outside the
base path or not resolvable without a configured base (`outside`), references that do not follow the
deterministic layout (`risks`: `{ref, expected, reason, …}`; nothing overwrites their object once the row is
gone), the number of rows holding references (`rows_with_refs`, of which `inline_refs` hold their value
inline), storage errors met (`errors`; `complete` false when there were any) and how long it took
(`seconds`). `orphans.young` and `deletion` are null here (the command's `--older-than` and `--delete`).

The report walks the storage and reads every row holding a reference, on request: it takes time on a large
storage. Our extension, not Airflow's. Open to users who may view both stores and have no scope (the report
names keys of every DAG and asset); deleting orphans is the command's alone."""


class ViewsOrphans(drf_permissions.BasePermission):
    def has_permission(self, request, view):
        return orphans.access(request.user).view


class Orphans(OwnView):
    permission_classes = [ViewsOrphans]

    @extend_schema(
        operation_id="orphans_report",
        tags=["statestore-admin"],
        description=DESCRIPTION,
        responses={200: shapes.OrphansReport, **{code: ERRORS[code] for code in (401, 403, 422)}, 429: ErrorBody},
        parameters=[
            OpenApiParameter(
                "sample",
                integer(0, MAX_INT, orphans.DEFAULT_SAMPLE),
                description=f"Items in each sample; larger values give {orphans.SAMPLE_MAX}.",
            )
        ],
    )
    def get(self, request):
        """The orphans report: objects no row references, dangling references, orphan risks."""
        sample = min(query_int(request, "sample", orphans.DEFAULT_SAMPLE, 0), orphans.SAMPLE_MAX)
        return Response(orphans.report(sample=sample, actor=Actor.from_request(request, via=API)).as_dict())
