"""``state_store_orphans``'s text: the orphans report as the command prints it. The domain
(``objects.orphans``) returns the report, whose ``as_dict`` is ``--json`` and the API's answer."""

from __future__ import annotations

from statestore_admin.access import permissions
from statestore_admin.core import formatting
from statestore_admin.objects import orphans
from statestore_admin.objects import store as objects


def report_lines(result: orphans.OrphanReport) -> list[str]:
    """The report as the command prints it."""
    out = []
    store = result.storage
    if store is None:
        out.append(
            f"Airflow configuration error: {result.config_error}"
            if result.config_error
            else "No [common.io] state_store_objectstorage_path is configured: no object is listed."
        )
    else:
        out.append(f"Storage {store.base} (compression {store.compression or 'none'}, threshold {store.threshold:,}).")
        out.append(f"Objects: {result.objects:,} ({formatting.size(result.object_bytes)}).")
        line = f"Orphans: {result.orphans.count:,} ({formatting.size(result.orphans.bytes)})"
        if result.older_than is not None:
            line += f", {result.young:,} modified less than {formatting.age(result.older_than.total_seconds())} ago"
        out.append(line + ".")
        out += [f"  {o['ref']}  {formatting.size(o['size'])}  {o['modified'] or '?'}" for o in result.orphans.sample]
    out.append(f"Rows holding references: {result.rows_with_refs:,} ({result.inline_refs:,} inline, no object).")
    if store is not None:
        unchecked = f", {result.unchecked:,} not checked (storage errors)" if result.unchecked else ""
        out.append(f"Dangling references (object missing): {result.dangling.count:,}{unchecked}.")
        out += [f"  {d['ref']}  ({_where(d)})" for d in result.dangling.sample]
    out.append(f"References outside the base path{'' if store else ' (no base configured)'}: {result.outside.count:,}.")
    out += [f"  {d['ref']}  ({_where(d)})" for d in result.outside.sample]
    out.append(f"Orphan risks (references outside the deterministic layout): {result.risks.count:,}.")
    out += [f"  {d['ref']}  ({_where(d)}; expected {' or '.join(d['expected'])})" for d in result.risks.sample]
    if result.risks.count:
        out.append("  " + objects.RISK_REASON.split(". ", 1)[1])
    deletion = result.deletion
    if deletion is not None:
        out.append(
            f"Deleted {deletion.deleted:,} orphan(s) modified more than "
            f"{formatting.age(deletion.older_than.total_seconds())} ago; "
            f"{deletion.young:,} younger kept, {deletion.kept:,} referenced again before deleting, "
            f"{deletion.missing:,} gone already, {deletion.failed_count:,} failed"
            + (f" (audit event #{deletion.event_id})." if deletion.event_id else ".")
        )
        out += [f"  failed: {f['ref']}: {f['error']}" for f in deletion.failures]
    for error in result.errors:
        out.append(f"Error: {error}")
    if result.error_count > len(result.errors):
        out.append(f"… and {result.error_count - len(result.errors):,} more errors.")
    out.append(f"Took {result.seconds:.2f} s.")
    return out


def _where(item: dict) -> str:
    scope = item["scope"]
    if item["store"] == permissions.TASK:
        where = f"{scope['dag_id']} / {scope['run_id']} / {scope['task_id']} [{scope['map_index']}]"
    else:
        where = f"asset {scope['asset_id']} {scope['asset_name']}"
    return f"{where}: {item['key']}"
