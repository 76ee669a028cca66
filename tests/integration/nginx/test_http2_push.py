"""http2-push-preload as a client sees it through a real nginx: over HTTP/2, the resources the backend names in
"Link: <...>; rel=preload" headers arrive pushed with the answer, and without the annotation nothing is pushed.

Python has no HTTP/2 client in its standard library and curl drops pushed streams, so the client below speaks
just enough HTTP/2 (RFC 9113) to send one GET and collect every stream's body: frames are read whole, headers
are sent as HPACK literals and the answers' header blocks are not decoded (the bodies tell the streams apart)."""
from __future__ import annotations

import socket
import ssl
from http.server import BaseHTTPRequestHandler
from typing import Iterator

import pytest

from services.syncer.annotations import parse_annotations
from services.syncer.model.types import HostRoutes

from .conftest import route
from tests.support.http_servers import port_of, serving

PREFIX = "nginx.ingress.kubernetes.io"
PUSHING = parse_annotations({f"{PREFIX}/http2-push-preload": "true"}, prefix=PREFIX).profile
NOT_PUSHING = parse_annotations({f"{PREFIX}/http2-push-preload": "false"}, prefix=PREFIX).profile
STYLE = b"body { color: teal }"

DATA, HEADERS, RST_STREAM, SETTINGS, PUSH_PROMISE, GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x5, 0x7
END_STREAM, ACK, END_HEADERS, PADDED = 0x1, 0x1, 0x4, 0x8
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class _Page(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        body = STYLE if self.path == "/style.css" else b"<html>page</html>"
        self.send_response(200)
        if self.path == "/page":
            self.send_header("Link", "</style.css>; rel=preload; as=style")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def page_backend() -> Iterator[str]:
    """A backend whose /page names /style.css in a preload Link header."""
    with serving(_Page) as server:
        yield f"127.0.0.1:{port_of(server)}"


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _literal(name: str, value: str) -> bytes:
    """An HPACK literal header field without indexing, new name, no Huffman (both shorter than 127 bytes)."""
    return bytes([0, len(name)]) + name.encode() + bytes([len(value)]) + value.encode()


def _read_exactly(sock: ssl.SSLSocket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("nginx closed the HTTP/2 connection")
        data += chunk
    return data


def _unpadded(flags: int, payload: bytes) -> bytes:
    return payload[1:len(payload) - payload[0]] if flags & PADDED else payload


def http2_get(port: int, host: str, path: str) -> dict[int, bytes]:
    """GET `path` over TLS and HTTP/2; the body of every stream the server sent, by stream id (1: the answer,
    even ids: pushed)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    with context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname=host) as sock:
        assert sock.selected_alpn_protocol() == "h2"
        request = b"".join(_literal(name, value) for name, value in (
            (":method", "GET"), (":scheme", "https"), (":authority", host), (":path", path)))
        sock.sendall(PREFACE + _frame(SETTINGS, 0, 0, b"") + _frame(HEADERS, END_STREAM | END_HEADERS, 1, request))
        bodies, open_streams = {1: b""}, {1}
        while open_streams:
            head = _read_exactly(sock, 9)
            kind, flags, stream = head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = _read_exactly(sock, int.from_bytes(head[:3], "big"))
            if kind == SETTINGS and not flags & ACK:
                sock.sendall(_frame(SETTINGS, ACK, 0, b""))
            elif kind == PUSH_PROMISE:
                promised = int.from_bytes(_unpadded(flags, payload)[:4], "big") & 0x7FFFFFFF
                bodies[promised] = b""
                open_streams.add(promised)
            elif kind == DATA:
                bodies[stream] += _unpadded(flags, payload)
            elif kind in (RST_STREAM, GOAWAY):
                raise AssertionError(f"nginx ended stream {stream} with frame type {kind}: {payload.hex()}")
            if kind in (DATA, HEADERS) and flags & END_STREAM:
                open_streams.discard(stream)
        return bodies


@pytest.fixture(scope="module")
def nginx(shared_nginx):
    shared_nginx.apply(shared_nginx.config(profiles=[PUSHING, NOT_PUSHING]))
    return shared_nginx


def test_with_http2_push_preload_the_preloaded_resource_arrives_pushed(nginx, page_backend):
    nginx.push({"push.test": HostRoutes(prefix={"/": route("page", profile=PUSHING.name)})}, {"page": [page_backend]})

    bodies = http2_get(nginx.https_port, "push.test", "/page")

    assert bodies.pop(1) == b"<html>page</html>"
    assert list(bodies.values()) == [STYLE] and all(stream % 2 == 0 for stream in bodies)


@pytest.mark.parametrize("profile", [NOT_PUSHING, None], ids=["false", "absent"])
def test_without_it_nothing_is_pushed(nginx, page_backend, profile):
    nginx.push({"nopush.test": HostRoutes(prefix={"/": route("page", profile=profile.name if profile else "default")})},
               {"page": [page_backend]})

    assert http2_get(nginx.https_port, "nopush.test", "/page") == {1: b"<html>page</html>"}
