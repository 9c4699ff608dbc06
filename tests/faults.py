"""Network faults for tests: a TCP proxy on 127.0.0.1 in front of a database server.

``TcpProxy(target_port)`` listens on a free port of its own and forwards byte for byte. Its mode can be
switched at any time, for connections already open and new ones alike:

- ``pass_through()``: forward (what a black hole held back is delivered late, as after a network cut heals);
- ``black_hole()``: accept connections and keep them open, forward nothing in either direction: a server
  (or network) that stops answering mid-session, or accepts connections and never answers;
- ``refuse()``: close the listening socket (connections are refused) and reset every open connection:
  a server that is down;
- ``black_hole_on(marker)``: forward until a client sends ``marker`` (a table's name, say), then be a black
  hole from that message on: a server that stops answering in the middle of a request.

- ``answer(response, times)``: answer the next ``times`` requests itself (the next messages clients send, on
  connections open or new) with ``response`` (raw bytes: an HTTP 503 or 429, say), and close their connections:
  a server or gateway that is overloaded.

``sent`` keeps the first bytes of each message clients sent through (an HTTP request line, say).
``accepted`` counts the connections clients opened through the proxy (connection attempts); ``holding``
counts the clients a black hole is holding right now (a connection it accepted, or a message it read and keeps
back): how a test knows that a request is waiting on the database without waiting a fixed time.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

PASS, BLACK_HOLE, REFUSE = "pass", "black hole", "refuse"
POLL = 0.02


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0): the peer sees 'connection reset', not an orderly end; a thread of ours
    blocked reading it wakes up."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1"):
        self.target = (target_host, target_port)
        self.mode = PASS
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._stopped = False
        self._marker: bytes | None = None
        self._answers: list[bytes] = []
        self.answered = 0
        self.sent: list[bytes] = []  # the start of each message clients sent through
        self.accepted = 0
        self.holding = 0
        self._listener = self._listen(0)
        self.port = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept_loop, name="tcp-proxy-accept", daemon=True)
        self._acceptor.start()

    # -- switches ------------------------------------------------------------------------------------
    def pass_through(self) -> None:
        self._switch(PASS)

    def black_hole(self) -> None:
        self._switch(BLACK_HOLE)

    def black_hole_on(self, marker: bytes) -> None:
        self._marker = marker

    def answer(self, response: bytes, times: int = 1) -> None:
        with self._lock:
            self._answers = [response] * times

    def refuse(self) -> None:
        with self._lock:
            self.mode = REFUSE
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            _reset(sock)
        while self._listener is not None:  # the accept loop closes it: from then on, connections are refused
            time.sleep(POLL / 2)

    def _switch(self, mode: str) -> None:
        with self._lock:
            self.mode = mode
            self._marker = None
            if self._listener is None:
                self._listener = self._listen(self.port)

    def stop(self) -> None:
        self.refuse()
        self._stopped = True
        self._acceptor.join(timeout=2)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- machinery -----------------------------------------------------------------------------------
    def _listen(self, port: int) -> socket.socket:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        listener.settimeout(POLL)
        return listener

    def _accept_loop(self) -> None:
        while not self._stopped:
            with self._lock:  # only this thread closes the listener: nothing waits on a closed socket
                if self.mode == REFUSE and self._listener is not None:
                    self._listener.close()
                    self._listener = None
                listener = self._listener
            if listener is None:
                time.sleep(POLL)
                continue
            try:
                client, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            client.settimeout(None)
            with self._lock:
                self.accepted += 1
            if self._track(client):
                threading.Thread(target=self._serve, args=(client,), name="tcp-proxy-conn", daemon=True).start()

    def _track(self, sock: socket.socket) -> bool:
        with self._lock:
            if self.mode == REFUSE:
                _reset(sock)
                return False
            self._sockets.add(sock)
            return True

    def _hold(self, client: bool = False) -> bool:
        """Wait while the proxy is a black hole; False when the connection must end (refused or stopped).
        ``client``: what is held comes from a client (counted in ``holding``)."""
        held = client and self.mode == BLACK_HOLE
        if held:
            with self._lock:
                self.holding += 1
        try:
            while self.mode == BLACK_HOLE and not self._stopped:
                time.sleep(POLL)
        finally:
            if held:
                with self._lock:
                    self.holding -= 1
        return self.mode == PASS and not self._stopped

    def _serve(self, client: socket.socket) -> None:
        if not self._hold(client=True):  # accepted during a black hole: nothing reaches the server until it passes
            _reset(client)
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            _reset(client)
            return
        upstream.settimeout(None)
        if not self._track(upstream):
            _reset(client)
            return
        for source, sink, watch in ((client, upstream, True), (upstream, client, False)):
            threading.Thread(target=self._pump, args=(source, sink, watch), name="tcp-proxy-pump", daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, watch: bool) -> None:
        try:
            while chunk := source.recv(65536):
                if watch and self._answers:
                    with self._lock:
                        canned = self._answers.pop(0) if self._answers else None
                    if canned is not None:  # a request: answered here, and the connection closed after it
                        source.sendall(canned)
                        with self._lock:
                            self.answered += 1
                        break
                if watch:
                    self.sent.append(chunk[:200])
                marker = self._marker
                if watch and marker is not None and marker in chunk:
                    self.black_hole()  # this message, and everything after it, is held back
                if not self._hold(client=watch):
                    break
                sink.sendall(chunk)
        except OSError:
            pass
        for sock in (source, sink):
            with self._lock:
                self._sockets.discard(sock)
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
