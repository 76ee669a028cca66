"""A real HTTP auth service for auth-url tests (a thread in the test process).

It answers by the X-Test-Verdict header the client sends (the auth request carries the client's headers):
allow (200, with X-Auth-Request-User and a Set-Cookie), allow-quietly (200 alone), deny (401), forbid
(403) or fail (500). It records each request it was sent, with the client port of its TCP connection.
"""
from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

from tests.support.http_servers import serving


class _AuthHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        self.server.seen.append({"method": self.command, "path": self.path, "peer_port": self.client_address[1],
                                 "headers": {k.lower(): v for k, v in self.headers.items()}})
        verdict = self.headers.get("X-Test-Verdict", "allow")
        code = {"allow": 200, "allow-quietly": 200, "deny": 401, "forbid": 403, "fail": 500}[verdict]
        self.send_response(code)
        if verdict == "allow":
            self.send_header("X-Auth-Request-User", "alice")
            self.send_header("Set-Cookie", "session=from-auth")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_HEAD = _answer

    def log_message(self, *args) -> None:
        pass


class AuthService(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.seen: list[dict] = []

    @property
    def port(self) -> int:
        return self.server_address[1]


def running_auth_service() -> Iterator[AuthService]:
    """A started AuthService, shut down when the generator is closed (a fixture's body)."""
    with serving(_AuthHandler, server_class=AuthService) as service:
        assert isinstance(service, AuthService)
        yield service
