"""The PROXY protocol (HAProxy's proxy-protocol.txt): the real client address in front of a TCP stream.

Inbound, when the controller ConfigMap sets `use-proxy-protocol`, the load balancer in front of us
starts every connection with a version 1 (text) or version 2 (binary) header; both are accepted.
Outbound, connections handed to nginx's passthrough TLS socket start with a version 1 header, which nginx
reads with `listen unix:... proxy_protocol` and `real_ip_header proxy_protocol`.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

V1_PREFIX = b"PROXY "
V1_MAX_LENGTH = 107  # the spec's bound for the whole line, CRLF included
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
# The spec allows 64 KiB of addresses and TLVs; load balancers send a few hundred bytes at most.
V2_MAX_PAYLOAD = 4096

Address = tuple[str, int]

_V2_COMMAND_LOCAL, _V2_COMMAND_PROXY = 0x0, 0x1
_V2_TCP4, _V2_TCP6 = 0x11, 0x21
_V2_UNSPEC_FAMILY = 0x0
_V2_UNIX_FAMILY = 0x3


class ProxyProtocolError(ValueError):
    """A connection that should start with a PROXY protocol header does not start with a valid one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyHeader:
    """A parsed header. `source`/`destination` are None for LOCAL/UNKNOWN/UNIX headers, which mean
    "use the connection's own addresses"; `length` is how many bytes the header took."""
    source: Address | None
    destination: Address | None
    length: int


def parse_header(buf: bytes | bytearray) -> ProxyHeader | None:
    """Parse a header at the start of `buf`; None while more bytes are needed to decide."""
    if not buf:
        return None
    if buf[0] == V2_SIGNATURE[0]:
        return _parse_v2(buf)
    if buf[0] == V1_PREFIX[0]:
        return _parse_v1(buf)
    raise ProxyProtocolError("connection does not start with a PROXY protocol header "
                             "(use-proxy-protocol is on: only a load balancer that sends one may connect)")


def _parse_v1(buf: bytes | bytearray) -> ProxyHeader | None:
    if buf[:len(V1_PREFIX)] != V1_PREFIX[:len(buf)]:
        raise ProxyProtocolError("bad PROXY v1 header: does not start with 'PROXY '")
    end = buf.find(b"\r\n", 0, V1_MAX_LENGTH)
    if end < 0:
        if len(buf) >= V1_MAX_LENGTH:
            raise ProxyProtocolError(f"PROXY v1 header without CRLF in its first {V1_MAX_LENGTH} bytes")
        return None
    try:
        line = bytes(buf[:end]).decode("ascii")
    except UnicodeDecodeError:
        raise ProxyProtocolError("PROXY v1 header is not ASCII") from None
    parts = line.split(" ")
    if len(parts) >= 2 and parts[1] == "UNKNOWN":
        # The spec says to ignore the rest of the line.
        return ProxyHeader(source=None, destination=None, length=end + 2)
    if len(parts) != 6 or parts[1] not in ("TCP4", "TCP6"):
        raise ProxyProtocolError(f"bad PROXY v1 header {line!r}: expected 'PROXY TCP4|TCP6 src dst sport dport'")
    version = 4 if parts[1] == "TCP4" else 6
    source = (_v1_address(parts[2], version), _v1_port(parts[4]))
    destination = (_v1_address(parts[3], version), _v1_port(parts[5]))
    return ProxyHeader(source=source, destination=destination, length=end + 2)


def _v1_address(text: str, version: int) -> str:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ProxyProtocolError(f"bad address {text!r} in PROXY v1 header") from None
    if address.version != version:
        raise ProxyProtocolError(f"address {text!r} is not IPv{version} as the PROXY v1 header says")
    return str(address)


def _v1_port(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 5 or int(text) > 65535:
        raise ProxyProtocolError(f"bad port {text!r} in PROXY v1 header")
    return int(text)


def _parse_v2(buf: bytes | bytearray) -> ProxyHeader | None:
    known = min(len(buf), len(V2_SIGNATURE))
    if buf[:known] != V2_SIGNATURE[:known]:
        raise ProxyProtocolError("bad PROXY v2 header: wrong signature")
    if len(buf) < 16:
        return None
    version, command = buf[12] >> 4, buf[12] & 0xF
    if version != 2:
        raise ProxyProtocolError(f"PROXY v2 header of version {version}")
    family = buf[13]
    length = int.from_bytes(buf[14:16], "big")
    if length > V2_MAX_PAYLOAD:
        raise ProxyProtocolError(f"PROXY v2 header of {length} bytes exceeds the limit of {V2_MAX_PAYLOAD}")
    total = 16 + length
    if len(buf) < total:
        return None
    payload = bytes(buf[16:total])
    if command == _V2_COMMAND_LOCAL:
        return ProxyHeader(source=None, destination=None, length=total)  # a health check from the load balancer itself
    if command != _V2_COMMAND_PROXY:
        raise ProxyProtocolError(f"PROXY v2 header with unknown command {command}")
    if family == _V2_TCP4:
        if length < 12:
            raise ProxyProtocolError("PROXY v2 TCP4 header too short for its addresses")
        return ProxyHeader(
            source=(str(ipaddress.IPv4Address(payload[0:4])), int.from_bytes(payload[8:10], "big")),
            destination=(str(ipaddress.IPv4Address(payload[4:8])), int.from_bytes(payload[10:12], "big")),
            length=total)
    if family == _V2_TCP6:
        if length < 36:
            raise ProxyProtocolError("PROXY v2 TCP6 header too short for its addresses")
        return ProxyHeader(
            source=(str(ipaddress.IPv6Address(payload[0:16])), int.from_bytes(payload[32:34], "big")),
            destination=(str(ipaddress.IPv6Address(payload[16:32])), int.from_bytes(payload[34:36], "big")),
            length=total)
    if family >> 4 in (_V2_UNSPEC_FAMILY, _V2_UNIX_FAMILY):
        return ProxyHeader(source=None, destination=None, length=total)  # no IP address to pass on
    raise ProxyProtocolError(f"PROXY v2 header for address family/protocol 0x{family:02x}; only TCP is proxied")


def v1_header(source: Address, destination: Address) -> bytes:
    """`PROXY TCP4|TCP6 src dst sport dport\\r\\n` for the connection `source` → `destination`.

    IPv4-mapped IPv6 addresses (a dual-stack listener's view of IPv4 clients) are written as IPv4.
    Both addresses must be of one family in a v1 header; when they are not, the destination is
    written as the unspecified address of the source's family, because the client's address is
    the part that matters to nginx.
    """
    src_ip, src_v6 = _canonical(source[0])
    dst_ip, dst_v6 = _canonical(destination[0])
    if src_v6 != dst_v6:
        dst_ip = "::" if src_v6 else "0.0.0.0"
    family = "TCP6" if src_v6 else "TCP4"
    return f"PROXY {family} {src_ip} {dst_ip} {source[1]} {destination[1]}\r\n".encode("ascii")


def _canonical(host: str) -> tuple[str, bool]:
    """(address text, is IPv6) with any zone index dropped and IPv4-mapped addresses unmapped."""
    if ":" not in host:
        return host, False  # the common case, an IPv4 socket address, needs no parsing
    address = ipaddress.IPv6Address(host.split("%", 1)[0])
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped), False
    return str(address), True
