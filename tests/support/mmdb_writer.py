"""A small MaxMind DB writer (format 2.0, https://maxmind.github.io/MaxMind-DB/), for test databases that nginx's
GeoIP2 module reads as it reads MaxMind's own files.

Bounds: an IPv6 tree (IPv4 networks live under ::/96, where readers look IPv4 addresses up), 32-bit records,
values of str, bool, int (a uint32, as MaxMind's ids and numbers; Uint16 and Uint64 for the others), float (a
double), dict with str keys and list. Networks may nest: a later, more specific network overrides part of an
earlier one. No pointers or deduplication inside records: a test database holds a handful of them.
"""
from __future__ import annotations

import ipaddress
import struct
import time
from pathlib import Path
from typing import Any, Mapping

METADATA_MARKER = b"\xab\xcd\xefMaxMind.com"
_DATA_SEPARATOR = bytes(16)
# Data types (the spec's numbers): those above 7 are "extended", written as 0 in the control byte plus a byte.
_STRING, _DOUBLE, _UINT16, _UINT32, _MAP, _UINT64, _ARRAY, _BOOLEAN = 2, 3, 5, 6, 7, 9, 11, 14


class Uint16(int):
    """An integer written as uint16 (the metadata's record_size and versions)."""


class Uint64(int):
    """An integer written as uint64 (the metadata's build_epoch)."""


def _control(kind: int, size: int) -> bytes:
    """The control byte (type in its top 3 bits, size in its low 5), the extended type byte, the size's bytes."""
    if size < 29:
        head, extra = size, b""
    elif size < 285:
        head, extra = 29, bytes([size - 29])
    elif size < 65821:
        head, extra = 30, (size - 285).to_bytes(2, "big")
    else:
        head, extra = 31, (size - 65821).to_bytes(3, "big")
    if kind <= 7:
        return bytes([(kind << 5) | head]) + extra
    return bytes([head, kind - 7]) + extra


def encode(value: Any) -> bytes:
    """One value in the data section's encoding."""
    if isinstance(value, bool):  # before int: a bool is an int in Python
        return _control(_BOOLEAN, int(value))
    if isinstance(value, str):
        raw = value.encode()
        return _control(_STRING, len(raw)) + raw
    if isinstance(value, int):
        kind, bits = (_UINT16, 16) if isinstance(value, Uint16) else (_UINT64, 64) if isinstance(value, Uint64) \
            else (_UINT32, 32)
        if not 0 <= value < 2**bits:
            raise ValueError(f"{value}: not an unsigned {bits}-bit integer")
        raw = value.to_bytes(8, "big").lstrip(b"\0")  # leading zero bytes are left out
        return _control(kind, len(raw)) + raw
    if isinstance(value, float):
        return _control(_DOUBLE, 8) + struct.pack(">d", value)
    if isinstance(value, Mapping):
        return _control(_MAP, len(value)) + b"".join(encode(str(k)) + encode(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return _control(_ARRAY, len(value)) + b"".join(encode(item) for item in value)
    raise TypeError(f"{type(value).__name__} values are not written")


def _prefix_bits(network: str) -> list[int]:
    """The network's prefix as bits of a 128-bit address (IPv4 under ::/96)."""
    net = ipaddress.ip_network(network)
    address = int(net.network_address)  # an IPv4 address is the low 32 bits: under ::/96
    length = net.prefixlen + (96 if net.version == 4 else 0)
    return [(address >> (127 - i)) & 1 for i in range(length)]


def build(records: Mapping[str, Any], *, database_type: str = "GeoLite2-City", build_epoch: int | None = None) -> bytes:
    """The database file mapping each network ("127.0.0.0/8", "2001:db8::/32") to its record, in order."""
    # The tree: each node a [left, right] of None (no data), ("node", index) or ("data", record index).
    nodes: list[list[tuple[str, int] | None]] = [[None, None]]
    values = list(records.values())
    for index, network in enumerate(records):
        bits = _prefix_bits(network)
        node = 0
        for depth, bit in enumerate(bits):
            if depth == len(bits) - 1:
                nodes[node][bit] = ("data", index)
                break
            child = nodes[node][bit]
            if child is None or child[0] == "data":
                nodes.append([child, child])  # a record met on the way now covers both halves below
                nodes[node][bit] = ("node", len(nodes) - 1)
                child = nodes[node][bit]
            assert child is not None
            node = child[1]
    data, offsets = b"", []
    for value in values:
        offsets.append(len(data))
        data += encode(value)
    count = len(nodes)

    def record(entry: tuple[str, int] | None) -> int:
        if entry is None:
            return count  # "no data"
        kind, index = entry
        return index if kind == "node" else count + len(_DATA_SEPARATOR) + offsets[index]

    tree = b"".join(struct.pack(">II", record(left), record(right)) for left, right in nodes)
    metadata = {"node_count": count, "record_size": Uint16(32), "ip_version": Uint16(6), "database_type": database_type,
                "languages": ["en"], "binary_format_major_version": Uint16(2),
                "binary_format_minor_version": Uint16(0),
                "build_epoch": Uint64(time.time() if build_epoch is None else build_epoch),
                "description": {"en": "pyngress test database"}}
    return tree + _DATA_SEPARATOR + data + METADATA_MARKER + encode(metadata)


def write(path: Path, records: Mapping[str, Any], **options: Any) -> Path:
    """Write the database atomically (a new file renamed over the old one), as geoipupdate replaces a database."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(build(records, **options))
    temporary.replace(path)
    return path


def city(country: str, name: str = "") -> dict[str, Any]:
    """A GeoIP2-City record for `country` (ISO code), with the fields ingress-nginx's $geoip2_* variables read."""
    record: dict[str, Any] = {"country": {"iso_code": country, "names": {"en": country}, "geoname_id": 1},
                              "continent": {"code": "EU", "names": {"en": "Europe"}, "geoname_id": 6255148}}
    if name:
        record["city"] = {"names": {"en": name}, "geoname_id": 2}
    return record
