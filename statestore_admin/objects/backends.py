"""How the dashboard reads Airflow's ``[state_store]`` backend settings: which backend and worker-side
backend are configured, whether a custom class can be imported, and what each mode means for the dashboard."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.utils.module_loading import import_string
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

from statestore_admin.airflow.config import METASTORE_BACKEND, AirflowConfig, airflow_config
from statestore_admin.objects import store as objects

BACKEND_MODES = {
    "metastore": gettext_lazy("State lives in these tables: what you see here is what tasks read."),
    "custom": gettext_lazy(
        "A custom [state_store] backend keeps state elsewhere, not in Airflow's metastore: these tables may be empty "
        "or stale. Garbage collection and every page and API here see only the metastore tables (GC deletes nothing "
        "while this backend is configured)."
    ),
    "worker": gettext_lazy(
        "A worker-side backend stores the values elsewhere: the values here are references "
        '({"__airflow_state_ref__": …}).'
    ),
}
# Each mode's name on the overview's badge, in the reader's language.
MODE_LABELS = {
    "metastore": pgettext_lazy("backend mode", "metastore"),
    "custom": pgettext_lazy("backend mode", "custom"),
    "worker": pgettext_lazy("backend mode", "worker-side"),
}
BACKEND_DOCS = "docs/worker-backends.md"
# What a [state_store] backend may define (Airflow's BaseStoreBackend); the dashboard calls none of them.
BACKEND_METHODS = ("get", "set", "delete", "clear", "aget", "aset", "adelete", "aclear")


@dataclass(frozen=True)
class BackendStatus:
    backend: str
    is_metastore: bool
    reason: str


def backend_status(config: AirflowConfig | None = None) -> BackendStatus:
    """Is ``[state_store] backend`` the metastore backend, whose rows GC may delete?

    The default dotted path is the metastore backend. Another path counts when it is listed in the
    ``STATESTORE_METASTORE_BACKENDS`` setting, or when both it and Airflow's ``MetastoreBackend`` can be
    imported here and it is a subclass. Anything else is a custom backend: nothing is deleted.
    """
    backend = (config or airflow_config()).backend
    if backend == METASTORE_BACKEND:
        return BackendStatus(backend, True, "the default metastore backend")
    if backend in settings.STATESTORE_METASTORE_BACKENDS:
        return BackendStatus(backend, True, "declared a MetastoreBackend subclass in STATESTORE_METASTORE_BACKENDS")
    try:
        backend_class = import_string(backend)
        metastore_class = import_string(METASTORE_BACKEND)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - ImportError, or whatever the module's code raises
        return BackendStatus(
            backend,
            False,
            f"a custom backend ({backend}); it cannot be imported here to check whether it subclasses "
            f"MetastoreBackend ({exc}). If it does, list it in STATESTORE_METASTORE_BACKENDS",
        )
    if isinstance(backend_class, type) and issubclass(backend_class, metastore_class):
        return BackendStatus(backend, True, "a subclass of MetastoreBackend")
    return BackendStatus(backend, False, f"a custom backend ({backend}), not a MetastoreBackend subclass")


@dataclass(frozen=True)
class BackendMode:
    """One line of the overview's configuration: ``mode`` (metastore, custom, worker), what it means here
    (``text``), where the documentation is (``docs``) and the facts behind the text (``details``, for the API)."""

    mode: str
    text: str
    docs: str = ""
    details: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The mode's name for people (the badge)."""
        return MODE_LABELS.get(self.mode, self.mode)


@dataclass(frozen=True)
class BackendClass:
    """What importing a configured backend class in the dashboard's environment found (never instantiated):
    ``importable``, else ``error``; the ``methods`` of ``BACKEND_METHODS`` it defines (its own or inherited,
    not abstract)."""

    path: str
    importable: bool
    error: str = ""
    methods: tuple[str, ...] = ()


def inspect_backend_class(path: str) -> BackendClass:
    """Import ``path`` (catching every exception, never instantiating it) and list the backend methods it
    defines."""
    try:
        found = import_string(path)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever the module does, the page still renders
        return BackendClass(path, False, f"{type(exc).__name__}: {exc}")
    if not isinstance(found, type):
        return BackendClass(path, False, f"{path} is a {type(found).__name__}, not a class")
    abstract = getattr(found, "__abstractmethods__", frozenset())
    methods = tuple(m for m in BACKEND_METHODS if callable(getattr(found, m, None)) and m not in abstract)
    return BackendClass(path, True, methods=methods)


def _custom_backend_mode(backend: str) -> BackendMode | None:
    """The overview's line for a ``[state_store] backend`` that is not the metastore backend (None when it is
    one after all, by the rule GC applies: ``backend_status``)."""
    if backend_status().is_metastore:
        return None
    found = inspect_backend_class(backend)
    if found.importable:
        if found.methods:
            how = _(
                "%(backend)s is importable here; it defines %(methods)s. The dashboard reads only the metastore "
                "tables, so these methods are not called."
            )
        else:
            how = _(
                "%(backend)s is importable here; it defines none of %(methods)s. The dashboard reads only the "
                "metastore tables, so these methods are not called."
            )
        how %= {"backend": backend, "methods": ", ".join(found.methods or BACKEND_METHODS)}
    else:
        how = _(
            "%(backend)s cannot be imported in the dashboard's environment (%(error)s); the dashboard would not "
            "call it anyway: it reads only the metastore tables."
        ) % {"backend": backend, "error": found.error}
    details = {
        "backend": backend,
        "importable": found.importable,
        "import_error": found.error or None,
        "methods": list(found.methods),
        "methods_called": [],
    }
    return BackendMode("custom", f"{BACKEND_MODES['custom']} {how}", BACKEND_DOCS, details)


def _worker_backend_mode(worker_backend: str) -> BackendMode:
    """The overview's line for ``[workers] state_store_backend``: whether the dashboard can read and delete
    the objects (a configured ``[common.io]`` storage, ``WORKER_BACKEND_READ``)."""
    store = objects.storage()
    reading = objects.read_enabled()
    parts = [str(BACKEND_MODES["worker"])]
    is_object_storage = worker_backend == objects.PROVIDER_BACKEND
    if not is_object_storage:
        message = _(
            "%(backend)s is not Airflow's object-storage backend (common.io): the dashboard knows only that "
            "backend's layout, and shows these references as they are."
        )
        parts.append(message % {"backend": worker_backend})
    if store is None:
        parts.append(
            _(
                "The dashboard's Airflow configuration names no [common.io] state_store_objectstorage_path: it can "
                "neither read nor delete the objects, and deleting a row here leaves its object behind (an orphan)."
            )
        )
    else:
        parts.append(_storage_sentence(store, reading))
    details = {
        "backend": worker_backend,
        "object_storage_backend": is_object_storage,
        "storage": None
        if store is None
        else {"base": store.base, "compression": store.compression or None, "threshold": store.threshold},
        "read": reading,
    }
    return BackendMode("worker", " ".join(parts), BACKEND_DOCS, details)


def _storage_sentence(store: objects.Storage, reading: bool) -> str:
    """Where the objects are, that the dashboard deletes them after their rows, and whether key pages read them."""
    words = {"base": store.base, "compression": store.compression}
    if store.compression and reading:
        message = _(
            "Objects are under %(base)s, %(compression)s-compressed: the dashboard deletes a deleted row's object "
            "after the row (Airflow's order), and key pages show the value read from the object (WORKER_BACKEND_READ "
            "is on)."
        )
    elif store.compression:
        message = _(
            "Objects are under %(base)s, %(compression)s-compressed: the dashboard deletes a deleted row's object "
            "after the row (Airflow's order); reading them is off (WORKER_BACKEND_READ), so key pages show the "
            "reference only."
        )
    elif reading:
        message = _(
            "Objects are under %(base)s: the dashboard deletes a deleted row's object after the row (Airflow's "
            "order), and key pages show the value read from the object (WORKER_BACKEND_READ is on)."
        )
    else:
        message = _(
            "Objects are under %(base)s: the dashboard deletes a deleted row's object after the row (Airflow's "
            "order); reading them is off (WORKER_BACKEND_READ), so key pages show the reference only."
        )
    return message % words


def backend_modes(by_name: dict) -> list[BackendMode]:
    """The overview's configuration lines, from the ``[state_store]`` options (``(section, key) -> value``)."""
    modes = []
    backend = by_name.get(("state_store", "backend"))
    if backend:
        custom = None if backend == METASTORE_BACKEND else _custom_backend_mode(backend)
        modes.append(custom or BackendMode("metastore", str(BACKEND_MODES["metastore"]), details={"backend": backend}))
    worker_backend = by_name.get(("workers", "state_store_backend"))
    if worker_backend:
        modes.append(_worker_backend_mode(worker_backend))
    return modes
