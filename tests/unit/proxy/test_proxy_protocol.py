"""PROXY protocol v1/v2 parsing (inbound from a load balancer) and v1 building (outbound to nginx)."""
import ipaddress
import struct

import pytest

from services.proxy.proxy_protocol import V2_SIGNATURE, ProxyHeader, ProxyProtocolError, parse_header, v1_header


def v2(command: int, family: int, payload: bytes) -> bytes:
    return V2_SIGNATURE + bytes([0x20 | command, family]) + struct.pack(">H", len(payload)) + payload


def v2_tcp4(src, dst, sport, dport, tlvs=b""):
    return v2(1, 0x11, ipaddress.IPv4Address(src).packed + ipaddress.IPv4Address(dst).packed
              + struct.pack(">HH", sport, dport) + tlvs)


def test_v1_tcp4():
    data = b"PROXY TCP4 203.0.113.7 10.0.0.1 40000 443\r\n\x16\x03\x01"
    assert parse_header(data) == ProxyHeader(source=("203.0.113.7", 40000), destination=("10.0.0.1", 443),
                                             length=len(data) - 3)


def test_v1_tcp6():
    header = parse_header(b"PROXY TCP6 2001:db8::7 2001:db8::1 40000 443\r\n")
    assert header.source == ("2001:db8::7", 40000) and header.destination == ("2001:db8::1", 443)


def test_v1_unknown_uses_the_connection_addresses():
    assert parse_header(b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n") == ProxyHeader(source=None, destination=None,
                                                                                 length=35)
    assert parse_header(b"PROXY UNKNOWN\r\n") == ProxyHeader(source=None, destination=None, length=15)


def test_v2_tcp4_with_tlvs():
    data = v2_tcp4("198.51.100.9", "10.0.0.1", 41000, 443, tlvs=b"\x04\x00\x03abc") + b"\x16"
    assert parse_header(data) == ProxyHeader(source=("198.51.100.9", 41000), destination=("10.0.0.1", 443),
                                             length=len(data) - 1)


def test_v2_tcp6():
    payload = ipaddress.IPv6Address("2001:db8::9").packed + ipaddress.IPv6Address("2001:db8::1").packed
    header = parse_header(v2(1, 0x21, payload + struct.pack(">HH", 5555, 443)))
    assert header.source == ("2001:db8::9", 5555) and header.destination == ("2001:db8::1", 443)


def test_v2_local_and_unix_use_the_connection_addresses():
    assert parse_header(v2(0, 0x00, b"")) == ProxyHeader(source=None, destination=None, length=16)
    assert parse_header(v2(1, 0x31, b"\x00" * 216)) == ProxyHeader(source=None, destination=None, length=232)


@pytest.mark.parametrize("data", [
    b"PROXY TCP4 203.0.113.7 10.0.0.1 40000 443\r\n",
    v2_tcp4("198.51.100.9", "10.0.0.1", 41000, 443),
])
def test_incomplete_headers_need_more_at_every_cut(data):
    for cut in range(len(data)):
        assert parse_header(data[:cut]) is None
    assert parse_header(data) is not None


@pytest.mark.parametrize("data, reason", [
    (b"\x16\x03\x01\x02\x00", "does not start with a PROXY protocol header"),
    (b"PROXX TCP4", "does not start with 'PROXY '"),
    (b"PROXY TCP4 " + b"1" * 120, "without CRLF"),
    (b"PROXY TCP5 1.2.3.4 1.2.3.5 1 2\r\n", "expected 'PROXY TCP4|TCP6"),
    (b"PROXY TCP4 1.2.3.4 1.2.3.5 1\r\n", "expected 'PROXY TCP4|TCP6"),
    (b"PROXY TCP4 1.2.3.400 1.2.3.5 1 2\r\n", "bad address"),
    (b"PROXY TCP4 ::1 1.2.3.5 1 2\r\n", "is not IPv4"),
    (b"PROXY TCP4 1.2.3.4 1.2.3.5 65536 2\r\n", "bad port"),
    (b"PROXY TCP4 1.2.3.4 1.2.3.5 -1 2\r\n", "bad port"),
    (b"PROXY TCP4 1.2.3.4 1.2.3.5 \xd9\xa1 2\r\n", "not ASCII"),
    (V2_SIGNATURE[:5] + b"X", "wrong signature"),
    (V2_SIGNATURE + b"\x11\x11\x00\x00", "of version 1"),
    (v2(2, 0x11, b"\x00" * 12), "unknown command 2"),
    (v2(1, 0x11, b"\x00" * 8), "too short"),
    (v2(1, 0x12, b"\x00" * 12), "only TCP is proxied"),
    (V2_SIGNATURE + b"\x21\x11\xff\xff", "exceeds the limit"),
])
def test_bad_headers_say_what_is_wrong(data, reason):
    with pytest.raises(ProxyProtocolError, match=reason):
        parse_header(data)


def test_v1_header_for_ipv4_ipv6_and_mapped_clients():
    assert v1_header(("203.0.113.7", 40000), ("10.0.0.1", 443)) == b"PROXY TCP4 203.0.113.7 10.0.0.1 40000 443\r\n"
    assert v1_header(("2001:db8::7", 1), ("2001:db8::1", 443)) == b"PROXY TCP6 2001:db8::7 2001:db8::1 1 443\r\n"
    assert v1_header(("::ffff:192.0.2.1", 5), ("::ffff:10.0.0.1", 443)) == b"PROXY TCP4 192.0.2.1 10.0.0.1 5 443\r\n"
    assert v1_header(("fe80::1%eth0", 5), ("fe80::2%eth0", 443)) == b"PROXY TCP6 fe80::1 fe80::2 5 443\r\n"


def test_v1_header_keeps_the_client_address_when_families_differ():
    assert v1_header(("2001:db8::7", 1), ("10.0.0.1", 443)) == b"PROXY TCP6 2001:db8::7 :: 1 443\r\n"
    assert v1_header(("192.0.2.1", 1), ("2001:db8::1", 443)) == b"PROXY TCP4 192.0.2.1 0.0.0.0 1 443\r\n"


def test_built_v1_headers_parse_back():
    header = v1_header(("192.0.2.1", 5), ("10.0.0.1", 443))
    assert parse_header(header) == ProxyHeader(source=("192.0.2.1", 5), destination=("10.0.0.1", 443),
                                               length=len(header))
