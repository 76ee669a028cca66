"""Incremental TLS ClientHello reader: finds the SNI host name the passthrough proxy routes on.

Bytes are fed as they arrive. The ClientHello may be split anywhere across TCP segments, and the
handshake message may be fragmented over several TLS records (RFC 8446 section 5.1 allows it; OpenSSL
reassembles it), so records are unwrapped first and the handshake message is parsed once it is whole.

Verdicts:
- `Hello(SNI, name)`: a ClientHello with a host_name in its first server_name extension (RFC 6066
  section 3), lowercased, one trailing dot removed; it is well-formed up to the end of that extension, and
  what follows is left to the TLS server that gets the bytes (as ingress-nginx's passthrough proxy does);
- `Hello(NO_SNI)`: a well-formed ClientHello without one;
- `Hello(NOT_TLS)`: the first byte is not a handshake record (0x16) or the record version's major
  byte is not 3 — plain HTTP to the HTTPS port, SSLv2-style hellos, garbage;
- `ClientHelloError`: it claims to be TLS but is malformed, or is larger than the bounds below.

Bounds (the reader is fed from the network before anything is known about the client):
- the handshake message may be at most MAX_HELLO_LENGTH (16 KiB, the size nginx's `ssl_preread`
  reads too). Real ClientHellos are well below it (about 2 KiB with post-quantum key shares); a larger
  one is refused as soon as its 4-byte handshake header arrives, so a 64 KiB hello costs 9 bytes;
- the raw bytes buffered, record headers included, may be at most MAX_BUFFERED, which leaves room for
  a hello fragmented into hundreds of records but not for unbounded tiny records.

Pure and fuzz-safe: `feed` raises nothing but ClientHelloError, whatever the input.
"""
from __future__ import annotations

import enum
import re
import struct
from dataclasses import dataclass

MAX_HELLO_LENGTH = 16 * 1024
MAX_BUFFERED = MAX_HELLO_LENGTH + 4096
# RFC 8446 section 5.1: TLSPlaintext.length MUST NOT exceed 2^14.
MAX_RECORD_PAYLOAD = 2 ** 14

_RECORD_HANDSHAKE = 0x16
_HANDSHAKE_CLIENT_HELLO = 1
_EXTENSION_SERVER_NAME = 0
_NAME_TYPE_HOST_NAME = 0
_HOST_NAME = re.compile(r"(?:[a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}")
# (content type, major version, record length, handshake type, length: high byte, low 16 bits)
_HEADERS = struct.Struct(">BBxHBBH").unpack_from
_EXTENSION_HEADER = struct.Struct(">HH").unpack_from  # (type, length)
_ONE_NAME = struct.Struct(">HBH").unpack_from  # server_name: (list length, first name's type, its length)
# Valid host names as sent -> their verdict. Only the proxy's connection thread parses hellos.
SEEN_NAMES_KEPT = 4096
_SEEN_NAMES: dict[bytes, Hello] = {}


class ClientHelloError(ValueError):
    """The client sent something that claims to be a TLS ClientHello but is malformed or too large."""


class HelloKind(enum.Enum):
    SNI = "sni"
    NO_SNI = "no SNI"
    NOT_TLS = "not TLS"


@dataclass(frozen=True, slots=True)
class Hello:
    kind: HelloKind
    server_name: str | None = None


NOT_TLS = Hello(HelloKind.NOT_TLS)
NO_SNI = Hello(HelloKind.NO_SNI)


class ClientHelloReader:
    """Feed it the first bytes of a connection until it returns a Hello; `raw` keeps them for replay."""

    __slots__ = ("raw", "max_hello_length", "_next_record", "_message", "_message_length", "result")

    def __init__(self, max_hello_length: int = MAX_HELLO_LENGTH) -> None:
        self.raw: bytes | bytearray = b""
        self.max_hello_length = max_hello_length
        self._next_record = 0  # offset in `raw` of the first record not yet unwrapped
        self._message = bytearray()  # handshake bytes unwrapped from the records so far
        self._message_length = -1  # from the handshake header, once its 4 bytes are in
        self.result: Hello | None = None

    def feed(self, data: bytes) -> Hello | None:
        """Add bytes; returns the verdict once there is one, None while more bytes are needed."""
        if not self.raw and self.result is None:
            # Most clients send the whole hello in one record and one segment: parsed in place, nothing copied.
            hello = _whole_hello(data, self.max_hello_length)
            if hello is not None:
                self.raw = data
                self.result = hello
                return hello
            self.raw = bytearray()
        raw = self.raw
        if self.result is not None:  # more bytes after the verdict: kept for replay
            self.raw = raw + data
            return self.result
        raw += data  # a bytearray from here on
        if not raw:
            return None
        if raw[0] != _RECORD_HANDSHAKE or (len(raw) > 1 and raw[1] != 3):
            self.result = NOT_TLS
            return NOT_TLS
        if len(raw) > MAX_BUFFERED:
            raise ClientHelloError(f"no complete ClientHello within {MAX_BUFFERED} bytes")
        while len(raw) - self._next_record >= 5 and self._unwrap_record():
            if self._message_length < 0 and len(self._message) >= 4:
                self._read_handshake_header()
            if 0 <= self._message_length <= len(self._message) - 4:
                self.result = _parse_client_hello(bytes(self._message[:4 + self._message_length]), 4)
                return self.result
        return None

    def _unwrap_record(self) -> bool:
        """Move the next record's payload to the handshake message; False while it is incomplete."""
        pos = self._next_record
        raw = self.raw
        if raw[pos] != _RECORD_HANDSHAKE:
            raise ClientHelloError(f"record of content type {raw[pos]} before the ClientHello was complete")
        if raw[pos + 1] != 3:
            raise ClientHelloError(f"record version {raw[pos + 1]}.{raw[pos + 2]} is not TLS")
        length = int.from_bytes(raw[pos + 3:pos + 5], "big")
        if length == 0:
            raise ClientHelloError("empty handshake record")  # forbidden by RFC 8446 section 5.1
        if length > MAX_RECORD_PAYLOAD:
            raise ClientHelloError(f"record of {length} bytes exceeds the TLS limit of {MAX_RECORD_PAYLOAD}")
        end = pos + 5 + length
        if len(raw) < end:
            # Only whole records are unwrapped, so bytes split across TCP segments are copied once.
            return False
        self._message += raw[pos + 5:end]
        self._next_record = end
        return True

    def _read_handshake_header(self) -> None:
        message = self._message
        if message[0] != _HANDSHAKE_CLIENT_HELLO:
            raise ClientHelloError(f"first handshake message is of type {message[0]}, not ClientHello (1)")
        length = int.from_bytes(message[1:4], "big")
        if length > self.max_hello_length:
            raise ClientHelloError(f"ClientHello of {length} bytes exceeds the limit of {self.max_hello_length}")
        self._message_length = length


def _truncated(field: str) -> ClientHelloError:
    return ClientHelloError(f"ClientHello truncated in {field}")


# The parsers below walk the bytes with plain offsets rather than a reader object: they run once per
# connection on the proxy's hot path, where every Python operation counts.

def _whole_hello(data: bytes, max_hello_length: int) -> Hello | None:
    """The verdict on `data` when it starts with one record that holds the whole ClientHello; None when it does
    not (then the incremental reader decides, errors included)."""
    if len(data) < 9:
        return None
    content_type, major, record_length, message_type, length_high, length_low = _HEADERS(data)
    end = 9 + (length_high << 16 | length_low)
    if content_type != _RECORD_HANDSHAKE or major != 3 or message_type != _HANDSHAKE_CLIENT_HELLO \
            or end > 5 + record_length or record_length > MAX_RECORD_PAYLOAD or end - 9 > max_hello_length \
            or 5 + record_length > len(data):
        return None
    return _parse_client_hello(data[:end], 9)


def _parse_client_hello(body: bytes, pos: int) -> Hello:
    """The ClientHello body: body[pos:] (RFC 8446 section 4.1.2; RFC 5246 section 7.4.1.2 for older clients)."""
    end = len(body)
    if end - pos < 35:
        raise _truncated("legacy_version, random and legacy_session_id")
    if body[pos] != 3:
        raise ClientHelloError("ClientHello version is not TLS")
    session_id_length = body[pos + 34]
    if session_id_length > 32:
        raise ClientHelloError("legacy_session_id longer than 32 bytes")
    pos += 35 + session_id_length
    if pos + 2 > end:
        raise _truncated("cipher_suites")
    length = body[pos] << 8 | body[pos + 1]
    if length < 2 or length % 2:
        raise ClientHelloError(f"cipher_suites of {length} bytes (must be a non-empty list of 2-byte ids)")
    pos += 2 + length
    if pos + 1 > end:
        raise _truncated("cipher_suites")
    if body[pos] == 0:
        raise ClientHelloError("empty legacy_compression_methods")
    pos += 1 + body[pos]
    if pos == end:
        return NO_SNI  # TLS 1.0-1.2 clients may omit the extensions block altogether
    if pos + 2 > end:
        raise _truncated("legacy_compression_methods or extensions")
    extensions_end = pos + 2 + (body[pos] << 8 | body[pos + 1])
    if extensions_end > end:
        raise _truncated("extensions")
    if extensions_end < end:
        raise ClientHelloError("bytes after the extensions block")
    pos += 2
    # The first server_name extension decides, and the extensions after it are not read: as in ingress-nginx's
    # own passthrough proxy. Walking them all cost a third of the proxy's work per connection, and the TLS server
    # the bytes go to refuses what is wrong with them (a second server_name among it, RFC 8446 section 4.2).
    try:
        while pos < end:
            ext_type, length = _EXTENSION_HEADER(body, pos)
            pos += 4 + length
            if ext_type == _EXTENSION_SERVER_NAME:
                if pos > end:
                    break
                return _server_name(body, pos - length, pos)
    except struct.error:
        raise _truncated("extension header") from None
    if pos > end:
        raise _truncated(f"extension {ext_type}")
    return NO_SNI


def _server_name(body: bytes, pos: int, end: int) -> Hello:
    """The server_name extension (RFC 6066 section 3): a list of (name_type, name) entries."""
    if end - pos > 5:  # what clients send: one host_name, filling the list
        list_length, name_type, name_length = _ONE_NAME(body, pos)
        if name_type == _NAME_TYPE_HOST_NAME and list_length == end - pos - 2 and name_length == list_length - 3:
            name = body[pos + 5:end]
            return _SEEN_NAMES.get(name) or _host_name(name)
    if pos + 2 > end:
        raise _truncated("server_name_list")
    list_end = pos + 2 + (body[pos] << 8 | body[pos + 1])
    if list_end > end:
        raise _truncated("server_name_list")
    if list_end < end:
        raise ClientHelloError("bytes after server_name_list")
    pos += 2
    if pos == end:
        raise ClientHelloError("empty server_name_list")
    hello: Hello | None = None
    while pos < end:
        if pos + 3 > end:
            raise _truncated("server_name")
        name_type = body[pos]
        name_end = pos + 3 + (body[pos + 1] << 8 | body[pos + 2])
        if name_end > end:
            raise _truncated("server_name")
        if name_type == _NAME_TYPE_HOST_NAME:
            if hello is not None:
                raise ClientHelloError("two host_name entries in server_name")
            hello = _host_name(body[pos + 3:name_end])
        # no other name type is defined; unknown ones carry nothing we route on
        pos = name_end
    return hello or NO_SNI


def _host_name(name: bytes) -> Hello:
    """The verdict for a host_name, remembered in _SEEN_NAMES: the clients of a busy host cost a lookup each."""
    try:
        text = name.decode("ascii").lower()
    except UnicodeDecodeError:
        raise ClientHelloError("SNI host_name is not ASCII") from None
    # RFC 6066 says no trailing dot, but some clients send one; it names the same host.
    if text.endswith("."):
        text = text[:-1]
    if len(text) > 253 or not _HOST_NAME.fullmatch(text):
        raise ClientHelloError(f"SNI host_name {text[:64]!r} is not a valid DNS name")
    if len(_SEEN_NAMES) >= SEEN_NAMES_KEPT:
        _SEEN_NAMES.clear()  # names are the client's choice: bounded, and any client may start it over
    hello = _SEEN_NAMES[name] = Hello(HelloKind.SNI, text)
    return hello
