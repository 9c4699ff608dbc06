"""System checks of the worker-side objects' settings (``manage.py check``, and at every start)."""

from django.conf import settings
from django.core import checks

from statestore_admin.core.checks import positive_whole_number


@checks.register("statestore")
def check_worker_backend_settings(app_configs=None, **kwargs):
    """Worker-side objects (docs/worker-backends.md): the dashboard's settings, and whether it can reach the
    storage Airflow's configuration names."""
    from statestore_admin.objects import store as objects

    errors = positive_whole_number(
        "WORKER_BACKEND_READ_MAX_BYTES",
        "bytes",
        hint="Set it to the largest value to show from an object, e.g. 1048576.",
        id="statestore.E009",
    )
    options = settings.WORKER_BACKEND_STORAGE_OPTIONS
    if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
        errors.append(
            checks.Error(
                "WORKER_BACKEND_STORAGE_OPTIONS must be a JSON object of objects: "
                '{"<conn_id, protocol or *>": {<fsspec storage options>}}.',
                id="statestore.E010",
            )
        )
        return errors
    store = objects.storage()
    if store is None:
        if settings.WORKER_BACKEND_READ:
            errors.append(
                checks.Warning(
                    "WORKER_BACKEND_READ is on, but Airflow's configuration has no valid "
                    "[common.io] state_store_objectstorage_path: no object can be read.",
                    id="statestore.W001",
                )
            )
        return errors
    try:
        store.suffix  # noqa: B018 - raises for an unsupported compression
        store.filesystem()
    except objects.StorageError as exc:
        errors.append(
            checks.Warning(
                f"Worker-side objects under {store.base} cannot be read or deleted: {exc}",
                hint="Objects of deleted rows are then left behind as orphans (docs/worker-backends.md).",
                id="statestore.W002",
            )
        )
    return errors
