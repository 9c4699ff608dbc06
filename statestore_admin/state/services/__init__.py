"""Writes to the state store: one function per operation, used by the pages, the API, Django admin and the
commands alike. Every function takes keyword arguments only, starting with the ``Actor``; checks the
actor's permission; validates its input (``values``); and raises the domain's exceptions (``errors``)
before changing anything. Every change is recorded in the audit trail (``audit.change``), in the order
that docs/audit.md describes. The submodules, by concern: ``outcomes`` (what an action returns, the write
modes), ``confirmations`` (``Listing``, ``list_keys``: what a dialog listed, acted on exactly as listed),
``rows`` (locking, insert-if-absent on the natural keys, chunked deletes, rows before their worker-side
objects), ``tasks`` and ``assets`` (the writes of each store), ``confirmed`` (the pages' confirmed actions on
many task keys: preview, then apply). Putting keys back from an export or an event is
``statestore_admin.exports.restore``.

Airflow's rules (docs/airflow.md): ``expires_at`` is computed by the writer at write time; writing a
value needs its task instance to exist (Airflow's API answers 404 otherwise, through every face here);
an asset write records its writer as the API. Removing state (delete, expire) by key id never needs the
task instance; addressing a task instance (clear, or a key by scope) does, as in Airflow.

Confirmed actions (delete, expire, clear after a dialog listed the keys) act on exactly the keys the
confirmation listed, in the version it listed (``Listing``): a key added since, or written since, is kept
and reported, never lost, whatever the clock of the process that wrote it says. A write that changes
nothing (the same value, and for a task key the same expiry) is not made: no row is touched, no event is
recorded, and the returned row says so (``written`` is False). Every write reads the key it replaces under
a lock, a key that does not exist yet included (``rows.locked_or_created``): parallel writers of one key
each record the value they replaced.
"""

from statestore_admin.core.values import Expiry
from statestore_admin.state.addresses import TaskAddress
from statestore_admin.state.services.assets import asset_selection, clear_asset, delete_asset_keys, set_asset_key
from statestore_admin.state.services.confirmations import LISTED_MAX, Listing, list_keys
from statestore_admin.state.services.confirmed import (
    AssetPreview,
    Preview,
    apply_asset_keys,
    apply_task_keys,
    nothing_to,
    preview_asset_keys,
    preview_task_keys,
    task_selection,
)
from statestore_admin.state.services.outcomes import CREATE, UPDATE, UPSERT, Outcome
from statestore_admin.state.services.rows import API_WRITER, API_WRITER_FIELDS, NATURAL_KEYS
from statestore_admin.state.services.tasks import (
    RunMatch,
    TaskKeyRef,
    TaskSelection,
    clear_task_instance,
    delete_task_keys,
    expire_task_keys,
    patch_task_key,
    set_task_expiry,
    set_task_key,
    set_task_keys_expiry,
)

__all__ = [
    "API_WRITER",
    "API_WRITER_FIELDS",
    "CREATE",
    "LISTED_MAX",
    "NATURAL_KEYS",
    "UPDATE",
    "UPSERT",
    "Expiry",
    "Listing",
    "Outcome",
    "AssetPreview",
    "Preview",
    "apply_asset_keys",
    "nothing_to",
    "preview_asset_keys",
    "TaskKeyRef",
    "TaskAddress",
    "RunMatch",
    "TaskSelection",
    "apply_task_keys",
    "asset_selection",
    "clear_asset",
    "clear_task_instance",
    "delete_asset_keys",
    "delete_task_keys",
    "expire_task_keys",
    "list_keys",
    "patch_task_key",
    "preview_task_keys",
    "set_asset_key",
    "set_task_expiry",
    "set_task_keys_expiry",
    "set_task_key",
    "task_selection",
]
