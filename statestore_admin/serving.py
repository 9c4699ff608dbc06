"""How `make serve` runs Django: gunicorn's asyncio (ASGI) worker in front of Django's WSGI application.

A thread of gunicorn's threaded worker (gthread) is taken by a request as soon as its first bytes arrive
and kept while the client sends the rest, however slowly: a few dozen clients that announce a body and
never send it leave no thread for anyone else. Here each worker's event loop parses requests and reads whole
bodies (many connections at once, no thread each); only a request that has fully arrived runs Django,
in a fixed pool of ``threads`` threads per worker. Django itself stays WSGI-shaped: persistent database
connections per thread, and streaming responses (the exports) sent a chunk at a time with backpressure,
never collected in memory (``ThreadedWSGI``).

A body is read on the loop into a spooled temporary file (memory up to ``SPOOL_MEMORY`` bytes, then
disk), within a deadline (``GUNICORN_CLIENT_TIMEOUT`` seconds, 408; the same deadline holds for the
headers of a new connection's first request) and a size limit (the largest body the application accepts,
413). Errors that gunicorn answers itself (a malformed request line or header, an over-long request line,
oversized headers) are JSON ``{"detail": ...}`` under ``/api/`` or when the request's path cannot be
read; HTML pages for everything else.
"""

import asyncio
import contextvars
import functools
import html
import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus

from a2wsgi.wsgi import build_environ
from gunicorn.asgi import protocol as gunicorn_protocol
from gunicorn.workers import gasgi

from statestore_admin.web import API_PREFIX

SPOOL_MEMORY = 1024 * 1024
# Room for a multipart envelope around the largest uploaded file (field names, boundaries, the other fields).
MULTIPART_ALLOWANCE = 1024 * 1024


def body_limit() -> int:
    """The largest request body any view accepts: a restore file (the dashboard's upload limit, which the
    API's restore shares) in its multipart envelope, or Django's own limit for the other bodies."""
    from django.conf import settings

    from statestore_admin.dashboard.actions.restore import MAX_UPLOAD_BYTES

    return max(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0, MAX_UPLOAD_BYTES + MULTIPART_ALLOWANCE)


def is_api_path(target: bytes | None) -> bool:
    """Whether an error for this request target is answered as JSON: ``/api/…``, or a target that could not
    be read (a browser never sends a request gunicorn cannot parse; an API client may)."""
    if not target:
        return True
    if b"://" in target:  # absolute form: http://host/path
        target = b"/" + target.split(b"://", 1)[1].partition(b"/")[2]
    return target.startswith(API_PREFIX.encode())


def error_body(status: int, message: str, as_json: bool) -> tuple[bytes, str]:
    if as_json:
        return json.dumps({"detail": message}).encode(), "application/json"
    phrase = HTTPStatus(status).phrase
    page = (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{status} {html.escape(phrase)}</title></head>"
        f"<body><h1>{html.escape(phrase)}</h1><p>{html.escape(message)}</p></body></html>\n"
    )
    return page.encode(), "text/html; charset=utf-8"


# On every answer given before Django (which sets them on its own through its middleware): never framed, whatever
# STATESTORE_FRAME_ANCESTORS allows the read pages (an error page is none of them), never sniffed as another type.
SECURITY_HEADERS = (
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
)

# What a client is told for each error gunicorn answers itself: its own message quotes the request.
PROTOCOL_MESSAGES = {
    400: "Bad Request: the request is malformed",
    408: "Request Timeout",
    414: "URI Too Long: the request line is longer than the server accepts",
    426: "Upgrade Required",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented: unsupported transfer coding",
}


class Protocol(gunicorn_protocol.ASGIProtocol):
    """gunicorn's HTTP/1 protocol, answering its own errors as JSON under /api/ (HTML elsewhere), with a
    deadline for a new connection's first request headers: gunicorn's asyncio worker has none, so a client
    could hold any number of connections open without ever sending a request. Later requests on a kept-alive
    connection have gunicorn's keep-alive timeout."""

    def __init__(self, worker):
        super().__init__(worker)
        self._headers_timer = None

    def connection_made(self, transport):
        super().connection_made(transport)
        timeout = getattr(self.worker, "client_timeout", None)
        if timeout and self._callback_parser is not None:
            self._headers_timer = self.worker.loop.call_later(timeout, self._headers_late)

    def _cancel_headers_timer(self):
        if self._headers_timer is not None:
            self._headers_timer.cancel()
            self._headers_timer = None

    def _on_headers_complete(self):
        self._cancel_headers_timer()
        return super()._on_headers_complete()

    def connection_lost(self, exc):
        self._cancel_headers_timer()
        super().connection_lost(exc)

    def _is_websocket_upgrade(self, request):
        """Nothing here speaks WebSocket: an upgrade request is answered as the plain request it also is
        (gunicorn would answer an app's refusal with an empty 403, not JSON under /api/)."""
        return False

    def _headers_late(self):
        """The deadline passed before the first request's headers were complete: 408 to a client that began
        one, a plain close of a connection that never sent a byte."""
        self._headers_timer = None
        if self._closed or self._current_request is not None:
            return
        parser = self._callback_parser
        if getattr(parser, "method", None) is not None or getattr(parser, "_buffer", None):
            self._send_error_response(408, "Request Timeout")
        self._close_transport()

    def _request_target(self) -> bytes | None:
        """The path of the request being parsed, as far as it arrived (None when unknown)."""
        parser = self._callback_parser
        path = getattr(parser, "path", None)
        if path:
            return bytes(path)
        pending = bytes(getattr(parser, "_buffer", b"")[:256])
        parts = pending.lstrip(b"\r\n").split(b" ", 2)
        return parts[1] if len(parts) > 1 else None

    def _send_error_response(self, status, message, extra_headers=()):
        detail = PROTOCOL_MESSAGES.get(status) or HTTPStatus(status).phrase
        body, content_type = error_body(status, detail, is_api_path(self._request_target()))
        reason = gunicorn_protocol._REASON_PHRASES.get(status) or HTTPStatus(status).phrase
        extra = "".join(f"{name}: {value}\r\n" for name, value in (*extra_headers, *SECURITY_HEADERS))
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            f"{extra}Connection: close\r\n\r\n"
        )
        self._safe_write(head.encode("latin-1") + body)


class BodyTooLarge(Exception):
    pass


class ClientGone(Exception):
    pass


class ThreadedWSGI:
    """Django's WSGI application run in a pool of ``threads`` threads for the event loop, with the request body
    already read (``ReadBodyFirst``: a file) and an answer that Django has whole (an ``HttpResponse``: every API
    answer and page) handed back to the loop in one piece when the view returns. Streaming answers (the exports,
    static files) are sent a chunk at a time as the application yields them, each waiting for the loop to take
    it (backpressure), never collected in memory.

    a2wsgi's ``WSGIMiddleware`` did this before, with a hand-over to the loop for each part of an answer (its
    status and headers, its body, its end) and for each read of the body, each waiting for the loop: in a worker
    whose loop and Django threads share one interpreter lock, every hand-over also waited for the lock (the
    profile in docs/benchmarks/api-load.md). Its ``build_environ`` still makes the environ."""

    def __init__(self, app, threads: int):
        self.app = app
        self.executor = ThreadPoolExecutor(thread_name_prefix="WSGI", max_workers=threads)

    async def __call__(self, scope, body, send):
        loop = asyncio.get_running_loop()
        environ = build_environ(scope, body)
        answer = _Answer(loop, send)
        run = functools.partial(contextvars.copy_context().run, answer.run, self.app, environ)
        for message in await loop.run_in_executor(self.executor, run):
            await send(message)


class _Answer:
    """One request's answer, made in a thread of the pool."""

    def __init__(self, loop, send):
        self.loop, self.send = loop, send
        self.head = None  # the status and headers, until the body goes with them
        self.sent = False  # the head has gone to the client

    def start_response(self, status, response_headers, exc_info=None):
        if exc_info is not None and self.sent:
            raise exc_info[1].with_traceback(exc_info[2])  # too late for another head (PEP 3333)
        headers = [
            (name.strip().encode("latin1").lower(), value.strip().encode("latin1")) for name, value in response_headers
        ]
        self.head = {"type": "http.response.start", "status": int(status.split(" ", 1)[0]), "headers": headers}
        return lambda chunk: self.stream({"type": "http.response.body", "body": chunk, "more_body": True})

    def run(self, app, environ) -> list:
        """The messages the loop sends once the application has returned: the whole answer, or none (streamed)."""
        iterable = app(environ, self.start_response)
        try:
            if getattr(iterable, "streaming", True) is False:  # Django's HttpResponse: its content is there
                return [self.head, {"type": "http.response.body", "body": b"".join(iterable)}]
            for chunk in iterable:
                self.stream({"type": "http.response.body", "body": chunk, "more_body": True})
            self.stream({"type": "http.response.body", "body": b""})
            return []
        finally:
            getattr(iterable, "close", lambda: None)()

    def stream(self, message) -> None:
        """Send ``message`` (after the head, the first time) and wait until the loop has."""
        messages, self.head = ([self.head, message] if self.head is not None else [message]), None
        self.sent = True

        async def send():
            for each in messages:
                await self.send(each)

        asyncio.run_coroutine_threadsafe(send(), self.loop).result()


class ReadBodyFirst:
    """ASGI application: reads the whole request body on the event loop, then runs the WSGI application
    in the thread pool with that body."""

    def __init__(self, wsgi_app, threads: int, body_timeout: float, max_body: int):
        self.threads = threads
        self.body_timeout = body_timeout
        self.max_body = max_body
        self.wsgi = ThreadedWSGI(wsgi_app, threads)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)
        else:  # "websocket": never, Protocol serves an upgrade request as a plain one
            raise ValueError(f"unsupported ASGI scope type {scope['type']!r}")

    async def _lifespan(self, receive, send):
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.wsgi.executor.shutdown(wait=False)
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _declared_length(self, scope) -> int | None:
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    return int(value)
                except ValueError:  # gunicorn answers 400 before this: no digits, no request
                    return None
        return None

    async def _http(self, scope, receive, send):
        as_json = is_api_path(scope.get("raw_path") or scope["path"].encode())
        declared = self._declared_length(scope)
        if declared is not None and declared > self.max_body:
            await self._error(send, 413, f"Request body larger than {self.max_body} bytes", as_json)
            return
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)
        try:
            try:
                async with asyncio.timeout(self.body_timeout):
                    await self._read_body(receive, spool)
            except TimeoutError:
                await self._error(
                    send, 408, f"The request body did not arrive within {self.body_timeout:g} seconds", as_json
                )
                return
            except BodyTooLarge:
                await self._error(send, 413, f"Request body larger than {self.max_body} bytes", as_json)
                return
            except ClientGone:
                return
            spool.seek(0)
            await self.wsgi(scope, spool, send)
        finally:
            spool.close()

    async def _read_body(self, receive, spool) -> None:
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise BodyTooLarge
            spool.write(chunk)
            if not message.get("more_body", False):
                return

    async def _error(self, send, status: int, message: str, as_json: bool):
        body, content_type = error_body(status, message, as_json)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", content_type.encode()),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                    *((name.lower().encode(), value.encode()) for name, value in SECURITY_HEADERS),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class Worker(gasgi.ASGIWorker):
    """gunicorn's ASGI worker serving the WSGI application (``wsgi_app``) through ``ReadBodyFirst``, with
    ``threads`` threads for Django, and ``Protocol`` for gunicorn's own error answers."""

    @classmethod
    def check_config(cls, cfg, log):
        """``threads`` is the size of Django's thread pool here, not ignored as the parent says."""

    def init_process(self):
        # gasgi builds its servers with the protocol class it imported: this worker's process serves only
        # through it, so the name is pointed at ours.
        gasgi.ASGIProtocol = Protocol
        super().init_process()

    def run(self):
        # One connection accepted at a time. The workers share one listening socket, and asyncio accepts up to
        # its ``backlog`` (100) waiting connections each time the socket is ready: a client that opens 20
        # keep-alive connections at once had 18 of them in one worker (docs/benchmarks/api-load.md), which then
        # ran nearly every request in one process while the other two idled. Accepting one per turn of the
        # loop, the workers share new connections (a busy worker's loop comes round later), as nginx's
        # ``multi_accept off``. asyncio also passes ``backlog`` to ``listen()``: the socket gets gunicorn's
        # queue length back at once.
        create_server = self.loop.create_server

        async def create_server_accepting_one(*args, **kwargs):
            server = await create_server(*args, **{**kwargs, "backlog": 1})
            kwargs["sock"].listen(self.cfg.backlog)
            return server

        self.loop.create_server = create_server_accepting_one
        super().run()

    def load_wsgi(self):
        super().load_wsgi()
        self.client_timeout = float(os.environ.get("GUNICORN_CLIENT_TIMEOUT", 30))
        self.asgi = ReadBodyFirst(
            self.asgi, threads=self.cfg.threads, body_timeout=self.client_timeout, max_body=body_limit()
        )
