"""The msgpack envelope every inter-process message travels in.

`{"v": <protocol version>, "type": <message type>, "seq": <publisher sequence>, "body": {...}}`

`decode` validates the envelope and the body against the schema registered for its type, so a
receiver never acts on half a message.

The version changes when a receiver of the previous version would misread a message. A new message type or
a new optional field keeps it: a receiver that does not know them rejects the message (unknown type or
field) rather than misreading it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import msgpack

from proto.schemas import BODY_SCHEMAS, SchemaError, check_body

PROTOCOL_VERSION = 1


class ProtocolError(ValueError):
    """A message that cannot be decoded or does not match its schema."""


@dataclass(frozen=True)
class Envelope:
    type: str
    body: dict[str, Any]
    seq: int = 0
    v: int = PROTOCOL_VERSION


def encode(msg_type: str, body: dict[str, Any], seq: int = 0) -> bytes:
    """Pack a message; the body is validated first so a sender cannot emit what receivers reject."""
    if msg_type not in BODY_SCHEMAS:
        raise ProtocolError(f"unknown message type {msg_type!r}; known: {', '.join(sorted(BODY_SCHEMAS))}")
    try:
        check_body(msg_type, body)
    except SchemaError as err:
        raise ProtocolError(f"{msg_type}: {err}") from None
    return msgpack.packb({"v": PROTOCOL_VERSION, "type": msg_type, "seq": seq, "body": body}, use_bin_type=True)


def pack_value(value: Any) -> bytes:
    """One value as msgpack, the way `encode` packs it inside a message."""
    return msgpack.packb(value, use_bin_type=True)


def unpack_value(data: bytes) -> Any:
    """A value `pack_value` packed."""
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


# Messages whose values are already packed (pack_value) are put together from bytes: a publisher keeps its
# state packed (a tenth of the memory of the objects) and neither packs a value twice nor unpacks its state for
# a snapshot. clone.update and clone.snapshot accept any value, so there is nothing to validate; the bytes are
# those `encode` gives (tests/unit/test_proto.py).

def _envelope_head(packer: msgpack.Packer, msg_type: str, seq: int, body_fields: int) -> list[bytes]:
    return [packer.pack_map_header(4), packer.pack("v"), packer.pack(PROTOCOL_VERSION), packer.pack("type"),
            packer.pack(msg_type), packer.pack("seq"), packer.pack(seq), packer.pack("body"),
            packer.pack_map_header(body_fields)]


def encode_update(epoch: str, seq: int, key: str, packed_value: bytes) -> bytes:
    """A clone.update message setting `key` to a packed value."""
    packer = msgpack.Packer(use_bin_type=True)
    return b"".join([*_envelope_head(packer, "clone.update", seq, 3), packer.pack("epoch"), packer.pack(epoch),
                     packer.pack("key"), packer.pack(key), packer.pack("value"), packed_value])


# What the envelope and the fields beside `items` add to a message of items, at most (an epoch of up to 64
# characters): a message of items fits a limit when their item_bytes() add up to the limit less this.
ITEMS_ENVELOPE_BYTES = 256


def item_bytes(key: str, packed_value: bytes) -> int:
    """What one [key, packed value] pair adds to a message of items, at most."""
    return 6 + len(key.encode()) + len(packed_value)


def encode_snapshot(epoch: str, seq: int, packed_items: Iterable[tuple[str, bytes]], *, parts: int = 0) -> bytes:
    """A clone.snapshot message of packed values: the whole snapshot, or its end after `parts` parts."""
    return _encode_items("clone.snapshot", epoch, seq, packed_items, {"parts": parts} if parts else {})


def encode_snapshot_part(epoch: str, seq: int, part: int, packed_items: Iterable[tuple[str, bytes]]) -> bytes:
    """Part number `part` (from 0) of the snapshot reflecting update `seq`: a clone.snapshot_part message."""
    return _encode_items("clone.snapshot_part", epoch, seq, packed_items, {"part": part})


def encode_updates(epoch: str, last_seq: int, packed_items: Iterable[tuple[str, bytes]]) -> bytes:
    """A clone.updates message setting each key to its packed value; the last one is update number `last_seq`."""
    return _encode_items("clone.updates", epoch, last_seq, packed_items)


def _encode_items(msg_type: str, epoch: str, seq: int, packed_items: Iterable[tuple[str, bytes]],
                  fields: dict[str, int] | None = None) -> bytes:
    """The message's body is its epoch, then `fields` in order, then the items."""
    items = list(packed_items)
    fields = fields or {}
    packer = msgpack.Packer(use_bin_type=True)
    parts = [*_envelope_head(packer, msg_type, seq, 2 + len(fields)), packer.pack("epoch"), packer.pack(epoch)]
    for name, value in fields.items():
        parts += (packer.pack(name), packer.pack(value))
    parts += (packer.pack("items"), packer.pack_array_header(len(items)))
    pair = packer.pack_array_header(2)
    for key, packed in items:
        parts += (pair, packer.pack(key), packed)
    return b"".join(parts)


def decode(data: bytes) -> Envelope:
    """Unpack and validate one message, raising ProtocolError with the reason when it is not acceptable."""
    try:
        raw = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, TypeError) as err:
        raise ProtocolError(f"message is not valid msgpack: {err}") from None
    if not isinstance(raw, dict):
        raise ProtocolError(f"message must be a map, got {type(raw).__name__}")
    missing = {"v", "type", "seq", "body"} - raw.keys()
    if missing:
        raise ProtocolError(f"message lacks envelope field(s): {', '.join(sorted(missing))}")
    if raw["v"] != PROTOCOL_VERSION:
        raise ProtocolError(
            f"unsupported protocol version {raw['v']!r} (this process speaks {PROTOCOL_VERSION}); "
            "run the same pyngress version in every process")
    msg_type, seq, body = raw["type"], raw["seq"], raw["body"]
    if not isinstance(msg_type, str) or msg_type not in BODY_SCHEMAS:
        raise ProtocolError(f"unknown message type {msg_type!r}")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise ProtocolError(f"seq must be a non-negative integer, got {seq!r}")
    if not isinstance(body, dict):
        raise ProtocolError(f"{msg_type}: body must be a map, got {type(body).__name__}")
    try:
        check_body(msg_type, body)
    except SchemaError as err:
        raise ProtocolError(f"{msg_type}: {err}") from None
    return Envelope(type=msg_type, body=body, seq=seq)
