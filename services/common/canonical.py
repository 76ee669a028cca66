"""Canonical JSON (sorted keys, no spaces, UTF-8): what digests and table versions are taken of."""
from __future__ import annotations

import json
from typing import Any

import orjson


def canonical_json(value: Any) -> bytes:
    """`value` as canonical JSON. orjson writes it several times faster than the json module (30,000 digests
    of manifests at the first scan, the routes table at every whole push); the json module takes what orjson
    refuses (an integer beyond 64 bits in a hand-written manifest)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def canonical_json_kept(value: Any) -> bytes:
    """canonical_json for bytes that are kept: orjson's result keeps the buffer it was written in (about 4 KiB
    of memory however short the JSON, measured), a copy only the JSON."""
    return bytes(memoryview(canonical_json(value)))


def json_fragment(data: bytes) -> orjson.Fragment:
    """JSON that canonical_json writes as it is inside a larger value: a table of fragments holds the bytes of
    its entries' JSON instead of their objects (at 10,000 hosts, 3 MiB of routes instead of 12). `data` must
    be canonical_json output, so that the larger value stays canonical."""
    return orjson.Fragment(data)
