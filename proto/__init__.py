"""Messages exchanged between pyngress processes: envelope, codec, types and endpoint names."""
from proto.codec import (ITEMS_ENVELOPE_BYTES, PROTOCOL_VERSION, Envelope, ProtocolError, decode, encode,
                         encode_snapshot, encode_snapshot_part, encode_update, encode_updates, item_bytes, pack_value,
                         unpack_value)

__all__ = ["ITEMS_ENVELOPE_BYTES", "PROTOCOL_VERSION", "Envelope", "ProtocolError", "decode", "encode",
           "encode_snapshot", "encode_snapshot_part", "encode_update", "encode_updates", "item_bytes", "pack_value",
           "unpack_value"]
