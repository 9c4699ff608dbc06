"""Prometheus metrics at ``GET /metrics`` (README, "Metrics"): the latest statistics snapshot and the latest
GC run, in the text exposition format.

Off by default (404). It answers once ``METRICS_TOKEN`` (scrapers send ``Authorization: Bearer <token>``) or
``METRICS_ALLOWED_IPS`` (addresses or CIDR networks, the client address resolved as for throttling, honouring
``TRUSTED_PROXY_COUNT``) is set; with both, either lets a request in. A wrong or missing token is 401, an
address outside the allowlist without a token setting 403; wrong tokens count towards the failed-token
throttle (429 once over ``TOKEN_FAILURE_LIMIT``).

Every scrape builds its own registry with one collector, which reads the snapshot and the GC run from the
dashboard's database (``stats.insights``): no global metric state, nothing kept between scrapes, and no
query of Airflow's state tables.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from statestore_admin.access import permissions
from statestore_admin.access.scopes import EVERYTHING
from statestore_admin.core.status import EXPIRING, STATUSES
from statestore_admin.records.models import GcRun
from statestore_admin.stats import insights
from statestore_admin.throttling import TokenFailureThrottle, client_address

log = logging.getLogger(__name__)
PREFIX = "statestore_"


def token() -> str:
    return settings.METRICS_TOKEN


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """``METRICS_ALLOWED_IPS`` as networks (a single address is a /32 or /128); invalid entries are logged
    and left out, never widened."""
    value = settings.METRICS_ALLOWED_IPS
    entries = value.split(",") if isinstance(value, str) else list(value)
    networks = []
    for entry in (e.strip() for e in entries):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            log.error("METRICS_ALLOWED_IPS: %r is not an address or a CIDR network; ignored", entry)
    return networks


def _address_allowed(request, networks) -> bool:
    try:
        address = ipaddress.ip_address(client_address(request))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


def _bearer(request) -> str | None:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, credentials = header.partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None


class StateStoreCollector(Collector):
    """The latest snapshot's figures and the latest finished GC run, as gauges."""

    def __init__(self, now=None):
        self.now = now or timezone.now()

    def collect(self):
        yield from self._snapshot()
        yield from self._gc()

    def _gauge(self, name, documentation, value=None, labels=None):
        family = GaugeMetricFamily(PREFIX + name, documentation, value=value, labels=labels)
        return family

    def _snapshot(self):
        figures = insights.latest(scope=EVERYTHING, stores=(permissions.TASK, permissions.ASSET))
        yield self._gauge(
            "snapshot_present",
            "1 when a statistics snapshot exists (run manage.py state_store_stats)",
            int(bool(figures)),
        )
        if figures is None:
            return
        s = figures.snapshot
        keys = self._gauge("keys", "Keys in the state store, as of the latest snapshot", labels=["store"])
        keys.add_metric([permissions.TASK], figures.task_keys)
        keys.add_metric([permissions.ASSET], figures.asset_keys)
        yield keys
        size = self._gauge("bytes", "Bytes of values in the state store, as of the latest snapshot", labels=["store"])
        size.add_metric([permissions.TASK], figures.task_bytes)
        size.add_metric([permissions.ASSET], figures.asset_bytes)
        yield size
        yield self._gauge(
            "expired_keys", "Task keys expired and awaiting GC, as of the latest snapshot", figures.expired
        )
        yield self._gauge("expiring_keys", f"Task keys {STATUSES[EXPIRING]} of the latest snapshot", figures.expiring)
        yield self._gauge(
            "never_expiring_keys", "Task keys that never expire, as of the latest snapshot", figures.never
        )
        yield self._gauge("dags", "DAGs with task state, as of the latest snapshot", figures.dags)
        yield self._gauge("assets", "Assets with state, as of the latest snapshot", figures.assets)
        yield self._gauge(
            "snapshot_timestamp_seconds", "When the latest snapshot was taken (Unix time)", s.taken_at.timestamp()
        )
        yield self._gauge(
            "snapshot_age_seconds", "Seconds since the latest snapshot was taken", figures.age_seconds(self.now)
        )
        if s.duration_seconds is not None:
            yield self._gauge(
                "snapshot_duration_seconds", "How long the latest snapshot's pass took", s.duration_seconds
            )

    def _gc(self):
        run = insights.last_gc_run()
        yield self._gauge("gc_runs_present", "1 when a finished GC run (state_store_clean) is recorded", int(bool(run)))
        if run is None:
            return
        outcome = self._gauge(
            "gc_last_outcome", "The latest finished GC run's outcome: 1 for it, 0 for the others", labels=["outcome"]
        )
        for choice in GcRun.Outcome.values:
            if choice != GcRun.Outcome.RUNNING:
                outcome.add_metric([choice], int(run.outcome == choice))
        yield outcome
        ended = run.finished_at or run.started_at
        yield self._gauge(
            "gc_last_timestamp_seconds", "When the latest finished GC run ended (Unix time)", ended.timestamp()
        )
        yield self._gauge(
            "gc_last_age_seconds",
            "Seconds since the latest finished GC run ended",
            max(0.0, (self.now - ended).total_seconds()),
        )
        if run.duration_seconds is not None:
            yield self._gauge(
                "gc_last_duration_seconds", "How long the latest finished GC run took", run.duration_seconds
            )
        yield self._gauge("gc_last_rows_deleted", "Rows the latest finished GC run deleted", run.rows_deleted)


def exposition() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateStoreCollector())
    return generate_latest(registry)


def _refused(status: int, message: str, **headers) -> HttpResponse:
    response = HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")
    for name, value in headers.items():
        response[name] = value
    return response


@login_not_required
@never_cache
@require_safe
def metrics(request):
    secret, networks = token(), allowed_networks()
    if not secret and not networks:
        raise Http404("Metrics are off: set METRICS_TOKEN or METRICS_ALLOWED_IPS.")
    if not (networks and _address_allowed(request, networks)):
        if not secret:
            return _refused(403, "This address may not read the metrics.")
        throttle = TokenFailureThrottle()
        wait = throttle.over_limit(request)
        if wait is not None:
            return _refused(429, "Too many failed authentication attempts.", **{"Retry-After": str(int(wait) + 1)})
        given = _bearer(request)
        if given is None or not hmac.compare_digest(given.encode(), secret.encode()):
            if given is not None:
                throttle.record(request)
            return _refused(401, "A valid bearer token is required.", **{"WWW-Authenticate": 'Bearer realm="metrics"'})
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
