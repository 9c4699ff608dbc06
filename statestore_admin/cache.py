"""The cache every worker and replica shares (README, "Production"; docs/operations.md, "Several servers").

Django's own backends, with three changes:

- **Values are signed JSON, never pickles.** Django's backends pickle what they store, and unpickling runs
  whatever the stored bytes say: anyone able to write to a shared Redis (or to the cache's table) would run code
  as the dashboard. Here every value is JSON text signed with a key derived from ``SECRET_KEY``
  (``SignedJSON``); a value that is not JSON signed by this deployment (garbage, a planted pickle, a value
  written under another ``SECRET_KEY``) is read as missing, logged once at WARNING and deleted. What is signed
  is the value together with its key (``_Resilient``): whoever writes to the store could otherwise copy a value
  the dashboard signed from one key to another (a list where a ticket's number is read, one scope's kept
  sums under another scope's key), and such a copy is refused like any other. So what the
  dashboard caches must be JSON: numbers, strings, lists, dicts with string keys (a tuple comes back as a
  list); anything else fails at ``set``, in the tests.
- **A cache that fails answers as an empty one.** What the dashboard keeps in the cache (the token-failure
  tickets of ``throttling.py``, snapshot sums, capped counts, the list of DAGs with state) can always be
  recomputed or done without, so an unreachable or slow cache must never turn a request into a 500: a read
  answers its default, a write does nothing and answers False. The first failure is logged (one line, no
  traceback), and for ``RETRY_SECONDS`` afterwards the calls of this process do not even try, so a Redis
  that stopped answering costs one socket timeout per process every few seconds, not one per call.
- **``add`` is atomic on the database cache too.** Django's ``DatabaseCache.add`` overwrites an expired row
  with an UPDATE that two processes can both make, and on SQLite answers False when another process holds
  the write lock; here the expired row is deleted first, and the INSERT that follows succeeds in exactly one
  process (the primary key). The token throttle relies on ``add``.
"""

import json
import logging
import re
import time
from datetime import UTC, datetime

from django.core import signing
from django.core.cache.backends import db, redis
from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
from django.db import DatabaseError, IntegrityError, connections, models, router, transaction
from django.utils import timezone

log = logging.getLogger(__name__)

RETRY_SECONDS = 2.0  # how long a process leaves a failed cache alone before it tries again

# Location -> monotonic time until which calls skip the cache. Shared by the threads of a process (Django
# gives each thread its own backend instance); a float assignment needs no lock.
_down_until: dict[str, float] = {}

UNDECODABLE = object()  # what ``SignedJSON.loads`` answers for bytes it refuses: read as a miss


class SignedJSON:
    """The format of every cached value: compact JSON text, then ``:`` and its HMAC-SHA256 signature (Django's
    ``Signer``, keyed by ``SECRET_KEY`` or one of ``SECRET_KEY_FALLBACKS``, salted for the cache). Also the
    serializer of the Redis backend (Django's ``OPTIONS["serializer"]``)."""

    salt = "statestore_admin.cache"

    def dumps(self, value) -> str:
        return signing.Signer(salt=self.salt).sign(json.dumps(value, separators=(",", ":"), allow_nan=False))

    def loads(self, data):
        """The value, or ``UNDECODABLE``: the signature is checked before anything is parsed."""
        try:
            text = data.decode() if isinstance(data, bytes) else str(data)
            return json.loads(signing.Signer(salt=self.salt).unsign(text))
        except (signing.BadSignature, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            return UNDECODABLE


class _Resilient:
    """Mixin for a Django cache backend: ``failures`` raised by a call make it answer as an empty cache, and
    a value ``SignedJSON`` refuses is a miss. Each value is stored as ``[its full key, value]`` (``_sealed``),
    so the signature covers the key: a signed value copied to another key by whoever writes to the store is
    refused there (``_unsealed``)."""

    failures: tuple[type[BaseException], ...] = (OSError,)

    def _location(self) -> str:
        return getattr(self, "_table", None) or re.sub(r"//[^@/]*@", "//", str(self._servers[0]))  # no password

    def _guard(self, call, args, kwargs, fallback):
        location = self._location()
        if _down_until.get(location, 0.0) > time.monotonic():
            return fallback
        try:
            result = call(*args, **kwargs)
        except self.failures as exc:
            if location not in _down_until:
                log.warning(
                    "cache %s is unavailable (%s: %s): answering as an empty cache", location, type(exc).__name__, exc
                )
            _down_until[location] = time.monotonic() + RETRY_SECONDS
            return fallback
        if _down_until.pop(location, None) is not None:
            log.warning("cache %s answers again", location)
        return result

    def probe(self) -> None:
        """Write and read a value, raising whatever the cache raises (``/readyz``), whether or not calls skip it."""
        super().set("statestore:readyz", 1, 10)
        super().get_many(["statestore:readyz"])

    def _sealed(self, key, value, version=None) -> list:
        return [self.make_and_validate_key(key, version=version), value]

    def _unsealed(self, key, found, version=None):
        """The value sealed under ``key``, or ``UNDECODABLE`` for anything else (a value sealed for another key,
        or no envelope at all)."""
        if isinstance(found, list) and len(found) == 2 and found[0] == self.make_key(key, version=version):
            return found[1]
        return UNDECODABLE

    def get(self, key, default=None, version=None):
        return self.get_many([key], version=version).get(key, default)

    def get_many(self, keys, version=None):
        found = self._guard(super().get_many, (keys,), {"version": version}, {})
        found = {key: self._unsealed(key, value, version) for key, value in found.items()}
        refused = [key for key, value in found.items() if value is UNDECODABLE]
        if refused:
            # Not written by this deployment (or under a SECRET_KEY it no longer has): dropped, so that the
            # next write takes the key and this line is written once per such value. The keys are ours.
            log.warning(
                "cache %s: %d value(s) not signed JSON of this dashboard, read as missing and deleted: %s",
                self._location(),
                len(refused),
                ", ".join(sorted(refused)),
            )
            self.delete_many(refused, version=version)
        return {key: value for key, value in found.items() if value is not UNDECODABLE}

    def has_key(self, *args, **kwargs):
        return self._guard(super().has_key, args, kwargs, False)

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._guard(super().set, (key, self._sealed(key, value, version), timeout, version), {}, False)

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        sealed = {key: self._sealed(key, value, version) for key, value in data.items()}
        return self._guard(super().set_many, (sealed, timeout, version), {}, list(data))

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._guard(super().add, (key, self._sealed(key, value, version), timeout, version), {}, False)

    def touch(self, *args, **kwargs):
        return self._guard(super().touch, args, kwargs, False)

    def delete(self, *args, **kwargs):
        return self._guard(super().delete, args, kwargs, False)

    def delete_many(self, *args, **kwargs):
        return self._guard(super().delete_many, args, kwargs, None)

    def clear(self, *args, **kwargs):
        return self._guard(super().clear, args, kwargs, None)


class _SignedJSONDatabaseCache(db.DatabaseCache):
    """Django's database cache, its rows holding ``SignedJSON`` text instead of base64 pickles. Django's own
    methods pickle inline, so the two that touch values are written here: the read, and the write (one
    statement each for ``set``, as ``add`` below)."""

    format = SignedJSON()

    def get_many(self, keys, version=None):
        if not keys:
            return {}
        key_map = {self.make_and_validate_key(key, version=version): key for key in keys}
        connection = connections[router.db_for_read(self.cache_model_class)]
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {quote('cache_key')}, {quote('value')}, {quote('expires')} FROM {quote(self._table)} "
                f"WHERE {quote('cache_key')} IN ({', '.join(['%s'] * len(key_map))})",
                list(key_map),
            )
            rows = cursor.fetchall()
        expression = models.Expression(output_field=models.DateTimeField())
        converters = connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)
        now, found, expired = timezone.now(), {}, []
        for name, value, expires in rows:
            for converter in converters:
                expires = converter(expires, expression, connection)
            if expires < now:
                expired.append(name)
            else:
                found[key_map[name]] = self.format.loads(connection.ops.process_clob(value))
        self._base_delete_many(expired)
        return found

    def _base_set(self, mode, key, value, timeout=DEFAULT_TIMEOUT):
        if mode == "touch":  # Django's touch writes the expiry only
            return super()._base_set(mode, key, None, timeout)
        alias = router.db_for_write(self.cache_model_class)
        with connections[alias].cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*) FROM {connections[alias].ops.quote_name(self._table)}")
            entries = cursor.fetchone()[0]
            if entries > self._max_entries:  # Django culls a third of the entries past MAX_ENTRIES
                self._cull(alias, cursor, timezone.now().replace(microsecond=0), entries)
        try:
            return self._write(key, value, timeout, replace=(mode == "set"))
        except DatabaseError:  # as Django's: a write that fails (a lock, say) is one value not kept
            return False

    def _write(self, name, value, timeout, *, replace: bool) -> bool:
        """Store ``value`` under the made key ``name``: in place of any row (``replace``), or only where the
        row is missing or expired; False when another process holds the key."""
        alias = router.db_for_write(self.cache_model_class)
        connection = connections[alias]
        quote = connection.ops.quote_name
        table, key_column, expires_column = quote(self._table), quote("cache_key"), quote("expires")
        seconds = self.get_backend_timeout(timeout)
        expires = datetime.max if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)
        encoded = self.format.dumps(value)
        now = connection.ops.adapt_datetimefield_value(timezone.now().replace(microsecond=0))
        which = "" if replace else f" AND {expires_column} < %s"
        # Writes only, no read first: SQLite then waits for the write lock (a transaction that read first is
        # refused it at once, which Django's add reports as "already there", and a failure would go uncounted).
        try:
            with transaction.atomic(using=alias), connection.cursor() as cursor:
                cursor.execute(
                    f"DELETE FROM {table} WHERE {key_column} = %s{which}", [name] if replace else [name, now]
                )
                cursor.execute(
                    f"INSERT INTO {table} ({key_column}, {quote('value')}, {expires_column}) VALUES (%s, %s, %s)",
                    [name, encoded, connection.ops.adapt_datetimefield_value(expires.replace(microsecond=0))],
                )
        except IntegrityError:  # another process holds the key (or wrote it at the same moment)
            return False
        return True


class DatabaseCache(_Resilient, _SignedJSONDatabaseCache):
    """Django's database cache in the dashboard's own database (its table: ``state``'s ``CacheEntry``)."""

    failures = (DatabaseError, OSError)

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        # Django's is a loop over self.set, which seals each value already (no envelope in an envelope).
        return [key for key, value in data.items() if self.set(key, value, timeout, version) is False]

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        name = self.make_and_validate_key(key, version=version)
        return self._guard(self._write, (name, self._sealed(key, value, version), timeout), {"replace": False}, False)


def _redis_failures() -> tuple[type[BaseException], ...]:
    try:
        from redis.exceptions import RedisError
    except ImportError:  # statestore.E011 says so; nothing can be caught that cannot be raised
        return (OSError,)
    return (RedisError, OSError)


class RedisCache(_Resilient, redis.RedisCache):
    """Django's Redis cache (``CACHE_URL=redis://…``), for several replicas, storing ``SignedJSON`` whatever
    the settings' OPTIONS say."""

    failures = _redis_failures()

    def __init__(self, server, params):
        super().__init__(server, params)
        self._options = {**self._options, "serializer": SignedJSON}

    # Redis's INCR counts bare integers, and every value here is signed text: Django's generic read and write
    # (not atomic; nothing in the dashboard counts with incr).
    incr = BaseCache.incr
