"""Protocol upgrades through nginx: a websocket handshake reaches the backend and becomes a tunnel; any
other upgrade (h2c above all) is not passed on, so a backend that would accept it never sees it.

h2c smuggling: a backend that accepts `Upgrade: h2c` turns the connection into an HTTP/2 tunnel that
nginx passes through blindly, and every request sent in it skips nginx's routing and access rules.
"""
from __future__ import annotations

import base64
import json
import os
import socket
import socketserver
import threading
from typing import Iterator

import pytest

from services.syncer.model.types import HostRoutes
from tests.support.websocket import accept_key, read_head

from .conftest import route

HOST = "upgrade.test"
def read_exactly(sock: socket.socket, n: int, buffered: bytes) -> tuple[bytes, bytes]:
    while len(buffered) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed in the middle of a frame")
        buffered += chunk
    return buffered[:n], buffered[n:]


def read_frame(sock: socket.socket, buffered: bytes = b"") -> tuple[bytes, bytes]:
    """The payload of one small (< 126 bytes) websocket frame, masked or not, and the bytes after it."""
    header, buffered = read_exactly(sock, 2, buffered)
    length, masked = header[1] & 0x7F, header[1] & 0x80
    assert length < 126, "only small frames are used here"
    mask, buffered = read_exactly(sock, 4, buffered) if masked else (b"\0\0\0\0", buffered)
    payload, buffered = read_exactly(sock, length, buffered)
    return bytes(b ^ mask[i % 4] for i, b in enumerate(payload)), buffered


def text_frame(payload: bytes, masked: bool) -> bytes:
    """A small text frame; clients must mask theirs, servers must not."""
    if not masked:
        return bytes([0x81, len(payload)]) + payload
    mask = os.urandom(4)
    return bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


class UpgradeHandler(socketserver.BaseRequestHandler):
    """An HTTP/1.1 backend that switches protocols whenever a request carries an Upgrade header, whatever
    its Connection header says (as a lax h2c-capable server would), and then echoes one websocket frame.
    Any other request is answered 200 with the headers it arrived with, as JSON."""

    def handle(self) -> None:
        conn, buffered = self.request, b""
        try:
            while True:  # upstream keepalive: several requests per connection
                _, headers, buffered = read_head(conn, buffered)
                if "upgrade" in headers:
                    self._switch(headers, buffered)
                    return
                body = json.dumps({"headers": headers}).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(body) + body)
        except OSError:  # ConnectionError included: nginx closed a keepalive connection
            return

    def _switch(self, headers: dict[str, str], buffered: bytes) -> None:
        accept = accept_key(headers.get("sec-websocket-key", ""))
        self.request.sendall(f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: {headers['upgrade']}\r\n"
                             f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n".encode())
        payload, _ = read_frame(self.request, buffered)
        self.request.sendall(text_frame(payload, masked=False))


@pytest.fixture(scope="module")
def nginx(shared_nginx) -> Iterator:
    backend = socketserver.ThreadingTCPServer(("127.0.0.1", 0), UpgradeHandler)
    backend.daemon_threads = True
    threading.Thread(target=backend.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    endpoint = "127.0.0.1:%d" % backend.server_address[1]
    shared_nginx.apply(shared_nginx.config())
    shared_nginx.push({HOST: HostRoutes(prefix={"/": route("upgrade")})}, {"upgrade": [endpoint]})
    yield shared_nginx
    backend.shutdown()
    backend.server_close()


def request(nginx, headers: dict[str, str]) -> tuple[socket.socket, str, dict[str, str], bytes]:
    sock = socket.create_connection(("127.0.0.1", nginx.http_port), timeout=10)
    head = "GET /chat HTTP/1.1\r\nHost: " + HOST + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(head.encode() + b"\r\n")
    return sock, *read_head(sock)


@pytest.mark.parametrize("upgrade", ["websocket", "WebSocket"])
def test_a_websocket_handshake_goes_through_and_becomes_a_tunnel(nginx, upgrade):
    key = base64.b64encode(os.urandom(16)).decode()
    sock, status, headers, rest = request(nginx, {"Upgrade": upgrade, "Connection": "Upgrade",
                                                  "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13"})
    with sock:
        assert status.startswith("HTTP/1.1 101 "), status
        assert headers["upgrade"] == upgrade and headers["sec-websocket-accept"] == accept_key(key)

        sock.sendall(text_frame(b"hello through nginx", masked=True))
        payload, _ = read_frame(sock, rest)

    assert payload == b"hello through nginx"


@pytest.mark.parametrize("upgrade", ["h2c", "websocket, h2c", "TLS/1.0"])
def test_other_upgrades_are_not_passed_to_the_backend(nginx, upgrade):
    sock, status, headers, rest = request(nginx, {"Upgrade": upgrade, "Connection": "Upgrade, HTTP2-Settings",
                                                  "HTTP2-Settings": "AAMAAABkAARAAAAAAAIAAAAA"})
    with sock:
        assert status.startswith("HTTP/1.1 200 "), status  # the backend would have switched protocols
        length = int(headers["content-length"])
        while len(rest) < length:
            rest += sock.recv(65536)

    seen = json.loads(rest[:length])["headers"]
    assert "upgrade" not in seen
    assert "upgrade" not in seen.get("connection", "").lower()
