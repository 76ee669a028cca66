"""WebSocket (RFC 6455) as far as the tests need it: a client handshake on a plain socket, small frames of any
opcode, and a backend that echoes every frame it gets (text and binary) until the client closes."""
from __future__ import annotations

import base64
import hashlib
import os
import socket
import socketserver

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, BINARY, CLOSE = 0x1, 0x2, 0x8


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def _read(sock: socket.socket, n: int, buffered: bytes) -> tuple[bytes, bytes]:
    while len(buffered) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {buffered!r}")
        buffered += chunk
    return buffered[:n], buffered[n:]


def read_head(sock: socket.socket, buffered: bytes = b"") -> tuple[str, dict[str, str], bytes]:
    """The start line and headers (lower-case names) of one HTTP/1.1 message, and the bytes read past them."""
    while b"\r\n\r\n" not in buffered:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {buffered!r}")
        buffered += chunk
    head, _, rest = buffered.partition(b"\r\n\r\n")
    start, *lines = head.decode("latin-1").split("\r\n")
    return start, {n.strip().lower(): v.strip() for n, _, v in (line.partition(":") for line in lines)}, rest


def frame(payload: bytes, opcode: int, *, masked: bool) -> bytes:
    """One small (< 126 bytes) final frame; a client masks its frames, a server does not."""
    assert len(payload) < 126, "only small frames are used here"
    if not masked:
        return bytes([0x80 | opcode, len(payload)]) + payload
    mask = os.urandom(4)
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def read_frame(sock: socket.socket, buffered: bytes = b"") -> tuple[int, bytes, bytes]:
    """The opcode and payload of one small frame, masked or not, and the bytes after it."""
    header, buffered = _read(sock, 2, buffered)
    length = header[1] & 0x7F
    assert length < 126, "only small frames are used here"
    mask, buffered = _read(sock, 4, buffered) if header[1] & 0x80 else (b"\0\0\0\0", buffered)
    payload, buffered = _read(sock, length, buffered)
    return header[0] & 0x0F, bytes(b ^ mask[i % 4] for i, b in enumerate(payload)), buffered


def handshake(sock: socket.socket, host: str, path: str = "/ws") -> tuple[str, dict[str, str], bytes, str]:
    """Send an opening handshake; the answer's status line, headers, the bytes after them, and the key sent."""
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    return *read_head(sock), key


class EchoHandler(socketserver.BaseRequestHandler):
    """Accepts a WebSocket handshake, then sends every frame back as it came until a close frame or the end."""

    def handle(self) -> None:
        try:
            _, headers, buffered = read_head(self.request)
            self.request.sendall(f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                 f"Sec-WebSocket-Accept: {accept_key(headers['sec-websocket-key'])}\r\n\r\n".encode())
            while True:
                opcode, payload, buffered = read_frame(self.request, buffered)
                self.request.sendall(frame(payload, opcode, masked=False))
                if opcode == CLOSE:
                    return
        except (OSError, KeyError):
            return
