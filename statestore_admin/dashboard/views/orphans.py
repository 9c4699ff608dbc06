"""The Orphans page (``/orphans/``): worker-side objects no row references, dangling references and orphan
risks, from ``objects.orphans.report`` (the same report as ``state_store_orphans`` and the API).

The report walks the object storage and reads every row holding a reference, so it is made on request
(``?sample=N`` items per sample) and says how long it took. Deleting is the command's: the page shows it.
Open to users who may view both stores and have no scope (``orphans.access``).
"""

from __future__ import annotations

import shlex
import sys

from django.conf import settings
from django.shortcuts import render

from statestore_admin.access.actors import Actor
from statestore_admin.dashboard.http import params
from statestore_admin.objects import orphans
from statestore_admin.objects import store as objects

SAMPLES = (20, 100, 500)


def orphans_page(request):
    orphans.require_view(request.user)
    sample = params.integer(request.GET, "sample", orphans.DEFAULT_SAMPLE, 0, orphans.SAMPLE_MAX)
    error = ""
    try:
        report = orphans.report(sample=sample, actor=Actor.from_request(request)).as_dict()
    except objects.StorageError as exc:  # the storage itself: the page says so rather than failing
        report, error = None, str(exc)
    command = f"cd {shlex.quote(str(settings.BASE_DIR))} && {shlex.quote(sys.executable)} manage.py state_store_orphans"
    context = {
        "report": report,
        "error": error,
        "sample": sample,
        "samples": SAMPLES,
        "command": command,
        "delete_command": f"{command} --delete --older-than 1",
        "may_delete": orphans.access(request.user).delete,
    }
    return render(request, "orphans/index.html", context)
