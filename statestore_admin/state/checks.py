"""System checks of the domain's settings (``manage.py check``, and at every start)."""

import math

from django.conf import settings
from django.core import checks
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections


@checks.register("statestore")
def check_gc_page_settings(app_configs=None, **kwargs):
    """The GC page's warning thresholds (docs/gc.md, The GC page)."""
    errors = []
    hours = settings.GC_STALE_AFTER_HOURS
    if not isinstance(hours, int | float) or not math.isfinite(hours) or hours <= 0:
        errors.append(
            checks.Error(
                f"GC_STALE_AFTER_HOURS is {hours!r}: it must be a number of hours above 0.",
                hint="Set it to how long GC may go without a successful run, e.g. 26 for a daily schedule.",
                id="statestore.E007",
            )
        )
    rows = settings.GC_BACKLOG_WARN_ROWS
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < 1:
        errors.append(
            checks.Error(
                f"GC_BACKLOG_WARN_ROWS is {rows!r}: it must be a whole number of rows, 1 or more.",
                hint="Set it to the number of expired rows that should not wait for GC, e.g. 100000.",
                id="statestore.E008",
            )
        )
    return errors


@checks.register("statestore")
def check_worker_backend_settings(app_configs=None, **kwargs):
    """Worker-side objects (docs/worker-backends.md): the dashboard's settings, and whether it can reach the
    storage Airflow's configuration names."""
    from statestore_admin.state import objects

    errors = []
    limit = settings.WORKER_BACKEND_READ_MAX_BYTES
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        errors.append(
            checks.Error(
                f"WORKER_BACKEND_READ_MAX_BYTES is {limit!r}: it must be a whole number of bytes, 1 or more.",
                hint="Set it to the largest value to show from an object, e.g. 1048576.",
                id="statestore.E009",
            )
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


@checks.register("statestore")
def check_group_mapping(app_configs=None, **kwargs):
    """OIDC_GROUP_ROLES names roles that exist (docs/sign-in.md): a typo would grant nothing, silently."""
    from .sign_in import GroupMapping

    return [
        checks.Error(problem, hint="Use Viewer, Operator, Admin or superuser (as written).", id="statestore.E030")
        for problem in GroupMapping.from_settings().problems()
    ]


TOKEN_IDP_MAX_AGE_LIMIT = 10 * 365 * 24 * 3600


@checks.register("statestore")
def check_access_settings(app_configs=None, **kwargs):
    """DEFAULT_SCOPE and TOKEN_IDP_MAX_AGE (docs/access.md, docs/sign-in.md)."""
    from statestore_admin.state import scopes

    errors = [
        checks.Error(
            problem, hint="Set DEFAULT_SCOPE to *, or to glob patterns separated by commas.", id="statestore.E060"
        )
        for problem in scopes.default_scope_problems()
    ]
    age = settings.TOKEN_IDP_MAX_AGE
    # At most ten years: a bound far beyond it would carry "until when access lasts" past the calendar's end (a 500
    # for every request of such an account) while meaning no bound at all.
    if not isinstance(age, int) or isinstance(age, bool) or not 1 <= age <= TOKEN_IDP_MAX_AGE_LIMIT:
        errors.append(
            checks.Error(
                f"TOKEN_IDP_MAX_AGE is {age!r}: it must be a whole number of seconds, from 1 to "
                f"{TOKEN_IDP_MAX_AGE_LIMIT} (ten years).",
                hint="Set it to how long access lasts after the last sign-in at the provider, e.g. 86400 (a day).",
                id="statestore.E061",
            )
        )
    return errors


@checks.register("statestore")
def check_look_alike_accounts(app_configs=None, databases=None, **kwargs):
    """Accounts made before names were compared as ``state.usernames`` compares them may be two accounts with
    one name (``Admin`` and ``admin``): said here, for an administrator to rename or remove one, rather than
    merged by a migration that would have to guess whose they are."""
    from .usernames import collisions, visible

    if databases is not None and DEFAULT_DB_ALIAS not in databases:
        return []
    try:
        if "auth_user" not in connections[DEFAULT_DB_ALIAS].introspection.table_names():
            return []  # before the first migrate
        found = collisions()
    except DatabaseError:  # an unreachable database fails on its own, loudly, at the first request
        return []
    return [
        checks.Warning(
            f"The accounts {', '.join(repr(visible(name)) for name in names)} have one name: user names are "
            "compared ignoring case and character width, so a command or a sign-in that names one of them may reach "
            "another.",
            hint="Rename or remove all but one of them in /admin/ (docs/sign-in.md, User names).",
            id="statestore.W005",
        )
        for names in found
    ]
