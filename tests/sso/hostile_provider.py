"""An OpenID provider on loopback that says what a test tells it to: real HTTP, for the forgeries a real provider
never makes (an ID token for another audience, from another issuer, expired, signed by a key it does not
publish, with ``alg: none``), and for key rotation.

It serves a discovery document, its JWKS (``published``), an authorization endpoint the tests never follow (they
read the redirect to it), a token endpoint that answers ``token_answer`` (by default an ID token made from
``claims`` and signed with ``signing_key``), and an end-session endpoint. Signing uses joserfc, the JOSE library
Authlib verifies with.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

from joserfc import jws, jwt
from joserfc.jwk import RSAKey

CLIENT_ID, CLIENT_SECRET = "statestore-tests", "tests-only-client-secret"


def new_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"}, private=True)


def b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


class HostileProvider:
    def __init__(self):
        self.signing_key = new_key("key-1")
        self.published = [self.signing_key]
        self.claims: dict = {}  # the ID token's claims over the defaults (``id_token``); None removes one
        self.discovery_overrides: dict = {}
        self.discovery_answer: tuple[int, dict | bytes] | None = None  # (status, body) instead of the document
        # (status, body) instead of an ID token; a body of bytes is sent as it is, as text/html
        self.token_answer: tuple[int, dict | bytes] | None = None
        self.seen: list[tuple[str, dict]] = []  # (path, form or query) of every request
        self.nonce = ""  # the nonce of the authorization request (the test reads it from the redirect)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.port = self.server.server_address[1]
        self.issuer = f"http://127.0.0.1:{self.port}"  # a test in front of which a TcpProxy stands says its URL
        # shutdown() waits for the loop's next poll: half a second a test at the default interval
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def discovery(self) -> dict:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "end_session_endpoint": f"{self.issuer}/logout",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            # "none" offered: the dashboard must refuse it all the same.
            "id_token_signing_alg_values_supported": ["RS256", "none"],
            "code_challenge_methods_supported": ["S256"],
            **self.discovery_overrides,
        }

    def id_token_claims(self) -> dict:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": CLIENT_ID,
            "sub": "subject-alice",
            "iat": now,
            "exp": now + 300,
            "nonce": self.nonce,
            "preferred_username": "alice",
            "email": "alice@example.com",
            "groups": ["ops-viewers"],
            **self.claims,
        }
        return {name: value for name, value in claims.items() if value is not None}

    def id_token(self) -> str:
        header = {"alg": "RS256", "kid": self.signing_key.kid}
        try:
            return jwt.encode(header, self.id_token_claims(), self.signing_key)
        except UnicodeEncodeError:  # a lone surrogate: JSON can carry it as an escape, signed all the same
            payload = json.dumps(self.id_token_claims()).encode()
            return jws.serialize_compact(header, payload, self.signing_key)

    def unsigned_id_token(self) -> str:
        """``alg: none``: a header and claims, no signature."""
        return f"{b64({'alg': 'none', 'kid': self.signing_key.kid})}.{b64(self.id_token_claims())}."

    def token_response(self) -> tuple[int, dict | bytes]:
        if self.token_answer is not None:
            return self.token_answer
        return 200, {"access_token": "access-1", "token_type": "Bearer", "expires_in": 300, "id_token": self.id_token()}

    def paths(self) -> list[str]:
        return [path for path, _ in self.seen]


def _handler(provider: HostileProvider):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet: pytest shows what a failing test printed
            pass

        def _answer(self, status: int, body: dict | bytes) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html" if isinstance(body, bytes) else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            path, _, query = self.path.partition("?")
            provider.seen.append((path, parse_qs(query)))
            if path == "/.well-known/openid-configuration":
                self._answer(*(provider.discovery_answer or (200, provider.discovery())))
            elif path == "/jwks":
                self._answer(200, {"keys": [key.as_dict(private=False) for key in provider.published]})
            else:
                self._answer(404, {"error": "not_found"})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            form = parse_qs(self.rfile.read(length).decode())
            provider.seen.append((self.path, form))
            if self.path == "/token":
                self._answer(*provider.token_response())
            else:
                self._answer(404, {"error": "not_found"})

    return Handler
