"""Real and hand-built TLS ClientHello bytes for the proxy's tests (unit and integration)."""
from __future__ import annotations

import os
import ssl
import struct
from typing import Iterable


def client_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def first_flight(obj: ssl.SSLObject, outgoing: ssl.MemoryBIO) -> bytes:
    """Start the handshake of `obj` and return the bytes it wants to send: its ClientHello record."""
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def client_hello(server_name: str | None, ctx: ssl.SSLContext | None = None) -> bytes:
    """The ClientHello OpenSSL sends for `server_name` (None: no SNI), as one TLS record."""
    outgoing = ssl.MemoryBIO()
    obj = (ctx or client_context()).wrap_bio(ssl.MemoryBIO(), outgoing, server_hostname=server_name)
    return first_flight(obj, outgoing)


def split_records(flight: bytes) -> list[tuple[int, bytes, bytes]]:
    """(content type, version, payload) of each TLS record in `flight`."""
    records = []
    pos = 0
    while pos < len(flight):
        ctype, version, length = flight[pos], flight[pos + 1:pos + 3], struct.unpack(">H", flight[pos + 3:pos + 5])[0]
        records.append((ctype, version, flight[pos + 5:pos + 5 + length]))
        pos += 5 + length
    return records


def reframe(flight: bytes, fragment_sizes: Iterable[int]) -> bytes:
    """The same handshake bytes, re-cut into records of the given payload sizes (the last one takes the rest)."""
    out = bytearray()
    for ctype, version, payload in split_records(flight):
        sizes = iter(fragment_sizes)
        pos = 0
        while pos < len(payload):
            size = next(sizes, len(payload) - pos)
            chunk = payload[pos:pos + size]
            out += bytes([ctype]) + version + struct.pack(">H", len(chunk)) + chunk
            pos += size
    return bytes(out)


def _vector(length_size: int, data: bytes) -> bytes:
    return len(data).to_bytes(length_size, "big") + data


def server_name_extension(*names: tuple[int, bytes]) -> bytes:
    entries = b"".join(bytes([name_type]) + _vector(2, name) for name_type, name in names)
    return struct.pack(">H", 0) + _vector(2, _vector(2, entries))


def built_hello(extensions: bytes | None, cipher_suites: bytes = b"\x13\x01\x13\x02",
                session_id: bytes = b"", version: bytes = b"\x03\x03") -> bytes:
    """A ClientHello handshake message (header included) from parts; None: no extensions block."""
    body = (version + os.urandom(32) + _vector(1, session_id) + _vector(2, cipher_suites) + _vector(1, b"\x00")
            + (b"" if extensions is None else _vector(2, extensions)))
    return b"\x01" + _vector(3, body)


def as_records(handshake: bytes, record_size: int = 16384) -> bytes:
    """Wrap handshake bytes into handshake records of at most `record_size` bytes."""
    out = bytearray()
    for pos in range(0, len(handshake), record_size):
        chunk = handshake[pos:pos + record_size]
        out += b"\x16\x03\x01" + struct.pack(">H", len(chunk)) + chunk
    return bytes(out)


def long_hello(server_name: str, cipher_suite_count: int) -> bytes:
    """A ClientHello handshake message made long by its cipher suite list (at most 32767 entries)."""
    return built_hello(server_name_extension((0, server_name.encode())),
                       cipher_suites=b"\x13\x01" * cipher_suite_count)


def huge_hello(server_name: str) -> bytes:
    """A ClientHello of just over 64 KiB, in 16 KiB records."""
    return as_records(long_hello(server_name, 32767))
