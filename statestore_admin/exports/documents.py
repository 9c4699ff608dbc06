"""Every list as a download, and keys as a JSON document: what a confirmation offers to download before a
delete, what every list of keys exports, and what a restore accepts as an upload (``restore.restore_document``).

    {"format": "statestore-admin/keys", "version": 1, "exported_at": "...",
     "keys": [{"store": "task", "dag_id", "run_id", "task_id", "map_index", "region_id", "key", "value",
               "expires_at", "updated_at"},
              {"store": "asset", "asset_id", "asset_name", "asset_uri", "key", "value", "updated_at"}]}

A task key's ``region_id`` is its Airflow 3.4 dynamic region (a UUID), null outside any region: every key
on Airflow 3.3, where files have no ``region_id`` at all. A restore reads a missing or null one as outside
any region, where Airflow's migration to 3.4 keeps the keys of 3.3 (``map_index`` is then the
``region_index``), so a file exported before the upgrade restores onto the same keys after it.

``value`` is the decoded JSON value. When re-encoding it would not give back the stored text exactly
(text not written by ``json.dumps``), ``value_json`` carries the exact text too, and a restore uses it.

The lists of keys (a run's, a task instance's, an asset's, search results) download as that document or as
CSV; the audit trail downloads as a document of events (``statestore-admin/audit``, not a restore input: an
event is restored from its own page) or as CSV. Every download is written as a stream: rows are read in
keyset chunks of ``STREAM_CHUNK`` (each chunk one short query that an index serves, no long-lived cursor or
transaction), so memory stays bounded whatever the number of rows. CSV is UTF-8 (with a byte order mark, so
that spreadsheets read it as UTF-8), one header row, and every text cell that a spreadsheet would take for a
formula is prefixed with ``'``: one starting with ``=``, ``+``, ``-``, ``@``, ``|`` or ``%``, with a tab or a
carriage return, or with any white space or control characters before one of those marks (spreadsheets skip
them: ``"\n=1"`` and ``" =1"`` are formulas too).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from django.db.models import F, QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from statestore_admin.access import permissions
from statestore_admin.airflow.models import AssetStateStore, DagRun, TaskStateStore
from statestore_admin.airflow.versions import SENTINEL_REGION_ID
from statestore_admin.audit import events as audit
from statestore_admin.audit.trail import name_assets
from statestore_admin.core import formatting
from statestore_admin.core.errors import Invalid
from statestore_admin.core.pagination import keyset_chunks
from statestore_admin.core.values import (
    MAX_DEPTH,
    DuplicateKey,
    clean_key,
    decode_json_text,
    encode_value,
    json_depth,
    loads,
    parse_datetime_aware,
    refuse_surrogate,
    stored_value,
)
from statestore_admin.records.models import AuditEvent
from statestore_admin.state.addresses import TaskAddress
from statestore_admin.state.selectors import shown_keys

FORMAT, VERSION = "statestore-admin/keys", 1
AUDIT_FORMAT = "statestore-admin/audit"
FORMATS = ("json", "csv")
CONTENT_TYPES = {"json": "application/json", "csv": "text/csv; charset=utf-8"}
UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")
ID_LENGTH = 250  # dag_id, run_id and task_id columns
MAX_INT = 2**31 - 1  # integer columns (map_index, asset id)
DOCUMENT_DEPTH = MAX_DEPTH + 3  # a value inside {"keys": [{"value": …}]}; the value's own depth is checked again
STREAM_CHUNK = 1000  # rows a query; values are at most max_value_storage_bytes each
FORMULA_STARTS = ("=", "+", "-", "@", "|", "%", "\t", "\r")
# Before a formula's mark, a spreadsheet skips white space and control characters.
FORMULA = re.compile(r"[\s\x00-\x1f\x7f-\x9f]*[=+\-@|%]")

# The orders a download reads rows in, each unique and served by an index of Airflow's: a run's keys by the
# unique (dag_run_id, task_id, map_index, key), any other set of task keys by id, asset keys by the primary key.
IN_RUN = ("task_id", "map_index", "key")
BY_ID = ("id",)
NEWEST_FIRST = ("-id",)
ASSET_ORDER = ("asset_id", "key")


_iso = formatting.iso


def _value_fields(text: str) -> dict:
    try:
        decoded = stored_value(text)
    except ValueError:  # not JSON, or nested deeper than MAX_DEPTH: the exact text
        return {"value": None, "value_json": text}
    fields = {"value": decoded}
    if json.dumps(decoded) != text:
        fields["value_json"] = text
    return fields


def _region_text(region_id: UUID) -> str | None:
    recorded = audit.recorded_region(region_id)
    return None if recorded is None else str(recorded)


def _entry(store: str, address: dict, row, times: tuple[str, ...]) -> dict:
    """A key's entry in a document: its store, its address, the key and value, then ``times`` as ISO text."""
    return {
        "store": store,
        **address,
        "key": row.key,
        **_value_fields(row.value),
        **{name: _iso(getattr(row, name)) for name in times},
    }


def task_entry(row) -> dict:
    address = {**TaskAddress.of(row).fields(), "region_id": _region_text(row.region_id)}
    return _entry(permissions.TASK, address, row, ("expires_at", "updated_at"))


def asset_entry(row) -> dict:
    """``row``: an asset key with its asset's ``asset_name`` and ``asset_uri`` (as ``asset_source`` reads it)."""
    address = {"asset_id": row.asset_id, "asset_name": row.asset_name, "asset_uri": row.asset_uri}
    return _entry(permissions.ASSET, address, row, ("updated_at",))


def event_entry(event: AuditEvent) -> dict:
    """The API's shape of an event (``audit.event_entry``): the JSON download's entries."""
    return audit.event_entry(event)


# Where a key is, or what an event changed: a task instance, or an asset.
_WHERE_COLUMNS = ("dag_id", "run_id", "task_id", "map_index", "region_id", "asset_id", "asset_name", "asset_uri")
KEY_COLUMNS = (
    "store",
    *_WHERE_COLUMNS,
    "key",
    "value",
    "expires_at",
    "updated_at",
)
EVENT_COLUMNS = (  # an event's entry but its details (free-form JSON)
    "id",
    "at",
    "finished_at",
    "outcome",
    "actor",
    "via",
    "action",
    "store",
    *_WHERE_COLUMNS,
    "key_count",
    "restored_from",
    "token_name",
    "signed_in",
    "os_user",
    "host",
    "error",
)


def _task_cells(row) -> list:
    iso = (_iso(row.expires_at) or "", _iso(row.updated_at))
    region = _region_text(row.region_id) or ""
    return [
        permissions.TASK,
        row.dag_id,
        row.run_id,
        row.task_id,
        row.map_index,
        region,
        "",
        "",
        "",
        row.key,
        row.value,
        *iso,
    ]


def _asset_cells(row) -> list:
    return [
        permissions.ASSET,
        "",
        "",
        "",
        "",
        "",
        row.asset_id,
        row.asset_name,
        row.asset_uri,
        row.key,
        row.value,
        "",
        _iso(row.updated_at),
    ]


def _event_cells(event: AuditEvent) -> list:
    entry = event_entry(event)
    # The CSV keeps its column of the token's name: a cell holds no object.
    entry["token_name"] = entry["token"]["name"] if entry["token"] else None
    return ["" if entry[name] is None else entry[name] for name in EVENT_COLUMNS]


def safe_cell(value):
    """A CSV cell a spreadsheet shows as text: text it would take for a formula gets a leading ``'``."""
    if isinstance(value, str) and (value.startswith(FORMULA_STARTS) or FORMULA.match(value)):
        return "'" + value
    return value


# What a download holds --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Source:
    """Rows of one kind, the order they are read in, and how each becomes a JSON entry and a CSV row."""

    rows: QuerySet | None
    ordering: tuple[str, ...]
    entry: Callable[[object], dict]
    cells: Callable[[object], list]
    fields: tuple[str, ...] | None = None  # read as named tuples of these; None: model instances
    prepare: Callable[[list], list] | None = None  # completes a chunk's rows before they are written
    pages: Callable[[], Iterator[list]] | None = None  # instead of ``rows``: the chunks themselves (``paged``)

    def chunks(self) -> Iterator[list]:
        if self.pages is not None:
            chunks = self.pages()
        else:
            chunks = keyset_chunks(self.rows, self.ordering, STREAM_CHUNK, fields=self.fields)
        return chunks if self.prepare is None else map(self.prepare, chunks)


TASK_FIELDS = (
    "id",
    "dag_id",
    "run_id",
    "task_id",
    "map_index",
    "region_id",
    "key",
    "value",
    "expires_at",
    "updated_at",
)
ASSET_FIELDS = ("asset_id", "key", "value", "updated_at", "asset_name", "asset_uri")


def task_source(rows: QuerySet, ordering: tuple[str, ...] = BY_ID) -> Source:
    return Source(rows, ordering, task_entry, _task_cells, TASK_FIELDS)


def asset_source(rows: QuerySet) -> Source:
    named = rows.annotate(asset_name=F("asset__name"), asset_uri=F("asset__uri"))
    return Source(named, ASSET_ORDER, asset_entry, _asset_cells, ASSET_FIELDS)


@dataclass(frozen=True)
class Export:
    """A download: ``name`` for its file name, keys (a restore document) or audit events."""

    name: str
    sources: tuple[Source, ...]
    format: str = FORMAT

    @property
    def columns(self) -> tuple[str, ...]:
        return KEY_COLUMNS if self.format == FORMAT else EVENT_COLUMNS

    def json(self) -> Iterator[str]:
        """The document as text pieces, one a chunk of rows."""
        head = {"format": self.format, "version": VERSION, "exported_at": _iso(timezone.now())}
        yield json.dumps(head)[:-1] + f', "{"keys" if self.format == FORMAT else "events"}": ['
        first = True
        for source in self.sources:
            for chunk in source.chunks():
                text = ",\n".join(json.dumps(source.entry(row)) for row in chunk)
                yield ("\n" if first else ",\n") + text
                first = False
        yield "\n]}\n"

    def csv(self) -> Iterator[str]:
        """UTF-8 text with a byte order mark and a header row, as pieces of one chunk of rows each."""
        line = _Line()
        writer = csv.writer(line)
        yield "\ufeff" + writer.writerow(self.columns)
        for source in self.sources:
            for chunk in source.chunks():
                yield "".join(writer.writerow([safe_cell(cell) for cell in source.cells(row)]) for row in chunk)

    def stream(self, format: str) -> Iterator[bytes]:
        pieces = self.csv() if format == "csv" else self.json()
        return (piece.encode() for piece in pieces)

    def filename(self, format: str) -> str:
        """``statestore-<name>-<UTC time>.<format>``, ids in the name reduced to characters safe in a header."""
        stamp = timezone.now().astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        return f"statestore-{UNSAFE_IN_NAME.sub('_', self.name)[:120]}-{stamp}.{format}"


class _Line:
    """A file for ``csv.writer`` that hands back what is written instead of keeping it."""

    def write(self, text: str) -> str:
        return text


def keys_export(name: str, task_rows: QuerySet | None = None, asset_rows: QuerySet | None = None, *, task_order=BY_ID):
    sources = []
    if task_rows is not None:
        sources.append(task_source(task_rows, task_order))
    if asset_rows is not None:
        sources.append(asset_source(asset_rows))
    return Export(name, tuple(sources))


def iter_document(task_rows: QuerySet | None = None, asset_rows: QuerySet | None = None) -> Iterator[str]:
    """The restore document of these rows as text pieces (what a delete's confirmation downloads)."""
    return keys_export("keys", task_rows, asset_rows).json()


# The lists ----------------------------------------------------------------------------------------------------
def run_keys(run: DagRun) -> Export:
    """A run's keys (``selectors.get_run`` has checked the scope), in the run page's order."""
    return keys_export(f"run-{run.pk}-keys", TaskStateStore.objects.filter(dag_run=run), task_order=IN_RUN)


def task_instance_keys(run: DagRun, task_id: str, map_index: int | None, region_id: UUID | None = None) -> Export:
    """A task instance's keys as its page shows them (``selectors.shown_keys``), or every map index's
    (``map_index`` None); on Airflow 3.4 the file is named by the region too."""
    rows = shown_keys(run, task_id, map_index, region_id)
    parts = [f"run-{run.pk}", task_id, *([] if region_id is None else [str(region_id)])]
    parts.append("all" if map_index is None else str(map_index))
    return keys_export("-".join([*parts, "keys"]), rows, task_order=IN_RUN)


def asset_keys(asset) -> Export:
    """An asset's keys (``selectors.get_asset`` has checked the scope)."""
    return keys_export(f"asset-{asset.pk}-keys", asset_rows=AssetStateStore.objects.filter(asset=asset))


def read_pages(read: Callable[[int, int], tuple[list, int]], size: int = 100) -> Callable[[], Iterator[list]]:
    """The chunks of a list read a page at a time by offset (``read(offset, limit)`` → rows, their number in
    all): a ``state.sources`` list, which over Airflow's REST API comes in pages of at most 100."""

    def pages() -> Iterator[list]:
        offset = 0
        while True:
            rows, total = read(offset, size)
            if rows:
                yield rows
            offset += len(rows)
            if not rows or offset >= total:
                return

    return pages


def paged_task_keys(name: str, *reads: Callable[[int, int], tuple[list, int]]) -> Export:
    """Task instances' keys as a source lists them (``Source.task_keys_page``): each instance's by key, one
    instance after the other."""

    def pages() -> Iterator[list]:
        for read in reads:
            yield from read_pages(read)()

    return Export(name, (Source(None, (), task_entry, _task_cells, pages=pages),))


def paged_asset_keys(name: str, asset, read: Callable[[int, int], tuple[list, int]]) -> Export:
    """An asset's keys as a source lists them (``Source.asset_keys_page``), named by ``asset``."""

    def named(rows: list) -> list:
        for row in rows:
            row.asset_name, row.asset_uri = asset.name, asset.uri
        return rows

    return Export(name, (Source(None, (), asset_entry, _asset_cells, prepare=named, pages=read_pages(read)),))


def search_results(task_rows: QuerySet | None, asset_rows: QuerySet | None) -> Export:
    """Every match of a search (``search.task_key_rows`` / ``asset_key_rows``), without its time budget:
    a download reads on until the last match; task keys newest first, as the results show them."""
    return keys_export("search", task_rows, asset_rows, task_order=NEWEST_FIRST)


def audit_events(events: QuerySet) -> Export:
    """The audit trail's events (``selectors.audit_event_rows``), newest first."""
    source = Source(events, NEWEST_FIRST, event_entry, _event_cells, prepare=name_assets)
    return Export("audit", (source,), AUDIT_FORMAT)


def read_document(data: bytes | str):
    """The JSON of a restore file, read as every face reads one (the Audit page's upload, the API's upload,
    ``state_store_restore``; the API's JSON body goes through the same ``values.loads``): UTF-8, nested no
    deeper than a value may be, and no object naming a key twice (JSON parsers would keep the last one
    silently: the file would restore something else than it shows). ``Invalid`` on ``file`` otherwise."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise Invalid({"file": _("The file is not UTF-8 text.")}) from None
    if json_depth(data, DOCUMENT_DEPTH) > DOCUMENT_DEPTH:
        message = _("The file's JSON nests more than %(limit)s levels deep in a value.")
        raise Invalid({"file": message % {"limit": MAX_DEPTH}})
    try:
        return loads(data)
    except DuplicateKey as exc:
        raise Invalid({"file": _("The file is not a valid export: %(error)s") % {"error": exc}}) from None
    except RecursionError:
        raise Invalid({"file": _("The file's JSON is nested too deeply.")}) from None
    except ValueError as exc:
        raise Invalid({"file": _("The file is not valid JSON: %(error)s") % {"error": exc}}) from None


def _integer(entry: dict, name: str, low: int, high: int, default=None) -> int:
    """An integer field of an entry: one that is not an integer, and one out of the column's range, each
    named as such."""
    given = entry.get(name, default)
    words = {"name": name, "low": low, "high": high}
    if not isinstance(given, int) or isinstance(given, bool):
        raise Invalid({name: _('"%(name)s" must be an integer from %(low)s to %(high)s.') % words})
    if not low <= given <= high:
        raise Invalid({name: _('"%(name)s" is out of range: it must be from %(low)s to %(high)s.') % words})
    return given


def _region(entry: dict) -> UUID:
    """A task entry's ``region_id``: a UUID, or missing or null outside any region (files from Airflow 3.3)."""
    given = entry.get("region_id")
    if given is None:
        return SENTINEL_REGION_ID
    try:
        if not isinstance(given, str):
            raise ValueError
        return UUID(given)
    except ValueError:
        raise Invalid({"region_id": _('"region_id" must be a UUID, or null outside any region.')}) from None


@dataclass
class Target:
    """One key a restore brings back to ``state`` (None: the key must not exist), in a task or an asset scope."""

    store: str
    key: str
    state: audit.KeyState | None
    expected: audit.KeyState | None = None  # what the key holds now if nobody wrote it since
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    map_index: int | None = None
    region_id: UUID = SENTINEL_REGION_ID  # Airflow's value: the sentinel outside any region
    asset_id: int | None = None
    ident: str = ""
    run_pk: int | None = None
    # Who wrote the key and when, to put back with its value (``exports.restore.written_fields``): the time
    # recorded (an event's key before it, or a file's ``updated_at``) and, for an asset key from an event, its
    # writer columns (``audit.provenance``). None: not known.
    updated_at: datetime | None = None
    writer: dict | None = None

    @property
    def in_region(self) -> bool:
        return self.region_id != SENTINEL_REGION_ID

    def describe(self) -> dict:
        if self.store == permissions.TASK:
            scope = {"dag_id": self.dag_id, "run_id": self.run_id, "task_id": self.task_id, "map_index": self.map_index}
            if self.in_region:
                scope["region_id"] = str(self.region_id)
        else:
            scope = {"asset_id": self.asset_id}
        return {"id": self.ident, "key": self.key, **scope}


def _updated_at(entry: dict) -> datetime | None:
    """The entry's ``updated_at`` (when its key was written, put back by the restore), or None without one."""
    raw = entry.get("updated_at")
    return parse_datetime_aware(raw, "updated_at") if raw is not None else None


def parse_document(document) -> list:
    """The restore targets of a document; ``Invalid`` naming the first bad entry, before anything changes."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        message = _('Not a statestore-admin export: expected {"format": "%(format)s", ...}.')
        raise Invalid({"file": message % {"format": FORMAT}})
    if document.get("version") != VERSION:
        message = _("Unsupported export version %(version)r; this version reads 1.")
        raise Invalid({"file": message % {"version": document.get("version")}})
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise Invalid({"file": _('"keys" must be a list.')})
    return [_target(index, entry) for index, entry in enumerate(entries)]


def _target(index: int, entry) -> Target:
    where = f"keys[{index}]"
    if not isinstance(entry, dict):
        raise Invalid({"file": _("%(where)s is not an object.") % {"where": where}})
    store = entry.get("store")
    if store not in (permissions.TASK, permissions.ASSET):
        raise Invalid({"file": _('%(where)s: "store" must be "task" or "asset".') % {"where": where}})
    try:
        key = clean_key(entry.get("key"))
        if "value_json" in entry:
            text = entry["value_json"]
            if not isinstance(text, str):
                raise Invalid({"value": _('"value_json" must be a string.')})
            encode_value(decode_json_text(text))  # the same limits as any write
        else:
            text = encode_value(entry.get("value"))
        if store == permissions.TASK:
            for name in ("dag_id", "run_id", "task_id"):
                given = entry.get(name)
                if not isinstance(given, str) or not given or len(given) > ID_LENGTH or "\x00" in given:
                    message = _('"%(name)s" must be a string of 1 to %(limit)s characters, without NUL.')
                    raise Invalid({name: message % {"name": name, "limit": ID_LENGTH}})
                refuse_surrogate(given, name, name)
            map_index = _integer(entry, "map_index", -1, MAX_INT, default=-1)
            region_id = _region(entry)
            raw_expiry = entry.get("expires_at")
            expires_at = parse_datetime_aware(raw_expiry, "expires_at") if raw_expiry is not None else None
            updated_at = _updated_at(entry)
            return Target(
                store=store,
                key=key,
                state=(text, expires_at),
                dag_id=entry["dag_id"],
                run_id=entry["run_id"],
                task_id=entry["task_id"],
                map_index=map_index,
                region_id=region_id,
                ident=str(index),
                updated_at=updated_at,
            )
        asset_id = _integer(entry, "asset_id", 1, MAX_INT)
        updated_at = _updated_at(entry)
        return Target(
            store=store, key=key, state=(text, None), asset_id=asset_id, ident=str(index), updated_at=updated_at
        )
    except (Invalid, ValueError) as exc:
        message = "; ".join(m for ms in exc.message_dict.values() for m in ms) if isinstance(exc, Invalid) else str(exc)
        raise Invalid({"file": _("%(where)s: %(message)s") % {"where": where, "message": message}}) from None
