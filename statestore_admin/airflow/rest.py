"""Airflow's REST API (``/api/v2``) as the dashboard's way to Airflow where there is no database connection
(managed Airflow: MWAA, Cloud Composer, Astronomer). ``AIRFLOW_API_URL`` turns it on (``api_mode``).

Every request is bounded:
- a connect and a read deadline (``AIRFLOW_API_TIMEOUT``); a read that times out is not sent again, so a hung
  server costs one deadline per request, as a hung database does;
- at most ``AIRFLOW_API_CONCURRENCY`` requests in flight per process: the rest wait for a turn, at most one
  deadline, then fail (a slow Airflow must not take every worker thread with it);
- a refused or reset connection, 429 and 502/503/504 are sent again, ``AIRFLOW_API_RETRIES`` times at most,
  after 0.5 s, 1 s, 2 s… (a ``Retry-After`` of up to 10 s is honoured). Airflow's state routes are idempotent
  (PUT, PATCH and DELETE of a key give the same state when repeated), so a retry cannot do a change twice.

The token is ``AIRFLOW_API_TOKEN``, or the output of ``AIRFLOW_API_TOKEN_COMMAND`` for providers whose tokens
expire: the command prints the token, or JSON with ``access_token`` (and optionally ``expires_in``, in
seconds). It is run again when the token expires (a JWT's ``exp``, else ``expires_in``, else
``AIRFLOW_API_TOKEN_TTL``) and once when Airflow answers 401.

Every failure is an ``AirflowApiError``: ``status`` is Airflow's answer (None when none came) and ``detail`` a
sentence a person can read, never the token. Imports nothing of ours: the domain maps these to its errors.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import shlex
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import requests

log = logging.getLogger(__name__)

RETRIED_STATUSES = frozenset({429, 502, 503, 504})
MAX_RETRY_AFTER = 10.0
BACKOFF = 0.5
TOKEN_MARGIN = 60.0  # a token is renewed this long before it expires
MAX_DETAIL = 300


class AirflowApiError(Exception):
    """Airflow's API failed a request. ``status``: its HTTP status, None when it did not answer;
    ``detail``: Airflow's own ``detail`` or what went wrong, one line."""

    def __init__(self, detail: str, status: int | None = None):
        super().__init__(detail)
        self.status, self.detail = status, detail

    @property
    def unavailable(self) -> bool:
        """Airflow did not answer, or answered that it cannot now (5xx, 429), or refused our token (401):
        nothing the user asked for is wrong."""
        return self.status is None or self.status >= 500 or self.status in (401, 429)


@dataclass(frozen=True)
class ApiSettings:
    url: str
    token: str = ""
    token_command: str = ""
    timeout: float = 10.0
    retries: int = 3
    concurrency: int = 8
    token_ttl: float = 300.0


def api_mode() -> bool:
    from django.conf import settings

    return getattr(settings, "AIRFLOW_API_MODE", False)


def settings_from_django() -> ApiSettings:
    from django.conf import settings

    return ApiSettings(
        url=settings.AIRFLOW_API_URL.rstrip("/"),
        token=settings.AIRFLOW_API_TOKEN,
        token_command=settings.AIRFLOW_API_TOKEN_COMMAND,
        timeout=settings.AIRFLOW_API_TIMEOUT,
        retries=settings.AIRFLOW_API_RETRIES,
        concurrency=settings.AIRFLOW_API_CONCURRENCY,
        token_ttl=settings.AIRFLOW_API_TOKEN_TTL,
    )


def _clean(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


def jwt_expiry(token: str) -> float | None:
    """A JWT's ``exp`` (epoch seconds), read without verifying (only to know when to ask for a new one)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        return float(payload["exp"])
    except (ValueError, KeyError, TypeError):
        return None


class Token:
    """The bearer token: fixed, or the output of a command, kept until shortly before it expires."""

    def __init__(self, settings: ApiSettings):
        self.settings = settings
        self._lock = threading.Lock()
        self._value = settings.token
        self._expires = float("inf")

    def get(self) -> str:
        if not self.settings.token_command:
            return self._value
        with self._lock:
            if not self._value or time.time() >= self._expires - TOKEN_MARGIN:
                self._value, self._expires = self._run()
            return self._value

    def renew(self, stale: str) -> bool:
        """After a 401 with ``stale``: run the command again (once, whichever thread gets here first)."""
        if not self.settings.token_command:
            return False
        with self._lock:
            if self._value == stale:
                self._value, self._expires = self._run()
        return True

    def _run(self) -> tuple[str, float]:
        command = self.settings.token_command
        try:
            done = subprocess.run(
                shlex.split(command), capture_output=True, text=True, timeout=max(self.settings.timeout, 30.0)
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AirflowApiError(f"the token command could not run: {_clean(exc)}") from None
        if done.returncode != 0:
            raise AirflowApiError(
                f"the token command exited with {done.returncode}: {_clean(done.stderr) or 'no message'}"
            )
        out = done.stdout.strip()
        expires_in = None
        if out.startswith("{"):
            try:
                answer = json.loads(out)
                out, expires_in = str(answer["access_token"]).strip(), answer.get("expires_in")
            except (ValueError, KeyError, TypeError):
                raise AirflowApiError("the token command printed JSON without an access_token") from None
        if not out or any(c.isspace() for c in out):
            raise AirflowApiError("the token command printed no token (one line, or JSON with access_token)")
        now = time.time()
        expiry = jwt_expiry(out) or (now + float(expires_in) if expires_in else now + self.settings.token_ttl)
        return out, expiry


class AirflowApi:
    """One Airflow API server, shared by the threads of a process."""

    def __init__(self, settings: ApiSettings):
        self.settings = settings
        self.token = Token(settings)
        self._turns = threading.BoundedSemaphore(max(1, settings.concurrency))
        self._local = threading.local()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            session.headers["User-Agent"] = "statestore-admin"
        return session

    def request(self, method: str, path: str, *, params=None, json_body=None, expect=(200,)):
        """Airflow's decoded JSON answer (None for an empty one) to ``method path``; ``path`` is under
        ``/api/v2`` and already quoted. Any answer not in ``expect`` is an AirflowApiError."""
        url = f"{self.settings.url}/api/v2{path}"
        with self.turn():
            response = self._send(method, url, params, json_body)
        if response.status_code not in expect:
            raise _error_of(response)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise AirflowApiError(
                f"Airflow's API answered {response.status_code} with a body that is not JSON", response.status_code
            ) from None

    @contextmanager
    def turn(self) -> Iterator[None]:
        """One of the ``concurrency`` turns to talk to Airflow, waited for at most one deadline."""
        if not self._turns.acquire(timeout=self.settings.timeout):
            raise AirflowApiError(
                f"{self.settings.concurrency} requests to Airflow's API were already waiting for an answer"
            )
        try:
            yield
        finally:
            self._turns.release()

    def _send(self, method: str, url: str, params, json_body) -> requests.Response:
        renewed = False
        attempt = 0
        while True:
            token = self.token.get()
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            try:
                response = self._session().request(
                    method, url, params=params, json=json_body, headers=headers, timeout=self.settings.timeout
                )
            except requests.Timeout:
                raise AirflowApiError(f"Airflow's API did not answer within {self.settings.timeout:g}s") from None
            except requests.ConnectionError as exc:
                if attempt >= self.settings.retries:
                    raise AirflowApiError(f"cannot connect to Airflow's API: {_reason(exc)}") from None
                self._wait(attempt, None)
                attempt += 1
                continue
            if response.status_code == 401 and not renewed and self.token.renew(token):
                renewed = True
                continue
            if response.status_code in RETRIED_STATUSES and attempt < self.settings.retries:
                self._wait(attempt, response.headers.get("Retry-After"))
                attempt += 1
                continue
            return response

    def _wait(self, attempt: int, retry_after: str | None) -> None:
        delay = BACKOFF * 2**attempt * (1 + random.random() / 4)
        if retry_after:
            try:
                delay = min(max(float(retry_after), 0.0), MAX_RETRY_AFTER)
            except ValueError:
                pass
        log.info("Airflow's API: retrying in %.1fs (attempt %d)", delay, attempt + 2)
        time.sleep(delay)

    def describe(self) -> str:
        """The API's address without credentials, for messages."""
        parts = urlsplit(self.settings.url)
        return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"


def _reason(exc: requests.ConnectionError) -> str:
    text = str(exc).lower()
    if "refused" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text or "failed to resolve" in text:
        return "unknown host"
    if "reset" in text or "aborted" in text or "remote end closed" in text:
        return "connection lost"
    return "connection failed"


def _error_of(response: requests.Response) -> AirflowApiError:
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list):  # FastAPI's validation errors: their messages
        detail = "; ".join(str(item.get("msg", item)) if isinstance(item, dict) else str(item) for item in detail)
    if not detail:
        detail = {
            401: "Airflow did not accept the dashboard's token",
            403: "the token is not allowed to do this in Airflow",
            429: "Airflow's API asks to slow down (429)",
        }.get(status, f"Airflow's API answered {status}")
    return AirflowApiError(_clean(detail), status)


def segment(value) -> str:
    """One path segment, quoted as Airflow's routes expect (a key may hold ``/``, ``?`` or ``#``)."""
    return quote(str(value), safe="")


_client: AirflowApi | None = None
_client_lock = threading.Lock()


def client() -> AirflowApi:
    """The process's client for the configured API (made on first use)."""
    global _client
    settings = settings_from_django()
    with _client_lock:
        if _client is None or _client.settings != settings:
            _client = AirflowApi(settings)
        return _client


# An asset's id, name and URI (what access scopes match and the audit trail records), read once a minute at most per
# process instead of before every call on its keys; a deleted asset is still answered by Airflow's state routes (404).
ASSET_SECONDS = 60.0
_assets: dict[tuple[str, int], tuple[float, dict]] = {}


def asset(api: AirflowApi, asset_id: int) -> dict | None:
    """``{"id", "name", "uri", "group"}`` of an asset as Airflow's API gives it, None when Airflow answers 404."""
    key = (api.settings.url, int(asset_id))
    known = _assets.get(key)
    if known is not None and time.monotonic() - known[0] < ASSET_SECONDS:
        return known[1]
    try:
        found = api.request("GET", f"/assets/{int(asset_id)}")
    except AirflowApiError as exc:
        if exc.status == 404:
            return None
        raise
    found = {key: found.get(key) or "" for key in ("name", "uri", "group")} | {"id": found["id"]}
    _assets[key] = (time.monotonic(), found)
    return found


def series_of(version: str) -> str:
    """ "3.4" of "3.4.0b2": the Airflow series a version belongs to."""
    return ".".join(version.split(".")[:2])


def probe(api: AirflowApi) -> dict:
    """Whether the API answers, which Airflow it is, and whether it accepts the token: ``{"version"}`` when it
    does, ``{"error", "status"}`` otherwise (``status`` None: no answer). The version route needs no token, so
    a DAG list of one DAG (which any role that may read DAGs may ask for) checks the token."""
    try:
        version = api.request("GET", "/version")["version"]
        api.request("GET", "/dags", params={"limit": 1})
    except AirflowApiError as exc:
        return {"error": exc.detail, "status": exc.status}
    except (KeyError, TypeError):
        return {"error": "the answer of /api/v2/version has no version", "status": None}
    return {"version": version}


_versions: dict[str, tuple[float, str]] = {}
VERSION_SECONDS = 300.0


def server_series(api: AirflowApi) -> str:
    """The API server's Airflow series ("3.3" or "3.4"), asked at most every five minutes per process: an
    upgrade of the managed environment is seen within that time."""
    url = api.settings.url
    known = _versions.get(url)
    if known is None or time.monotonic() - known[0] > VERSION_SECONDS:
        version = api.request("GET", "/version")["version"]
        known = _versions[url] = (time.monotonic(), series_of(str(version)))
    return known[1]
