"""A real FastCGI responder for backend-protocol FCGI tests (a thread in the test process), speaking the FastCGI
1.0 record protocol over TCP as php-fpm does.

Each request is answered 200 with a JSON body: "Hello world!" (what ingress-nginx's fastcgi-helloserver says),
the FastCGI parameters nginx sent, and the size of the body it read. A request whose SCRIPT_NAME ends in
"/missing" is answered 404 by the application.
"""
from __future__ import annotations

import json
import socket
import socketserver
import struct
import threading
from typing import Iterator

_HEADER = struct.Struct("!BBHHBx")  # version, type, request id, content length, padding length
_BEGIN_REQUEST, _END_REQUEST, _PARAMS, _STDIN, _STDOUT = 1, 3, 4, 5, 6
_KEEP_CONN = 1


def _read_exactly(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the FastCGI client closed the connection")
        data += chunk
    return data


def _read_record(connection: socket.socket) -> tuple[int, int, bytes]:
    _, kind, request_id, length, padding = _HEADER.unpack(_read_exactly(connection, _HEADER.size))
    content = _read_exactly(connection, length + padding)[:length]
    return kind, request_id, content


def _record(kind: int, request_id: int, content: bytes = b"") -> bytes:
    return _HEADER.pack(1, kind, request_id, len(content), 0) + content


def _length(data: bytes, at: int) -> tuple[int, int]:
    if data[at] < 128:
        return data[at], at + 1
    return struct.unpack("!I", data[at:at + 4])[0] & 0x7FFFFFFF, at + 4


def _name_values(data: bytes) -> dict[str, str]:
    pairs, at = {}, 0
    while at < len(data):
        name_length, at = _length(data, at)
        value_length, at = _length(data, at)
        name = data[at:at + name_length].decode("latin-1")
        pairs[name] = data[at + name_length:at + name_length + value_length].decode("latin-1")
        at += name_length + value_length
    return pairs


class _Responder(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        connection: socket.socket = self.request
        try:
            while self._answer_one(connection):
                pass
        except ConnectionError:
            pass

    def _answer_one(self, connection: socket.socket) -> bool:
        """Answer one request; whether the connection stays open for another (FCGI_KEEP_CONN)."""
        kind, request_id, content = _read_record(connection)
        if kind != _BEGIN_REQUEST:
            return False
        keep = bool(content[2] & _KEEP_CONN)
        params, body = b"", b""
        while True:
            kind, _, content = _read_record(connection)
            if kind == _PARAMS:
                params += content
            elif kind == _STDIN:
                if not content:
                    break
                body += content
        seen = _name_values(params)
        self.server.seen.append(seen)  # type: ignore[attr-defined]
        status = "404 Not Found" if seen.get("SCRIPT_NAME", "").endswith("/missing") else "200 OK"
        payload = json.dumps({"message": "Hello world!", "params": seen, "body_bytes": len(body)}).encode()
        answer = f"Status: {status}\r\nContent-Type: application/json\r\n\r\n".encode() + payload
        for at in range(0, len(answer), 65535):
            connection.sendall(_record(_STDOUT, request_id, answer[at:at + 65535]))
        connection.sendall(_record(_STDOUT, request_id) + _record(_END_REQUEST, request_id, bytes(8)))
        return keep


class FastCgiServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__((host, 0), _Responder)
        self.seen: list[dict[str, str]] = []  # the parameters of each request, in order

    @property
    def port(self) -> int:
        return self.server_address[1]


def running_fastcgi_server(host: str = "127.0.0.1") -> Iterator[FastCgiServer]:
    """A started FastCgiServer, shut down when the generator is closed (a fixture's body)."""
    server = FastCgiServer(host)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()
