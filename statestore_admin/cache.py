"""The cache every worker and replica shares (README, "Production"; docs/operations.md, "Several servers").

Django's own backends, with two changes:

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

import base64
import logging
import pickle
import re
import time
from datetime import UTC, datetime

from django.core.cache.backends import db, redis
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.db import DatabaseError, IntegrityError, connections, router, transaction
from django.utils import timezone

log = logging.getLogger(__name__)

RETRY_SECONDS = 2.0  # how long a process leaves a failed cache alone before it tries again

# Location -> monotonic time until which calls skip the cache. Shared by the threads of a process (Django
# gives each thread its own backend instance); a float assignment needs no lock.
_down_until: dict[str, float] = {}


class _Resilient:
    """Mixin for a Django cache backend: ``failures`` raised by a call make it answer as an empty cache."""

    failures: tuple[type[BaseException], ...] = (OSError,)

    def _guard(self, call, args, kwargs, fallback):
        location = getattr(self, "_table", None) or re.sub(r"//[^@/]*@", "//", str(self._servers[0]))  # no password
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
        super().get("statestore:readyz")

    def get(self, key, default=None, version=None):
        return self._guard(super().get, (key, default, version), {}, default)

    def get_many(self, *args, **kwargs):
        return self._guard(super().get_many, args, kwargs, {})

    def has_key(self, *args, **kwargs):
        return self._guard(super().has_key, args, kwargs, False)

    def set(self, *args, **kwargs):
        return self._guard(super().set, args, kwargs, False)

    def set_many(self, data, *args, **kwargs):
        return self._guard(super().set_many, (data, *args), kwargs, list(data))

    def add(self, *args, **kwargs):
        return self._guard(super().add, args, kwargs, False)

    def touch(self, *args, **kwargs):
        return self._guard(super().touch, args, kwargs, False)

    def delete(self, *args, **kwargs):
        return self._guard(super().delete, args, kwargs, False)

    def delete_many(self, *args, **kwargs):
        return self._guard(super().delete_many, args, kwargs, None)

    def clear(self, *args, **kwargs):
        return self._guard(super().clear, args, kwargs, None)


class DatabaseCache(_Resilient, db.DatabaseCache):
    """Django's database cache in the dashboard's own database (its table: ``state``'s ``CacheEntry``)."""

    failures = (DatabaseError, OSError)

    def add(self, *args, **kwargs):
        return self._guard(self._atomic_add, args, kwargs, False)

    def _atomic_add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        name = self.make_and_validate_key(key, version=version)
        alias = router.db_for_write(self.cache_model_class)
        connection = connections[alias]
        quote = connection.ops.quote_name
        table, key_column, expires_column = quote(self._table), quote("cache_key"), quote("expires")
        seconds = self.get_backend_timeout(timeout)
        expires = datetime.max if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)
        encoded = base64.b64encode(pickle.dumps(value, self.pickle_protocol)).decode("latin1")
        now = connection.ops.adapt_datetimefield_value(timezone.now().replace(microsecond=0))
        # Writes only, no read first: SQLite then waits for the write lock (a transaction that read first is
        # refused it at once, which Django's add reports as "already there", and a failure would go uncounted).
        try:
            with transaction.atomic(using=alias), connection.cursor() as cursor:
                cursor.execute(f"DELETE FROM {table} WHERE {key_column} = %s AND {expires_column} < %s", [name, now])
                cursor.execute(
                    f"INSERT INTO {table} ({key_column}, {quote('value')}, {expires_column}) VALUES (%s, %s, %s)",
                    [name, encoded, connection.ops.adapt_datetimefield_value(expires.replace(microsecond=0))],
                )
        except IntegrityError:  # another process holds the key
            return False
        return True


def _redis_failures() -> tuple[type[BaseException], ...]:
    try:
        from redis.exceptions import RedisError
    except ImportError:  # statestore.E011 says so; nothing can be caught that cannot be raised
        return (OSError,)
    return (RedisError, OSError)


class RedisCache(_Resilient, redis.RedisCache):
    """Django's Redis cache (``CACHE_URL=redis://…``), for several replicas."""

    failures = _redis_failures()
